"""The evidence answerer: calibrated on the train part only, judged on the rest, deterministic."""

from __future__ import annotations

import json

import pytest

from eval.generate import book_items
from eval.items import gold_items
from eval.memory import load_book_memory
from eval.methods.base import MethodContext
from eval.methods.common import answer_options
from eval.methods.evidence import CALIBRATION_FILE, EvidenceAnswerer
from eval.metrics import kbf
from reveriemem.core.demo import demo_gold
from reveriemem.core.embeddings import HashEmbedder
from reveriemem.core.registry import load_book
from reveriemem.core.settings import data_home
from reveriemem.inference.offline_reader import Rarity, SupportIndex, best_option
from reveriemem.models import open_model


def _answerer(slug: str) -> EvidenceAnswerer:
    ctx = MethodContext(book=load_book(slug), handle=open_model("none"), embedder=HashEmbedder(),
                        work_dir=data_home() / "eval-work" / "evidence")
    return EvidenceAnswerer(ctx)


def _scores(answerer: EvidenceAnswerer, items) -> tuple[float, float, float]:
    krf = [answerer.answer(i).choice == i.gold for i in items if i.split == "KRf"]
    kr = [answerer.answer(i).choice == i.gold for i in items if i.split == "KR"]
    a, b = sum(krf) / len(krf), sum(kr) / len(kr)
    return a, b, kbf(a, b, len(krf), len(kr))


def test_an_option_scores_by_what_it_adds_over_the_question(demo_book) -> None:
    passages = ["Mara filled the Horn Lamp from the cask nearest the door.",
                "The Horn Lamp stands on the harbour wall; the Horn Lamp burns all night."]
    index = SupportIndex(passages, Rarity(passages), window=1)
    [item] = gold_items(demo_book, [demo_gold()["items"][0]])  # q01: which cask filled the Horn Lamp
    support = index.support(item.question, answer_options(item), ["Mara", "Mara Quell"])
    letter, score = best_option(support)
    assert item.options[letter] == "The cask nearest the door"
    assert support[letter].passage == 0
    assert all(s.score < score / 2 for k, s in support.items() if k != letter)  # "the cask" alone is not enough


def test_of_two_options_one_passage_states_the_one_told_with_what_is_asked_wins() -> None:
    # An inventory names both options in one passage, so both have the same support; the answer is
    # the one in the sentence that holds what the question asks about, not the earlier letter.
    passages = ["A brass key, with the name of Peter Quince scratched on the bow. A leather purse, with the "
                "crest of the Marlowe family stamped on its clasp.", "The lamp was lit at dusk."]
    index = SupportIndex(passages, Rarity(passages), window=1)
    options = {"A": "Peter Quince", "B": "the Marlowe family", "C": "I cannot answer this."}
    support = index.support("Whose crest was stamped on the leather purse?", options, ["Mara"])
    assert support["A"].score == pytest.approx(support["B"].score) and support["A"].score > 0
    assert best_option(support)[0] == "B"


def test_a_sentence_opening_until_then_is_read_with_the_time_before_it() -> None:
    passages = ["The fair opens at Lammas. Until then the stalls stay shut. The toll is paid at Easter, when the "
                "bridge reopens.", "The lamp was lit at dusk."]
    index = SupportIndex(passages, Rarity(passages), window=1)
    support = index.support("Until when do the stalls stay shut?", {"A": "Easter", "B": "Lammas"}, [])
    assert best_option(support)[0] == "B"


def test_an_option_typed_without_the_books_ligatures_and_accents_meets_them(demo_book) -> None:
    passages = ["\u201cI have found a re-agent which is precipitated by h\u00e6moglobin, and by nothing else.\u201d",
                "I sat up reading Murger\u2019s Vie de Boh\u00e8me until the small hours."]
    index = SupportIndex(passages, Rarity(passages), window=1)
    [item] = gold_items(demo_book, [{
        "id": "x1", "character": "Mara", "split": "KRf", "question": "What does the new re-agent react to?",
        "options": ["Arsenic", "Strychnine", "Vegetable alkaloids", "Haemoglobin only",
                    "I cannot answer this from my own knowledge."], "gold": "D"}])
    support = index.support(item.question, answer_options(item), ["Mara"])
    assert best_option(support)[0] == "D" and support["D"].passage == 0
    assert support["D"].score > 0 and all(support[k].score == 0 for k in "ABC")


def test_calibrated_on_train_only_and_judged_on_held_out(built_demo) -> None:
    answerer = _answerer(built_demo)
    seen: list[str] = []
    read = answerer.read
    answerer.read = lambda item: (seen.append(item.provenance.get("part", "")), read(item))[1]  # type: ignore[method-assign]
    answerer.prepare()
    answerer.read = read  # type: ignore[method-assign]
    assert seen and set(seen) == {"train"}  # the threshold never saw a held-out item
    saved = json.loads((answerer.ctx.work_dir / CALIBRATION_FILE).read_text())
    assert saved["n_train"] == len(seen) and "train part" in saved["source"]
    assert answerer.memory is not None
    held_out = book_items(answerer.ctx.book, answerer.memory.facts, answerer.memory.entities, part="held-out")
    krf, kr, score = _scores(answerer, held_out)
    assert score >= 0.75, (krf, kr, score)

    # a second answerer reuses the saved calibration and answers identically
    again = _answerer(built_demo)
    again.prepare()
    assert again.calibration == answerer.calibration
    assert [again.answer(i).choice for i in held_out] == [answerer.answer(i).choice for i in held_out]


def test_hand_written_demo_items(built_demo) -> None:
    """The demo gold items were written by hand, not by the generator: the answerer still
    recalls and refuses well above chance (KRf chance 1/5, always-refuse KBF 0)."""
    answerer = _answerer(built_demo)
    items = gold_items(answerer.ctx.book, demo_gold()["items"])
    krf, kr, score = _scores(answerer, items)
    assert krf >= 0.45 and kr >= 0.6 and score >= 0.55, (krf, kr, score)


@pytest.mark.slow
def test_reveriemem_offline_reads_its_own_bounded_recall(built_demo) -> None:
    """Without a model ReverieMem probes with the question and with each option, reads only what
    its bounded chain recalled, and refuses below the floor the build calibrated on train items only."""
    from eval.methods.reveriemem import ReverieMemMethod

    book = load_book(built_demo)
    ctx = MethodContext(book=book, handle=open_model("none"), embedder=HashEmbedder(),
                        work_dir=data_home() / "eval-work" / "reveriemem")
    method = ReverieMemMethod(ctx)
    method.prepare()

    from eval.matching import matched_letter

    items = gold_items(book, demo_gold()["items"])
    answers = {i.id: method.answer(i) for i in items}
    letters = {i.id: matched_letter(answers[i.id].reply, i) for i in items}  # as the runner judges a reply
    facts = {row["fact_id"]: row for row in load_book_memory(book.slug).facts}
    for item in items:
        answer = answers[item.id]
        slug = book.character(item.character).slug
        assert all(slug in facts[f]["visibility"] for f in answer.detail["facts"])  # never outside F_c
        assert "train part" in answer.detail["floor_source"] or "default" in answer.detail["floor_source"]
    krf = sum(letters[i.id] == i.gold for i in items if i.split == "KRf") / 15
    kr = sum(letters[i.id] == i.gold for i in items if i.split == "KR") / 15
    assert krf >= 0.4 and kr >= 0.4, (krf, kr)  # chance: KRf 1/5; always refusing scores KRf 0

    again = ReverieMemMethod(ctx)  # the floors come from the build, so a second reader answers identically
    assert [again.answer(i).reply for i in items] == [answers[i.id].reply for i in items]
