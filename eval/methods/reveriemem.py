"""ReverieMem and its layer ablations as KBF-QA methods: the agent users talk to, asked as users ask.

The method is one `reveriemem.inference.module.ReverieInference` over the book (its memory tool
opens a `MemoryReader` per character, once), the module `reveriemem ask`, `chat` and
`reveriemem compile` use. Each item is a fresh conversation: the item's question with its five
options, as text (`eval.items.render_question`), exactly as `reveriemem ask BOOK CHARACTER "..."`
would ask it; its reply is matched to a letter by `eval.matching`. With a model, Memory-Fusion writes the
reply. Without one, the agent's offline reasoner decides (`reveriemem.inference.offline`): it
probes with the question and with the question read with each option, reads its bounded pool
and its own scene notes, and names the best-supported option or refuses below the floor
calibrated with the build (the `reader_calibration` asset, `read_train_items` below).

`read_train_items` is what that calibration reads: the agent's readings of the train part of the
book's generated items for one character (never items being judged); the floors are chosen over
the readings of all the book's focus characters (`reveriemem.inference.calibration`), the option
floors by the highest KBF of the option decisions and the question floor by the highest KBF of
free-form answers (a KRf answer counts when the quoted fact is the item's fact or states its gold
option).

Ablations drop one layer (`layers` of the same module): `reveriemem-no-episodic` (no Anchor),
`reveriemem-no-semantic` (no Vis-Retrieve: no fact pool), `reveriemem-no-personality` (no
Emo-Gate, Emo-Transition or Pattern).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from eval.items import ANSWER_LETTERS, KBFItem, render_question
from eval.methods.base import Answer, MethodContext
from reveriemem.core.characters import Character
from reveriemem.inference.calibration import ReaderCalibration, TrainReading, calibration_of
from reveriemem.inference.module import LAYERS, BookMemory, ReverieInference
from reveriemem.inference.offline_reader import term_set
from reveriemem.models import open_model

MAX_TRAIN = 40  # train items read per character at most (evenly across the story, half per split)
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


def calibration_agent(reader: Any, character: Character) -> ReverieInference:
    """The agent a character's train items are read with: no model, and no Personality layer, since the
    offline reasoner decides from the recalled facts, anchored scenes and what follows them alone (the
    emotional state and pattern a turn also carries never enter the decision, so leaving them out changes
    no reading and saves a pattern search per item)."""
    return ReverieInference(reader, open_model("none"), character, compiled=False, layers=LAYERS - {"personality"})


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
    return TrainReading(item.split, item.gold, str(offline.get("best") or ANSWER_LETTERS[0]),
                        float(offline.get("support") or 0.0), float(offline.get("book") or 0.0),
                        share if compared.on_point else 0.0, on_point)


def read_train_items(agent: ReverieInference, items: Sequence[KBFItem],
                     progress: Callable[[str], None] = lambda message: None) -> list[tuple[KBFItem, TrainReading]]:
    """The agent's readings of at most `MAX_TRAIN` of `items`, taken evenly across the story and both splits
    (what the `reader_calibration` asset stores for one character)."""
    chosen = _evenly(items, MAX_TRAIN)
    agent.prepare_offline(render_question(i) for i in chosen)
    out = []
    for n, item in enumerate(chosen, 1):
        out.append((item, read_train_item(agent, item)))
        if n % 25 == 0:
            progress(f"{agent.character.name}: {n}/{len(chosen)} train items read")
    return out


def calibrate_reader(agent: ReverieInference, items: Sequence[KBFItem], source: str,
                     progress: Callable[[str], None] = lambda message: None) -> ReaderCalibration:
    """The floors one character's train items alone would give (`calibration_of`); a build pools the
    readings of every focus character of the book instead (`load_calibration`)."""
    return calibration_of([r for _, r in read_train_items(agent, items, progress)], source)


def _evenly(items: Sequence[KBFItem], limit: int) -> list[KBFItem]:
    """At most `limit` items, half from each split, every k-th in the given (story) order."""
    out: list[KBFItem] = []
    for split in ("KRf", "KR"):
        mine = [i for i in items if i.split == split]
        step = max(1.0, len(mine) / (limit // 2))
        out += [mine[int(k * step)] for k in range(min(len(mine), limit // 2))]
    return out
