"""ReverieMem and its layer ablations as KBF-QA methods.

The agent (`reveriemem.agent.ReverieAgent` over a `MemoryReader` of the item's
character) is asked the question with its five options. With a model, its
Memory-Fusion reply is the answer (matched to a letter by `eval.matching`).
Without one, the agent's own deterministic chain runs (Anchor, one Vis-Retrieve
round with the question as probe) and its recalled facts and anchored scenes are
read against the options (`eval.reader.SupportIndex`): the best-supported option
when its support reaches `OFFLINE_FLOOR`, else the refusal.

Ablations drop one layer (`layers` of the agent): `reveriemem-no-episodic` (no
Anchor), `reveriemem-no-semantic` (no Vis-Retrieve: no fact pool),
`reveriemem-no-personality` (no Emo-Gate, Emo-Transition or Pattern).
"""

from __future__ import annotations

import time
from typing import Any

from eval.items import REFUSAL_LETTER, REFUSAL_OPTION, KBFItem, render_question
from eval.lexical import Rarity
from eval.memory import load_book_memory, passage_of
from eval.methods.base import Answer, MethodContext
from eval.reader import SupportIndex, best_option
from reveriemem.agent import LAYERS, ReverieAgent
from reveriemem.retrieval import MemoryReader

OFFLINE_FLOOR = 0.3  # least support (context share x option share) the offline reading commits to
OFFLINE_METHOD = "heuristic:reveriemem-reader-v1"
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
        self.layers = VARIANTS[name]
        self.max_rounds = max_rounds
        self._agents: dict[str, ReverieAgent] = {}
        self._rarity: Rarity | None = None

    def prepare(self) -> None:
        if self._rarity is None:
            memory = load_book_memory(self.ctx.book.slug, self.ctx.uri)
            self._rarity = Rarity(passage_of(row) for row in memory.facts)

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
        if self.ctx.handle.lm is None:
            answer.choice, answer.reply, support = self._read(item, trace)
            detail.update(variant=OFFLINE_METHOD, support=round(support, 4))
        else:
            detail["variant"] = f"model:{self.ctx.handle.name}"
        answer.seconds = time.perf_counter() - started
        return answer

    def _read(self, item: KBFItem, trace: Any) -> tuple[str, str, float]:
        assert self._rarity is not None
        passages = [f"{f.text} {f.evidence}" for f in trace.facts] + [s.note for s in trace.anchored]
        if not passages:
            return REFUSAL_LETTER, f"{REFUSAL_OPTION} (E)", 0.0
        character = self.ctx.book.character(item.character)
        support = SupportIndex(passages, self._rarity, window=1).support(item, character.surface_forms)
        letter, score = best_option(support)
        if score < OFFLINE_FLOOR:
            return REFUSAL_LETTER, f"{REFUSAL_OPTION} (E)", score
        return letter, f"({letter}) {item.options[letter]}", score
