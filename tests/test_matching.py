"""Matching free-form replies to KBF-QA letters: the hard replies a reader of the scores would notice."""

from __future__ import annotations

import json

import pytest

from eval.items import LETTERS, REFUSAL_OPTION, KBFItem
from eval.matching import Match, match_reply, matched_letter
from reveriemem.core.demo import DEMO_SLUG, demo_book_path


def _item(question: str, *options: str, gold: str = "B", split: str = "KRf") -> KBFItem:
    return KBFItem(id="q", book="the-lamplighters-ledger", character="Mara Quell", split=split, question=question,
                   options=dict(zip(LETTERS, [*options, REFUSAL_OPTION])), gold=gold)


CASK = _item("Mara, from which cask did you fill the Horn Lamp on the fourteenth?",
             "A cask fresh off Greaves's cart", "The cask nearest the door", "A cask from the back of the north wall",
             "The cask kept at the Horn Lamp post")
CHEST = _item("Osric, where was the Ledger of Lights kept while it was gone from the Hall?",
              "Under a loose hearthstone", "Inside a flour crock in the larder", "In a sea chest under a bed",
              "Between the mattress and the bed boards", gold="E", split="KR")
KEEPERS = _item("Mistress Vane, how many lamplighters now keep the Horn Lamp through the dark, by the Master's order?",
                "One", "Two", "Three", "Four", gold="E", split="KR")
BOATS = _item("Captain Dask, how many boats went onto the Teeth in the Widow's Gale?",
              "Seven", "Nine", "Eleven", "Twelve", gold="C")
KEY = _item("Mistress Vane, whose key was used to take the ledger out of the iron press?",
            "The Master's key on his chain", "The clerk's own key", "The key on the hook", "No key; the lock was picked",
            gold="E", split="KR")
CROWN = _item("Tobin, what does the Master's notice promise to whoever returns the Ledger of Lights?",
              "A year's wages", "A journeyman's pole", "A place on the Horn Lamp watch", "A silver crown", gold="D")

HARD_REPLIES = [
    # explicit letters
    ("(B)", CASK, "B", "letter"),
    ("B) The cask nearest the door", CASK, "B", "letter"),
    ("Answer: B", CASK, "B", "letter"),
    ("I'd say B.", CASK, "B", "letter"),
    ("Option C, I believe.", CASK, "C", "letter"),
    ('{"answer": "D"}', CASK, "D", "letter"),
    ("**Answer:** (b)", CASK, "B", "letter"),
    ("Definitely A!", KEEPERS, "A", "letter"),
    ("a) the cask nearest the door", CASK, "A", "letter"),  # the explicit letter outranks the text
    ("I'd pick E.", CASK, "E", "letter"),
    # the article "a" / a capital "A" opening a noun phrase / an initial are no letters
    ("I'd say a cask from the back of the north wall.", CASK, "C", "option-text"),
    ("A silver crown, the notice says.", CROWN, "D", "option-text"),
    ("A cask fresh off Greaves's cart.", CASK, "A", "option-text"),
    ("Captain C. Dask would know better than I, but it was eleven.", BOATS, "C", "option-text"),
    ("We had no plan B that night; I filled it from the cask nearest the door.", CASK, "B", "option-text"),
    # refusals in character, without a letter
    ("I wasn't there that night; I couldn't tell you.", CASK, "E", "refusal"),
    ("That is beyond what I know.", CASK, "E", "refusal"),
    ("I have no knowledge of that", CASK, "E", "refusal"),
    ("Nobody told me", CASK, "E", "refusal"),
    ("No one told me.", KEEPERS, "E", "refusal"),  # not option A, "One"
    ("I cannot answer this from my own knowledge.", CASK, "E", "refusal"),
    ("I'm afraid I don't know, miss.", CASK, "E", "refusal"),
    ("I'm not sure.", CASK, "E", "refusal"),
    ("I know nothing of any sea chest or hearthstone.", CHEST, "E", "refusal"),  # options inside the refusal
    ("I couldn't tell you whether it was the sea chest, the hearthstone or the crock.", CHEST, "E", "refusal"),
    # option texts quoted or paraphrased; words of the question do not count
    ("It was the cask by the door.", CASK, "B", "paraphrase"),
    ("In a chest beneath his bed.", CHEST, "C", "paraphrase"),
    ("There are 2 of us now.", KEEPERS, "B", "option-text"),
    ("It wasn't a key at all - the lock was picked.", KEY, "D", "paraphrase"),
    ("Aye, from the cask nearest the door, same as always, though Greaves's cart had come that morning with fresh "
     "casks.", CASK, "B", "option-text"),
    # several options: a marked one wins, an unmarked pair is ambiguous
    ("I'd say B - no, I'd go with C.", CASK, "C", "letter"),
    ("Not B, it's C.", CASK, "C", "letter"),
    ("B or C, I think.", CASK, None, "ambiguous"),
    ("Either the cask by the door or one from the north wall.", CASK, None, "ambiguous"),
    ("The cask nearest the door, or perhaps the cask kept at the Horn Lamp post. I'd go with the one at the post.",
     CASK, "D", "paraphrase"),
    ("It wasn't the cask by the door; it was one from the north wall.", CASK, "C", "paraphrase"),
    ("Wasn't it the cask by the door?", CASK, "B", "paraphrase"),
    # the last stance wins: an answer then a refusal refuses; a refusal then an answer answers
    ("It might be the cask by the door, but truly I cannot say", CASK, "E", "refusal"),
    ("I'd say B, but honestly I wasn't there.", CASK, "E", "refusal"),
    ("I wasn't there, but Tobin said it was the cask by the door.", CASK, "B", "paraphrase"),
    ("The answer is C, though I cannot say for certain.", CASK, "C", "letter"),  # a hedge, not a refusal
    ("I can't say I blame her. She took the cask nearest the door.", CASK, "B", "option-text"),
    ("I don't know why you ask; it was the cask nearest the door.", CASK, "B", "option-text"),
    # nothing to match
    ("", CASK, None, "empty"),
    ("  \n\t ", CASK, None, "empty"),
    ("Why do you ask?", CASK, None, "unmatched"),
]


@pytest.mark.parametrize(("reply", "item", "letter", "how"), HARD_REPLIES, ids=[c[0][:40] or "empty" for c in HARD_REPLIES])
def test_hard_replies(reply: str, item: KBFItem, letter: str | None, how: str):
    assert match_reply(reply, item) == Match(letter, how)


def test_every_demo_option_quoted_or_named_matches_its_letter():
    records = json.loads(demo_book_path().with_name(f"{DEMO_SLUG}.gold.json").read_text(encoding="utf-8"))
    for record in records["items"]:
        item = _item(record["question"], *[record["options"][letter] for letter in "ABCD"])
        for letter in LETTERS:
            text = item.options[letter]
            for reply in (text, f"({letter}) {text}", f"The answer is {letter}.", f"I reckon it was {text.lower()}, sir."):
                assert match_reply(reply, item).letter == letter, (record["id"], reply)


def test_matching_is_deterministic_and_a_match_is_frozen():
    reply = "It might be the cask by the door, or the one at the post; I'd go with the door."
    assert len({match_reply(reply, CASK) for _ in range(5)}) == 1
    with pytest.raises(AttributeError):
        match_reply(reply, CASK).letter = "A"  # type: ignore[misc]


def test_a_method_s_own_choice_outranks_its_reply():
    assert matched_letter("I couldn't tell you.", CASK, choice="b") == "B"
    assert matched_letter("I couldn't tell you.", CASK, choice=None) == "E"
    assert matched_letter("I couldn't tell you.", CASK, choice="Z") == "E"
