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

from eval.items import ANSWER_LETTERS, REFUSAL_LETTER, KBFItem, render_question
from eval.methods.base import Answer, MethodContext
from eval.metrics import score as scores
from reveriemem.inference.module import LAYERS, BookMemory, ReverieInference
from reveriemem.inference.offline import DEFAULT_CALIBRATION, READER_VERSION, ReaderCalibration
from reveriemem.inference.offline_reader import term_set

MIN_TRAIN = 6  # fewer train items of a character than this (or none of a split): the default floors
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
            detail.update({k: trace.offline.get(k) for k in ("best", "support", "floor")},
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
    share: float  # the free-form question's best context share
    on_point: bool  # the free-form answer's fact is the item's fact or states the gold option

    def option_choice(self, floor: float) -> str:
        return self.best if self.support > floor else REFUSAL_LETTER


def read_train_item(agent: ReverieInference, item: KBFItem) -> TrainReading:
    """How the agent's offline reasoner reads one train item, asked with options and asked free-form."""
    agent.state = None
    offline = agent.respond(render_question(item)).trace.offline or {}
    agent.state = None
    free = agent.respond(item.question)
    share = float((free.trace.offline or {}).get("support") or 0.0)
    on_point = False
    if item.split == "KRf":
        where = (free.trace.offline or {}).get("fact")  # the best fact, quoted or not
        quoted = next((f for f in free.trace.facts if f.fact_id == where), None)
        if quoted is not None:
            gold = term_set(item.options[item.gold])
            stated = term_set(f"{quoted.text} {quoted.evidence}")
            on_point = quoted.fact_id == item.fact or (bool(gold) and len(gold & stated) >= len(gold) / 2)
    return TrainReading(item, str(offline.get("best") or ANSWER_LETTERS[0]), float(offline.get("support") or 0.0),
                        share, on_point)


def calibrate_reader(agent: ReverieInference, items: Sequence[KBFItem], source: str,
                     progress: Callable[[str], None] = lambda message: None) -> ReaderCalibration:
    """The option and question floors with the highest KBF on `items` (ties: the lower floor)."""
    if len(items) < MIN_TRAIN or {i.split for i in items} != {"KRf", "KR"}:
        return DEFAULT_CALIBRATION
    readings = []
    for n, item in enumerate(items, 1):
        readings.append(read_train_item(agent, item))
        if n % 25 == 0:
            progress(f"{agent.character.name}: {n}/{len(items)} train items read")
    option_floor, option_kbf = _best_floor([r.support for r in readings],
                                           lambda f: [(r.item.split, r.option_choice(f) == r.item.gold) for r in readings])
    question_floor, _ = _best_floor([r.share for r in readings], lambda f: [
        (r.item.split, (r.share > f and r.on_point) if r.item.split == "KRf" else r.share <= f) for r in readings])
    return ReaderCalibration(option_floor=option_floor, question_floor=question_floor, source=source,
                             n_train=len(items), kbf_train=round(option_kbf, 4), reader=READER_VERSION)


def _best_floor(values: Sequence[float], outcomes: Callable[[float], list[tuple[str, bool]]]) -> tuple[float, float]:
    best = (-1.0, 0.0)
    for floor in sorted({0.0} | {round(v, 4) for v in values}):
        kbf = scores(outcomes(floor)).kbf or 0.0
        if kbf > best[0] + 1e-12:
            best = (kbf, floor)
    return best[1], best[0]

