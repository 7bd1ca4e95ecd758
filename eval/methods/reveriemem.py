"""ReverieMem and its layer ablations as KBF-QA methods.

The agent (`reveriemem.inference.agent.ReverieAgent` over a `MemoryReader` of the item's
character) is asked the question. With a model, it is asked the question with
its five options, and its Memory-Fusion reply is the answer (matched to a letter
by `eval.matching`).

Without one, the agent's own deterministic chain runs: Anchor on the question,
then Vis-Retrieve rounds whose probes are the question and the question read
with each option in turn (so a fact about any option can enter the pool, and
only facts of the character's visibility set can). The pool's facts and the
anchored scene notes are read against the options (`eval.reader.SupportIndex`):
the best-supported option when its support is above a floor, else the refusal.
The agent reads nothing outside its bounded memory, so, unlike the evidence
answerer, it has no whole-book support to compare with: only the floor decides
a refusal. The floor is calibrated to the highest KBF on the train part of the
book's generated items (never on the items being judged) and saved in the
method's work folder; a second run of the same reader version reuses it.

Ablations drop one layer (`layers` of the agent): `reveriemem-no-episodic` (no
Anchor), `reveriemem-no-semantic` (no Vis-Retrieve: no fact pool),
`reveriemem-no-personality` (no Emo-Gate, Emo-Transition or Pattern).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eval.generate import book_items
from eval.items import ANSWER_LETTERS, REFUSAL_LETTER, REFUSAL_OPTION, KBFItem, render_question
from eval.lexical import Rarity
from eval.memory import BookMemory, load_book_memory, passage_of
from eval.methods.base import Answer, MethodContext
from eval.metrics import score as scores
from eval.reader import SupportIndex, best_option
from reveriemem.inference.agent import LAYERS, ReverieAgent
from reveriemem.inference.memory_reader import MemoryReader
from reveriemem.inference.trace import Turn

DEFAULT_FLOOR = 0.3  # the floor when there is nothing to calibrate on
OFFLINE_METHOD = "heuristic:reveriemem-reader-v2"
CALIBRATION_FILE = "calibration.json"
VARIANTS = {
    "reveriemem": LAYERS,
    "reveriemem-no-episodic": LAYERS - {"episodic"},
    "reveriemem-no-semantic": LAYERS - {"semantic"},
    "reveriemem-no-personality": LAYERS - {"personality"},
}


@dataclass(frozen=True)
class OfflineReading:
    choice: str  # the option the recalled memory supports best (A-D)
    support: float  # its support (context share x option share, in [0, 1])
    turn: Turn

    def decide(self, floor: float) -> str:
        return self.choice if self.support > floor else REFUSAL_LETTER


class ReverieMemMethod:
    def __init__(self, ctx: MethodContext, name: str = "reveriemem", max_rounds: int = 3,
                 floor: float | None = None):
        if name not in VARIANTS:
            raise ValueError(f"Unknown ReverieMem variant {name!r}.")
        self.ctx = ctx
        self.name = name
        self.layers = VARIANTS[name]
        self.max_rounds = max_rounds
        self.floor = floor
        self._agents: dict[str, ReverieAgent] = {}
        self._rarity: Rarity | None = None

    @property
    def offline(self) -> bool:
        return self.ctx.handle.lm is None

    def prepare(self) -> None:
        if self._rarity is None:
            memory = load_book_memory(self.ctx.book.slug, self.ctx.uri)
            self._rarity = Rarity(passage_of(row) for row in memory.facts)
            if self.offline and self.floor is None:
                self.floor = self._load_or_calibrate(memory)

    def _agent(self, name: str) -> ReverieAgent:
        character = self.ctx.book.character(name)
        if character.slug not in self._agents:
            reader = MemoryReader(self.ctx.book.slug, character.slug, self.ctx.embedder, self.ctx.uri)
            self._agents[character.slug] = ReverieAgent(reader, self.ctx.handle, character,
                                                        max_rounds=self.max_rounds, layers=self.layers)
        return self._agents[character.slug]

    def answer(self, item: KBFItem) -> Answer:
        self.prepare()
        started = time.perf_counter()
        if self.offline:
            reading = self.read(item)
            turn = reading.turn
        else:
            agent = self._agent(item.character)
            agent.state = None  # every item is a fresh conversation
            turn = agent.respond(render_question(item))
        trace = turn.trace
        detail: dict[str, Any] = {"facts": [f.fact_id for f in trace.facts], "scenes": [s.scene_id for s in trace.anchored],
                                  "exit_round": trace.exit_round, "stop": trace.stop_reason}
        totals = trace.totals()
        answer = Answer(reply=turn.reply, calls=int(totals.get("calls", 0)),
                        prompt_tokens=int(totals.get("prompt_tokens", 0)),
                        completion_tokens=int(totals.get("completion_tokens", 0)), detail=detail)
        if self.offline:
            assert self.floor is not None
            answer.choice = reading.decide(self.floor)
            answer.reply = (f"{REFUSAL_OPTION} (E)" if answer.choice == REFUSAL_LETTER
                            else f"({answer.choice}) {item.options[answer.choice]}")
            detail.update(variant=OFFLINE_METHOD, support=round(reading.support, 4), best=reading.choice,
                          floor=self.floor)
        else:
            detail["variant"] = f"model:{self.ctx.handle.name}"
        answer.seconds = time.perf_counter() - started
        return answer

    def read(self, item: KBFItem) -> OfflineReading:
        """The deterministic chain's recall for `item` read against its options (no decision yet)."""
        assert self._rarity is not None
        agent = self._agent(item.character)
        agent.state = None
        probes = [f"{item.question} {item.options[letter]}" for letter in ANSWER_LETTERS]
        turn = agent.respond(item.question, probes=probes)
        trace = turn.trace
        passages = [f"{f.text} {f.evidence}" for f in trace.facts] + [s.note for s in trace.anchored]
        if not passages:
            return OfflineReading(ANSWER_LETTERS[0], 0.0, turn)
        character = self.ctx.book.character(item.character)
        support = SupportIndex(passages, self._rarity, window=1).support(item, character.surface_forms)
        letter, score = best_option(support)
        return OfflineReading(letter, score, turn)

    # -- calibration ----------------------------------------------------------

    def _load_or_calibrate(self, memory: BookMemory) -> float:
        path = self.ctx.work_dir / CALIBRATION_FILE
        if path.is_file():
            saved = json.loads(path.read_text(encoding="utf-8"))
            if saved.get("method") == OFFLINE_METHOD:
                return float(saved["floor"])
        items = book_items(self.ctx.book, memory.facts, memory.entities, part="train")
        floor, train_kbf = calibrate_floor([(item, self.read(item)) for item in items])
        self.ctx.work_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"method": OFFLINE_METHOD, "floor": floor, "n_train": len(items), "kbf_train": round(train_kbf, 4),
                                    "source": f"generated items of {self.ctx.book.slug}, train part"},
                                   indent=2), encoding="utf-8")
        return floor


def calibrate_floor(readings: Sequence[tuple[KBFItem, OfflineReading]]) -> tuple[float, float]:
    """The support floor giving the highest KBF on `readings` (ties: the lower floor), and that KBF."""
    if not readings:
        return DEFAULT_FLOOR, 0.0
    best = (-1.0, DEFAULT_FLOOR)
    for floor in sorted({0.0} | {round(r.support, 4) for _, r in readings}):
        score = scores([(item.split, r.decide(floor) == item.gold) for item, r in readings]).kbf or 0.0
        if score > best[0] + 1e-12:
            best = (score, floor)
    return best[1], best[0]
