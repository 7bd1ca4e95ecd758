"""ReverieMem and its layer ablations as KBF-QA methods: the agent users talk to, asked as users ask.

The method is one `reveriemem.inference.module.ReverieInference` over the book (its memory tool
opens a `MemoryReader` per character, once), the module `reveriemem ask`, `chat` and
`reveriemem compile` use. Each item is a fresh conversation: the item's question with its five
options, as text (`eval.items.render_question`), exactly as `reveriemem ask BOOK CHARACTER "..."`
would ask it; its reply is matched to a letter by `eval.matching`. With a model, Memory-Fusion writes the
reply. Without one, the agent's offline reasoner decides (`reveriemem.inference.offline`): it
probes with the question and with the question read with each option, reads its bounded pool
and its own scene notes, and names the best-supported option or refuses below the floor
calibrated with the build (the `reader_calibration` asset, `calibrate_reader` below).

`calibrate_reader` is that calibration: on the train part of the book's generated items for one
character (never on items being judged) it sets the option floor to the highest KBF of the
option decisions and the question floor to the highest KBF of free-form answers (a KRf answer
counts when the quoted fact is the item's fact or states its gold option).

Ablations drop one layer (`layers` of the same module): `reveriemem-no-episodic` (no Anchor),
`reveriemem-no-semantic` (no Vis-Retrieve: no fact pool), `reveriemem-no-personality` (no
Emo-Gate, Emo-Transition or Pattern).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from eval.items import ANSWER_LETTERS, REFUSAL_LETTER, KBFItem, render_question
from eval.methods.base import Answer, MethodContext
from eval.metrics import score as scores
from reveriemem.inference.module import LAYERS, BookMemory, ReverieInference
from reveriemem.inference.offline import DEFAULT_CALIBRATION, READER_VERSION, ReaderCalibration
from reveriemem.inference.offline_reader import term_set

MIN_TRAIN = 6  # fewer train items of a character than this (or none of a split): the default floors
MAX_TRAIN = 40  # train items read per character at most (evenly across the story, half per split)
BOOK_FLOORS = (0.0, 0.02, 0.05, 0.1, 0.2)  # candidate floors of the whole book's support
VARIANTS = {
    "reveriemem": LAYERS,
    "reveriemem-no-episodic": LAYERS - {"episodic"},
    "reveriemem-no-semantic": LAYERS - {"semantic"},
    "reveriemem-no-personality": LAYERS - {"personality"},
}


class ReverieMemMethod:
    def __init__(self, ctx: MethodContext, name: str = "reveriemem", max_rounds: int = 3):
        if name not in VARIANTS:
            raise ValueError(f"Unknown ReverieMem variant {name!r}.")
        self.ctx = ctx
        self.name = name
        self.agent = ReverieInference(BookMemory(ctx.book, ctx.embedder, ctx.uri), ctx.handle, max_rounds=max_rounds,
                                      layers=VARIANTS[name])

    def prepare(self) -> None:
        pass

    def answer(self, item: KBFItem) -> Answer:
        started = time.perf_counter()
        # every item is a fresh conversation (no state carried)
        prediction = self.agent(question=render_question(item), character=item.character)
        trace = prediction.trace
        totals = trace.totals()
        detail: dict[str, Any] = {"facts": [f.fact_id for f in trace.facts], "scenes": [s.scene_id for s in trace.anchored],
                                  "exit_round": trace.exit_round, "stop": trace.stop_reason, "variant": trace.method}
        if trace.offline:
            detail.update({k: trace.offline.get(k) for k in ("best", "support", "book", "ratio", "floor", "ratio_floor")},
                          floor_source=trace.offline["calibration"]["source"])
        return Answer(reply=prediction.reply, calls=int(totals.get("calls", 0)),
                      prompt_tokens=int(totals.get("prompt_tokens", 0)),
                      completion_tokens=int(totals.get("completion_tokens", 0)), detail=detail,
                      seconds=time.perf_counter() - started)


# -- calibration (run by the `reader_calibration` asset when the memory is built) ----------------


@dataclass(frozen=True)
class TrainReading:
    item: KBFItem
    best: str  # the option the memory supports best
    support: float  # its support
    book: float  # the best support the whole book gives any option
    share: float  # the free-form question's best context share
    on_point: bool  # the free-form answer's fact is the item's fact or states the gold option, and holds the rarest word

    @property
    def ratio(self) -> float:
        return self.support / self.book if self.book > 0 else 0.0

    def option_choice(self, floor: float, ratio_floor: float) -> str:
        if self.book <= floor or self.support <= 0 or self.ratio < ratio_floor:
            return REFUSAL_LETTER
        return self.best


def read_train_item(agent: ReverieInference, item: KBFItem) -> TrainReading:
    """How the agent's offline reasoner reads one train item, asked with options and asked free-form.

    One turn: the question with its options is asked as a user would; the free-form reading is that
    of the same turn's first round (the probe of the question alone, as a free-form turn makes it)."""
    agent.state = None
    trace = agent.respond(render_question(item)).trace
    offline = trace.offline or {}
    first = [{"fact_id": f.fact_id, "text": f.text, "evidence": f.evidence, "similarity": f.similarity}
             for f in trace.facts if f.round == 1]
    compared = agent.offline_reasoner().compare_question(item.question, first)
    share, on_point = compared.reading.support, False
    where = compared.reading.passage
    if item.split == "KRf" and where is not None and compared.on_point:
        fact = first[where]
        gold = term_set(item.options[item.gold])
        stated = term_set(f"{fact['text']} {fact['evidence']}")
        on_point = fact["fact_id"] == item.fact or (bool(gold) and len(gold & stated) >= len(gold) / 2)
    return TrainReading(item, str(offline.get("best") or ANSWER_LETTERS[0]), float(offline.get("support") or 0.0),
                        float(offline.get("book") or 0.0), share if compared.on_point else 0.0, on_point)


def calibrate_reader(agent: ReverieInference, items: Sequence[KBFItem], source: str,
                     progress: Callable[[str], None] = lambda message: None) -> ReaderCalibration:
    """The floors with the highest KBF on `items` (ties: the lower floor): the book floor and ratio floor of
    option decisions, and the question floor of free-form answers. At most `MAX_TRAIN` items are read,
    taken evenly across the story and both splits."""
    if len(items) < MIN_TRAIN or {i.split for i in items} != {"KRf", "KR"}:
        return DEFAULT_CALIBRATION
    items = _evenly(items, MAX_TRAIN)
    readings = []
    for n, item in enumerate(items, 1):
        readings.append(read_train_item(agent, item))
        if n % 25 == 0:
            progress(f"{agent.character.name}: {n}/{len(items)} train items read")
    (option_floor, ratio_floor), option_kbf = _best_floors(readings)
    question_floor, _ = _best_floor([r.share for r in readings], lambda f: [
        (r.item.split, (r.share > f and r.on_point) if r.item.split == "KRf" else r.share <= f) for r in readings])
    return ReaderCalibration(option_floor=option_floor, question_floor=question_floor, ratio_floor=ratio_floor,
                             source=source, n_train=len(items), kbf_train=round(option_kbf, 4), reader=READER_VERSION)


def _evenly(items: Sequence[KBFItem], limit: int) -> list[KBFItem]:
    """At most `limit` items, half from each split, every k-th in the given (story) order."""
    out: list[KBFItem] = []
    for split in ("KRf", "KR"):
        mine = [i for i in items if i.split == split]
        step = max(1.0, len(mine) / (limit // 2))
        out += [mine[int(k * step)] for k in range(min(len(mine), limit // 2))]
    return out


def _best_floors(readings: Sequence[TrainReading]) -> tuple[tuple[float, float], float]:
    """The (book floor, ratio floor) pair with the highest KBF of the option decisions, vectorised over
    every candidate pair (ties: the lower floors)."""
    krf = np.array([r.item.split == "KRf" for r in readings])
    right = np.array([r.best == r.item.gold for r in readings])
    book = np.array([r.book for r in readings])
    support = np.array([r.support for r in readings])
    ratio = np.array([r.ratio for r in readings])
    ratios = np.array(sorted({0.0, 1.0} | {round(float(x), 4) for x in ratio}))
    best = (-1.0, 0.0, 0.0)
    for floor in BOOK_FLOORS:
        answers = (book > floor) & (support > 0) & (ratio[None, :] >= ratios[:, None])  # candidates x items
        correct = np.where(krf, answers & right, ~answers)
        kbf = _kbf(correct[:, krf].mean(axis=1), correct[:, ~krf].mean(axis=1), int(krf.sum()), int((~krf).sum()))
        i = int(np.argmax(kbf))
        if kbf[i] > best[0] + 1e-12:
            best = (float(kbf[i]), floor, float(ratios[i]))
    return (best[1], best[2]), best[0]


def _kbf(krf: np.ndarray, kr: np.ndarray, n_krf: int, n_kr: int) -> np.ndarray:
    """KBF of accuracies (the sample-weighted harmonic mean, as `eval.metrics.kbf`), element-wise."""
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (n_krf + n_kr) / (n_krf / krf + n_kr / kr)
    return np.where((krf > 0) & (kr > 0), out, 0.0)


def _best_floor(values: Sequence[float], outcomes: Callable[[float], list[tuple[str, bool]]]) -> tuple[float, float]:
    best = (-1.0, 0.0)
    for floor in sorted({0.0} | {round(v, 4) for v in values}):
        kbf = scores(outcomes(floor)).kbf or 0.0
        if kbf > best[0] + 1e-12:
            best = (kbf, floor)
    return best[1], best[0]
