"""The evidence answerer: KBF-QA without a model, from the character's bounded memory.

For an item put to character c it reads each option A-D against two collections
of the book's stored facts (`reveriemem.inference.offline_reader.SupportIndex`, windows of two facts in
story order):

- c's bounded memory F_c (the facts whose visibility holds c), and
- the whole book F.

It picks the option with the best bounded support, then compares that support
with the best support the whole book gives any option. When the book supports
an answer that c's memory does not (ratio below the threshold), or nothing in
the book supports any option (below the floor), it refuses (E). The threshold
and floor are calibrated to the highest KBF on the train part of the book's
generated items (`eval.generate`, `provenance.part == "train"`), never on the
items being judged, and saved in the method's work folder; a second run reuses
them (unless they were made by another version of the answerer). Everything is deterministic.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eval.generate import book_items
from eval.items import REFUSAL_LETTER, REFUSAL_OPTION, KBFItem
from eval.memory import BookMemory, load_book_memory, passage_of
from eval.methods.base import Answer, MethodContext
from eval.methods.common import answer_options
from eval.metrics import score as scores
from reveriemem.inference.offline_reader import Rarity, SupportIndex, best_option

METHOD = "heuristic:evidence-answerer-v2"  # a saved calibration of another version is redone
CALIBRATION_FILE = "calibration.json"
FLOORS = (0.0, 0.02, 0.05, 0.1, 0.2)


@dataclass(frozen=True)
class Reading:
    choice: str  # the option c's memory supports best (A-D)
    bounded: float  # its support in c's memory
    book: float  # the best support any option has in the whole book
    passage: int | None  # index into the book's facts of the best bounded window

    @property
    def ratio(self) -> float:
        return self.bounded / self.book if self.book > 0 else 0.0

    def decide(self, threshold: float, floor: float) -> str:
        if self.book <= floor or self.bounded <= 0 or self.ratio < threshold:
            return REFUSAL_LETTER
        return self.choice


@dataclass(frozen=True)
class Calibration:
    threshold: float
    floor: float
    n_train: int
    kbf_train: float
    source: str
    method: str = METHOD  # the answerer version it was calibrated for

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


class EvidenceAnswerer:
    name = "evidence"

    def __init__(self, ctx: MethodContext, calibration: Calibration | None = None):
        self.ctx = ctx
        self.calibration = calibration
        self.memory: BookMemory | None = None
        self._bounded: dict[str, tuple[SupportIndex, list[int]]] = {}

    # -- memory ---------------------------------------------------------------

    def prepare(self) -> None:
        self._load_memory()
        if self.calibration is None:
            self.calibration = self._load_or_calibrate()

    def _load_memory(self) -> None:
        if self.memory is None:
            self.memory = load_book_memory(self.ctx.book.slug, self.ctx.uri)
            passages = [passage_of(row) for row in self.memory.facts]
            self.rarity = Rarity(passages)
            self.book_index = SupportIndex(passages, self.rarity)

    def _index_for(self, slug: str) -> tuple[SupportIndex, list[int]]:
        if slug not in self._bounded:
            assert self.memory is not None
            rows = [i for i, row in enumerate(self.memory.facts) if slug in (row.get("visibility") or [])]
            index = SupportIndex([self.book_index.passages[i] for i in rows], self.rarity)
            self._bounded[slug] = (index, rows)
        return self._bounded[slug]

    def read(self, item: KBFItem) -> Reading:
        """How c's memory and the whole book support the item's options (no decision yet)."""
        self._load_memory()
        character = self.ctx.book.character(item.character)
        names = character.surface_forms
        bounded, rows = self._index_for(character.slug)
        options = answer_options(item)
        mine = bounded.support(item.question, options, names)
        choice, score = best_option(mine)
        book = self.book_index.support(item.question, options, names)
        _, book_best = best_option(book)
        where = mine[choice].passage
        return Reading(choice, score, max(book_best, score), None if where is None else rows[where])

    # -- answering ------------------------------------------------------------

    def answer(self, item: KBFItem) -> Answer:
        started = time.perf_counter()
        self.prepare()
        reading = self.read(item)
        assert self.calibration is not None and self.memory is not None
        letter = reading.decide(self.calibration.threshold, self.calibration.floor)
        if letter == REFUSAL_LETTER:
            reply = f"{REFUSAL_OPTION} (E)"
        else:
            reply = f"({letter}) {item.options[letter]}"
        fact = self.memory.facts[reading.passage] if reading.passage is not None else None
        detail = {"bounded": round(reading.bounded, 4), "book": round(reading.book, 4),
                  "ratio": round(reading.ratio, 4), "best": reading.choice,
                  "fact_id": fact.get("fact_id") if fact else None,
                  "threshold": self.calibration.threshold, "floor": self.calibration.floor}
        return Answer(reply=reply, choice=letter, seconds=time.perf_counter() - started, detail=detail)

    # -- calibration ----------------------------------------------------------

    def _load_or_calibrate(self) -> Calibration:
        path = self.ctx.work_dir / CALIBRATION_FILE
        if path.is_file():
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("method") == METHOD:
                return Calibration(**data)
        assert self.memory is not None
        items = book_items(self.ctx.book, self.memory.facts, self.memory.entities, part="train")
        calibration = calibrate(self, items, source=f"generated items of {self.ctx.book.slug}, train part")
        self.ctx.work_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(calibration.to_dict(), indent=2), encoding="utf-8")
        return calibration


def calibrate(answerer: EvidenceAnswerer, items: Sequence[KBFItem], source: str = "") -> Calibration:
    """The threshold and floor giving the highest KBF on `items` (ties: the lower threshold)."""
    if not items:
        return Calibration(threshold=0.5, floor=0.0, n_train=0, kbf_train=0.0, source="default (no training items)")
    readings = [(item, answerer.read(item)) for item in items]
    ratios = sorted({round(r.ratio, 4) for _, r in readings} | {0.0, 1.0})
    best: tuple[float, float, float] | None = None
    for floor in FLOORS:
        for threshold in ratios:
            score = _kbf_at(readings, threshold, floor)
            if best is None or score > best[0] + 1e-12:
                best = (score, threshold, floor)
    assert best is not None
    return Calibration(threshold=best[1], floor=best[2], n_train=len(items), kbf_train=round(best[0], 4),
                       source=source)


def _kbf_at(readings: Sequence[tuple[KBFItem, Reading]], threshold: float, floor: float) -> float:
    return scores([(item.split, r.decide(threshold, floor) == item.gold) for item, r in readings]).kbf or 0.0
