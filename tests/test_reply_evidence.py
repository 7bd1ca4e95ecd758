"""Which sentence of a reply each used fact supports (pure, no model)."""

from reveriemem.core.text import split_sentences
from reveriemem.inference.offline_reader import Rarity
from reveriemem.inference.reply_evidence import sentence_support
from reveriemem.inference.trace import RecalledFact


def _fact(fact_id: str, text: str, evidence: str = "", start: int = 0) -> RecalledFact:
    return RecalledFact(fact_id=fact_id, text=text, visibility=["mara"], routes=["direct"], evidence=evidence,
                        route="direct", source_start=start, source_end=start + len(text), known_from=start,
                        scene_id=1, score=None, similarity=None, probe=None, round=1)


CASK = _fact("f1", "Mara filled the Horn Lamp from the cask nearest the door.", start=100)
PRESS = _fact("f2", "Elspeth locked the ledger in the iron press.", start=400)
RARITY = Rarity([CASK.text, PRESS.text, "The door of the lamp room was open.", "Mara walked to the harbour door."])


def test_each_sentence_names_the_facts_it_quotes_or_shares_rare_words_with():
    reply = ("As I remember it: \"I filled the Horn Lamp from the cask nearest the door.\" "
             "The ledger went into the iron press. Nothing else comes to mind.")
    marks = sentence_support(reply, [CASK, PRESS], RARITY, names=["Mara"])
    assert [m.text for m in marks] == split_sentences(reply) and len(marks) == 3
    assert marks[1].text == "The ledger went into the iron press."
    assert [[f.fact_id for f in m.facts] for m in marks] == [["f1"], ["f2"], []]
    assert marks[0].to_dict()["facts"] == [{"id": "f1", "source_start": 100, "source_end": 100 + len(CASK.text)}]


def test_a_common_word_alone_supports_nothing_and_a_refusal_has_no_facts():
    marks = sentence_support("I stood by the door. The lamp was lit.", [CASK], RARITY, names=["Mara"])
    assert all(m.facts == [] for m in marks)
    refusal = sentence_support("I can't tell you that; it is nothing I saw or heard for myself.", [], RARITY)
    assert len(refusal) == 1 and refusal[0].facts == []


def test_an_option_chosen_offline_rests_on_the_facts_it_was_chosen_from():
    reply = "(A) The iron press. That much I know for myself."
    marks = sentence_support(reply, [PRESS], RARITY, names=["Mara"], option=True)
    assert [[f.fact_id for f in m.facts] for m in marks] == [["f2"], []]
    # not an option: only what the sentence quotes or shares rare words with
    plain = sentence_support("(A) Mara. That much I know for myself.", [PRESS], RARITY, names=["Mara"])
    assert [[f.fact_id for f in m.facts] for m in plain] == [[], []]
