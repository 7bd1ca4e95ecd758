"""The evidence answerer: calibrated on the train part only, judged on the rest, deterministic."""

from __future__ import annotations

import json

from eval.items import gold_items
from eval.lexical import Rarity
from eval.methods.base import MethodContext
from eval.methods.evidence import CALIBRATION_FILE, EvidenceAnswerer
from eval.metrics import kbf
from eval.reader import SupportIndex, best_option
from reveriemem.demo import demo_gold
from reveriemem.embeddings import HashEmbedder
from reveriemem.models import open_model
from reveriemem.registry import load_book
from reveriemem.settings import data_home


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
    support = index.support(item, ["Mara", "Mara Quell"])
    letter, score = best_option(support)
    assert item.options[letter] == "The cask nearest the door"
    assert support[letter].passage == 0
    assert all(s.score < score / 2 for k, s in support.items() if k != letter)  # "the cask" alone is not enough


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
    held_out = [i for i in answerer.training_items() if i.provenance["part"] == "held-out"]
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
