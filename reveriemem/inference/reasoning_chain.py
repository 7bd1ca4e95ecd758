"""The reasoning chain: Anchor, then Self-Probe rounds that each issue one probe to Vis-Retrieve.

**Anchor** recalls the character's own first-person scene notes (no model call); each
**Self-Probe** round names one concrete thing to look up and **Vis-Retrieve** adds the facts it
finds to the pool. From the second round on, the same Self-Probe call also says whether the pool
is already **Sufficient**. Round n is the n-th Self-Probe call followed by the retrieval of its
probe. Round 1 has no pool to judge, so its `sufficient` is ignored; a Sufficient verdict at
round n >= 2 ends the loop before that round's probe is issued (the pool is then the one of
n - 1 retrievals, the paper's exit round). A proposed probe that repeats an earlier one
(compared case- and punctuation-insensitively) is replaced by the round's refined question, and
if that repeats too the loop stops; the loop also stops after `max_rounds`. When Self-Probe's
output never parses (after `run_program`'s retries) the probe falls back to the question.

Without a model (`recall_offline`) the question itself is the first probe and the caller's
probes follow, one round each. Facts reach the pool only through `reader.vis_retrieve`, whose
visibility (and `as_of`) filter runs inside LanceDB; every row is checked again here
(`admissible`, `own_scene`), and a row that should not have come back is dropped and counted.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from reveriemem.core.characters import Character
from reveriemem.inference.memory_reader import Reader, score_of
from reveriemem.inference.trace import AnchoredScene, ProbeRound, TurnLog
from reveriemem.inference.turn_text import clean, clip, numbered_facts, probe_key
from reveriemem.models import ModelHandle, run_or_fallback, run_program

log = logging.getLogger(__name__)

SCENE_WORDS = 150  # a scene note in a prompt
QUESTION_PROBE = "question"  # Self-Probe's deterministic twin: the question (and the refined one) as the probe


class Proposal(NamedTuple):
    """One Self-Probe round's answer: the refined question, the proposed probe, the verdict, the probes to try."""

    refined: str
    proposed: str
    sufficient: bool | None
    candidates: list[str]


@dataclass
class Reasoning:
    """What the reasoning chain hands to Memory-Fusion and the trace."""

    anchored: list[AnchoredScene]
    scene_memory: list[str]
    rounds: list[ProbeRound]
    pool: list[dict[str, Any]]
    exit_round: int
    stop_reason: str
    dropped: int


@dataclass
class ReasoningChain:
    """One character's reasoning chain over `reader`, as the agent configures it for a turn."""

    reader: Reader
    reader_lock: threading.Lock  # the two tracks share the reader
    character: Character
    who: str  # the character as named in prompts
    handle: ModelHandle
    self_probe: Any  # the Self-Probe predictor
    layers: frozenset[str]
    max_rounds: int
    k: int
    anchor_k: int
    backoff: float

    @property
    def model_method(self) -> str:
        return f"model:{self.handle.name}"

    def anchor(self, run: TurnLog, question: str, as_of: int | None) -> tuple[list[AnchoredScene], list[str]]:
        """The character's own scenes nearest to the question, and their notes as shown to the model."""
        if "episodic" not in self.layers:
            return [], []
        with run.step("anchor", "reasoning"), self.reader_lock:
            rows = self.reader.anchor(question, k=self.anchor_k, as_of=as_of)
        rows = [r for r in rows if own_scene(r, self.character.slug, as_of)]
        anchored: list[AnchoredScene] = []
        for row in rows:
            where = ", ".join(x for x in (row.get("location"), row.get("time")) if x)
            note = (f"Scene {row.get('scene_id')}" + (f" ({where})" if where else "") + ": "
                    + clip(str(row.get("text") or ""), SCENE_WORDS))
            anchored.append(AnchoredScene(
                scene_id=int(row.get("scene_id") or 0), score=score_of(row), location=str(row.get("location") or ""),
                time=str(row.get("time") or ""), source_start=row.get("source_start"),
                source_end=row.get("source_end"), note=note,
            ))
        return anchored, [a.note for a in anchored]

    def retrieve(self, run: TurnLog, n: int, probe: str, as_of: int | None,
                 pool: dict[str, dict[str, Any]]) -> tuple[list[str], int]:
        """Vis-Retrieve one probe into the pool; (new fact ids, rows dropped by the check)."""
        if "semantic" not in self.layers:
            return [], 0
        with run.step(f"vis_retrieve:{n}", "reasoning"), self.reader_lock:
            rows = self.reader.vis_retrieve([probe], k=self.k, as_of=as_of, exclude=set(pool))
        new: list[str] = []
        dropped = 0
        for row in rows:
            if not admissible(row, self.character.slug, as_of):
                dropped += 1
                continue
            fact_id = str(row["fact_id"])
            if fact_id not in pool:
                pool[fact_id] = {**row, "probe": row.get("probe", probe), "round": n}
                new.append(fact_id)
        if dropped:
            log.warning("The reader returned %d fact(s) %s may not know; they were dropped",
                        dropped, self.character.name)
        return new, dropped

    def recall(self, run: TurnLog, question: str, as_of: int | None) -> Reasoning:
        """Anchor, then up to `max_rounds` Self-Probe rounds, each Vis-Retrieving its probe into the pool."""
        anchored, scene_memory = self.anchor(run, question, as_of)
        pool: dict[str, dict[str, Any]] = {}
        issued: list[str] = []
        rounds: list[ProbeRound] = []
        refined, dropped, stop, n = question, 0, "max_rounds", 0
        for n in range(1, self.max_rounds + 1):
            with run.step(f"self_probe:{n}", "reasoning", self.model_method) as step:
                outcome = run_or_fallback(
                    self.handle, partial(self._model_probe, n=n, question=question, refined=refined,
                                         scene_memory=scene_memory, issued=issued, pool=pool),
                    partial(Proposal, refined, "", None, [question, refined]), fallback_method=QUESTION_PROBE)
                if outcome.error is not None:
                    step.degraded = f"output never parsed; the probe falls back to the question ({outcome.error})"
            refined, proposed, sufficient, candidates = outcome.value
            record = ProbeRound(round=n, refined_question=refined, proposed=proposed, probe=None, sufficient=sufficient)
            rounds.append(record)
            if sufficient:
                record.note = "the pool already answers the question; this probe was not issued"
                stop = "sufficient"
                break
            seen = {probe_key(p) for p in issued}
            probe = next((c for c in candidates if probe_key(c) and probe_key(c) not in seen), None)
            if probe is None:
                record.note = "every candidate probe repeats an earlier one; the search stops"
                stop = "no_new_probe"
                break
            if proposed and probe != proposed:
                record.note = "the proposed probe repeats an earlier one; the refined question is used instead"
            record.probe = probe
            issued.append(probe)
            record.new_facts, lost = self.retrieve(run, n, probe, as_of, pool)
            dropped += lost
        return Reasoning(anchored, scene_memory, rounds, list(pool.values()), n, stop, dropped)

    def _model_probe(self, handle: ModelHandle, n: int, question: str, refined: str, scene_memory: list[str],
                     issued: list[str], pool: dict[str, dict[str, Any]]) -> Proposal:
        """Self-Probe round n asked of the model: its refined question, probe and (from round 2) verdict."""
        pred = run_program(handle, self.self_probe, backoff=self.backoff, character=self.who, question=question,
                           scene_memory=scene_memory, earlier_probes=list(issued),
                           fact_pool=numbered_facts(pool.values()))
        refined = clean(pred.refined_question) or refined
        proposed = clean(pred.probe)
        return Proposal(refined, proposed, bool(pred.sufficient) if n >= 2 else None, [proposed, refined])

    def recall_offline(self, run: TurnLog, question: str, as_of: int | None,
                       probes: Sequence[str] = ()) -> Reasoning:
        """Without a model: Anchor, then Vis-Retrieve the question and each of `probes`, one round each."""
        anchored, scene_memory = self.anchor(run, question, as_of)
        pool: dict[str, dict[str, Any]] = {}
        rounds: list[ProbeRound] = []
        dropped = 0
        seen: set[str] = set()
        for probe in [question, *probes]:
            probe, key = " ".join(str(probe).split()), probe_key(probe)
            if not key or key in seen:
                continue
            seen.add(key)
            n = len(rounds) + 1
            new, lost = self.retrieve(run, n, probe, as_of, pool)
            dropped += lost
            note = "no model: the question itself is the probe" if n == 1 else "no model: a probe the caller gave"
            rounds.append(ProbeRound(round=n, refined_question=question, proposed="", probe=probe, sufficient=None,
                                     new_facts=new, note=note))
        return Reasoning(anchored, scene_memory, rounds, list(pool.values()), len(rounds), "extractive", dropped)


def admissible(row: Mapping[str, Any], slug: str, as_of: int | None) -> bool:
    """The reader's contract, checked again: the character knows the fact, and knew it by `as_of`."""
    visibility = list(row.get("visibility") or [])
    if slug not in visibility:
        return False
    if as_of is None:
        return True
    since = list(row.get("visible_from") or [])
    index = visibility.index(slug)
    if index < len(since) and since[index] is not None and int(since[index]) > as_of:
        return False
    start = row.get("source_start")
    return start is None or int(start) <= as_of


def own_scene(row: Mapping[str, Any], slug: str, as_of: int | None) -> bool:
    """The reader's contract for episodes, checked again: the character's own, over by `as_of`."""
    if row.get("character") not in (None, slug):
        return False
    end = row.get("scene_end", row.get("source_end"))
    return as_of is None or end is None or int(end) <= as_of


def route_of(row: Mapping[str, Any], slug: str) -> str | None:
    """How the character knows the fact (its entry in `routes`, aligned with `visibility`)."""
    visibility = list(row.get("visibility") or [])
    routes = list(row.get("routes") or [])
    if slug in visibility and visibility.index(slug) < len(routes):
        return str(routes[visibility.index(slug)])
    return None
