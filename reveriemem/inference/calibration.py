"""The offline reasoner's floors: calibrated on a book's generated train items, pooled over its characters.

When a book is built, the `reader_calibration` asset asks each focus character's agent the train
part of that character's generated KBF-QA items (never items being judged) and stores one
`TrainReading` per item: the option its memory supports best, that support, the whole book's best
support, and how a free-form reading of the question fared. The floors are then chosen over the
readings of **every** focus character of the book together (`calibration_of`), one set per book:
a character has a few dozen train items, too few for a floor that a handful of items should not
move, and the floors say how the reader weighs evidence, which does not change from one
character to the next. Each floor is the one with the highest KBF on the pooled readings (ties:
the lower floor).

- option floor: below this best support of any option in the whole book, nothing answers;
- ratio floor: an option is chosen only when the character's memory holds at least this share of
  the whole book's best support;
- question floor: a free-form answer is given only when its context share is above this.

`load_calibration(book, character)` reads the stored readings of the book's characters and
chooses the floors; an older build without readings of this reader version gets
`DEFAULT_CALIBRATION`, and the trace says which was used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from reveriemem.core.errors import RegistryError, StorageError
from reveriemem.core.registry import load_book
from reveriemem.core.schemas import READER_CALIBRATION
from reveriemem.core.storage import MemoryStore, PartitionRef

READER_VERSION = "offline-reader-v10"  # stored readings of another version are not used; v10: a copied line memory does not hold is refused
MIN_TRAIN = 6  # fewer pooled train readings than this (or none of a split): the default floors
BOOK_FLOORS = (0.0, 0.02, 0.05, 0.1, 0.2)  # candidate floors of the whole book's support


@dataclass(frozen=True)
class ReaderCalibration:
    """The offline reasoner's floors and where they came from."""

    option_floor: float  # below this best support of any option in the whole book, nothing answers
    question_floor: float  # a free-form answer is given only when its context share is above this
    source: str
    ratio_floor: float = 0.5  # an option is chosen only when its bounded support is at least this share of the book's
    n_train: int = 0
    kbf_train: float | None = None
    calibrated: bool = True
    reader: str = READER_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


DEFAULT_CALIBRATION = ReaderCalibration(
    option_floor=0.05, question_floor=0.5, ratio_floor=0.6, calibrated=False,
    source="default floors: no calibration of this reader is stored with the build (rebuild the book)")


@dataclass(frozen=True)
class TrainReading:
    """How one character's agent read one generated train item (no decision yet)."""

    split: str  # KRf or KR
    gold: str  # the item's gold letter
    best: str  # the option the memory supports best
    support: float  # its support
    book: float  # the best support the whole book gives any option
    share: float  # the free-form question's best context share (0 when not on point)
    on_point: bool  # the free-form answer's fact is the item's fact or states the gold option

    @property
    def ratio(self) -> float:
        return self.support / self.book if self.book > 0 else 0.0

    def to_row(self, book: str, character: str, item: str, source: str) -> dict[str, Any]:
        """A row of the `reader_calibration` table (`reveriemem.core.schemas.READER_CALIBRATION`)."""
        fields = asdict(self)
        fields["book_support"] = fields.pop("book")
        return {"book": book, "character": character, "item_id": item, "reader": READER_VERSION, "source": source,
                **fields}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TrainReading:
        return cls(str(row["split"]), str(row["gold"]), str(row["best"]), float(row["support"]),
                   float(row["book_support"]), float(row["share"]), bool(row["on_point"]))


def calibration_of(readings: Sequence[TrainReading], source: str) -> ReaderCalibration:
    """The floors with the highest KBF on `readings` (ties: the lower floor), or the default floors
    when there are too few readings or none of a split."""
    if len(readings) < MIN_TRAIN or {r.split for r in readings} != {"KRf", "KR"}:
        return DEFAULT_CALIBRATION
    (option_floor, ratio_floor), option_kbf = _option_floors(readings)
    krf = np.array([r.split == "KRf" for r in readings])
    share = np.array([r.share for r in readings])
    on_point = np.array([r.on_point for r in readings])
    question_floor, _ = _best_floor(share, lambda f: np.where(krf, (share > f) & on_point, share <= f), krf)
    return ReaderCalibration(option_floor=option_floor, question_floor=question_floor, ratio_floor=ratio_floor,
                             source=source, n_train=len(readings), kbf_train=round(option_kbf, 4))


def _option_floors(readings: Sequence[TrainReading]) -> tuple[tuple[float, float], float]:
    """The (book floor, ratio floor) pair with the highest KBF of the option decisions, vectorised over
    every candidate pair (ties: the lower floors; a ratio floor lies just above the highest ratio it
    must refuse, wherever the lowest one it answers is)."""
    krf = np.array([r.split == "KRf" for r in readings])
    right = np.array([r.best == r.gold for r in readings])
    book = np.array([r.book for r in readings])
    support = np.array([r.support for r in readings])
    ratio = np.array([r.ratio for r in readings])
    # every reading's ratio, and just above it: the lowest floor that answers a reading, and the lowest that
    # refuses it, so a tie between floors goes to the lowest one (the edge of the refused, not of the answered)
    ratios = np.array(sorted({0.0, 1.0} | {round(float(x), 4) + step for x in ratio for step in (0.0, 0.0001)}))
    best = (-1.0, 0.0, 0.0)
    for floor in BOOK_FLOORS:
        answers = (book > floor) & (support > 0) & (ratio[None, :] >= ratios[:, None])  # candidates x items
        correct = np.where(krf, answers & right, ~answers)
        kbf = kbf_of(correct[:, krf].mean(axis=1), correct[:, ~krf].mean(axis=1), int(krf.sum()), int((~krf).sum()))
        i = int(np.argmax(kbf))
        if kbf[i] > best[0] + 1e-12:
            best = (float(kbf[i]), floor, float(ratios[i]))
    return (best[1], best[2]), best[0]


def _best_floor(values: np.ndarray, correct_at: Callable[[float], np.ndarray], krf: np.ndarray) -> tuple[float, float]:
    best = (-1.0, 0.0)
    for floor in sorted({0.0} | {round(float(v), 4) for v in values}):
        correct = correct_at(floor)
        kbf = float(kbf_of(correct[krf].mean(), correct[~krf].mean(), int(krf.sum()), int((~krf).sum())))
        if kbf > best[0] + 1e-12:
            best = (kbf, floor)
    return best[1], best[0]


def kbf_of(krf: Any, kr: Any, n_krf: int, n_kr: int) -> np.ndarray:
    """KBF of accuracies (the sample-weighted harmonic mean, as `eval.metrics.kbf`), element-wise."""
    krf, kr = np.asarray(krf, dtype=float), np.asarray(kr, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (n_krf + n_kr) / (n_krf / krf + n_kr / kr)
    return np.where((krf > 0) & (kr > 0), out, 0.0)


def load_calibration(book: str, character: str, store: MemoryStore | None = None) -> ReaderCalibration:
    """The floors of `book`, from the train readings stored for its focus characters (`calibration_of`);
    `DEFAULT_CALIBRATION` when `character`'s own readings of this reader version are not stored."""
    store = store or MemoryStore.for_home()
    try:
        slugs = [c.slug for c in load_book(book, store.home).characters]
    except RegistryError:
        slugs = [character]
    rows: list[dict[str, Any]] = []
    mine = False
    for slug in slugs:
        try:
            table = store.read("reader_calibration", PartitionRef(book, slug))
        except StorageError:
            continue
        stored = table.to_dicts()
        fresh = set(READER_CALIBRATION.names) <= set(table.columns)  # an older build stored floors, not readings
        current = [r for r in stored if fresh and r.get("reader") == READER_VERSION]
        if slug == character:  # built with this reader (a character with no train items stores no rows)
            mine = len(current) == len(stored)
        rows += current
    if not mine:
        return DEFAULT_CALIBRATION
    readings = [TrainReading.from_row(r) for r in rows]
    return calibration_of(readings, f"generated items of {book}, train part: {len(readings)} readings over its "
                                    f"{len({r['character'] for r in rows})} focus characters")
