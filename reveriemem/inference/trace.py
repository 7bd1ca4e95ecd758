"""The trace of a turn: what each step of the inference pipeline did, decided how, at what cost.

A `Turn` is the reply, the state to carry to the next turn, and its `Trace`: the anchored scenes,
every Self-Probe round, the terminal fact pool, the Emo-Gate verdict and emotion, the pattern,
and one `StepUsage` per step with how it was decided (`method`: `model:<name>`,
`heuristic:<step>-v<N>` or `retrieval`), its calls, tokens, latency and any fallback.

`TurnLog` records the steps while a turn runs. Both tracks share one model handle, so the
handle's call list cannot be split by diffing: every call is passed to the usage listeners in
the thread that made it (`listen_for_step_usage` registers the one listener), and a thread-local
names the step that thread is running.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from reveriemem.inference.emotion_track import AgentState
from reveriemem.models import ModelCall
from reveriemem.models.usage import add_listener

RETRIEVAL = "retrieval"  # Anchor, Vis-Retrieve and the emotion record: reads, never a model call


@dataclass
class StepUsage:
    """One step of a turn: its model usage (from the handle's recorder) and its timing."""

    step: str  # anchor, self_probe:<n>, vis_retrieve:<n>, emotion_record, emo_gate, emo_transition, pattern, memory_fusion
    track: str  # reasoning | personality | fusion
    method: str = RETRIEVAL  # model:<name> (asked the model), heuristic:<step>-v<N> or retrieval (decided without it)
    started_s: float = 0.0  # since the turn began: the two tracks overlap
    seconds: float = 0.0  # wall clock of the step, retrieval included
    calls: int = 0
    cached_calls: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_latency_s: float = 0.0
    degraded: str | None = None  # why the step fell back, if it did

    def add(self, call: ModelCall) -> None:
        if call.cached:
            self.cached_calls += 1
            return
        self.calls += 1
        self.failed_calls += 0 if call.ok else 1
        self.prompt_tokens += call.prompt_tokens
        self.completion_tokens += call.completion_tokens
        self.model_latency_s += call.latency_s

    @property
    def deterministic(self) -> bool:
        return not self.method.startswith("model:")


@dataclass
class AnchoredScene:
    scene_id: int
    score: float | None
    location: str
    time: str
    source_start: int | None
    source_end: int | None
    note: str  # the scene memory as shown to the model


@dataclass
class RecalledFact:
    fact_id: str
    text: str
    visibility: list[str]
    routes: list[str]  # aligned with `visibility`: how each of those characters knows it
    evidence: str  # the source passage that states it (book.text[source_start:source_end])
    route: str | None  # how this character knows it (direct, observation, organisation, common)
    source_start: int | None
    source_end: int | None
    known_from: int | None  # the offset from which this character knows it
    scene_id: int | None
    score: float | None  # the reader's ranking score (reciprocal-rank fusion when hybrid)
    similarity: float | None  # cosine similarity to the probe
    probe: str | None
    round: int


@dataclass
class ProbeRound:
    round: int
    refined_question: str
    proposed: str  # the probe the model wrote ("" when it wrote none)
    probe: str | None  # the probe issued (None: none issued this round)
    sufficient: bool | None  # None in round 1 and when the output never parsed
    new_facts: list[str] = field(default_factory=list)
    note: str = ""


@dataclass
class Trace:
    character: str
    character_name: str
    method: str  # model:<name>, model:<name>+compiled:<file name>, or heuristic:offline-reader-v<N>
    model: str
    as_of: int | None
    anchored: list[AnchoredScene]
    rounds: list[ProbeRound]
    facts: list[RecalledFact]  # the terminal pool, in the order shown to Memory-Fusion
    used_facts: list[str]
    exit_round: int
    stop_reason: str  # sufficient | max_rounds | no_new_probe | option | extractive | refusal
    gate: bool | None  # None: the model gate's output never parsed (emotion_model=True)
    gate_reason: str  # why the gate fired or stayed quiet
    emotion: dict[str, Any]  # emotion, intensity, reason, changed, source, method, record_steps
    pattern: dict[str, Any] | None
    pattern_source: str  # initial | selected | only-candidate | inertia | embedding | embedding-fallback | none
    pattern_candidates: list[int]
    steps: list[StepUsage]
    degraded: list[str]
    dropped_rows: int  # rows the reader returned that the character may not know (should stay 0)
    seconds: float = 0.0
    compiled: str | None = None  # the compiled program file the model steps ran with (None: the plain programs)
    offline: dict[str, Any] | None = None  # without a model: the offline reasoner's reading, floors and their source

    @property
    def calls(self) -> int:
        return sum(s.calls for s in self.steps)

    @property
    def tokens(self) -> int:
        return sum(s.prompt_tokens + s.completion_tokens for s in self.steps)

    @property
    def deterministic_steps(self) -> list[str]:
        """The steps decided without a model call by design (retrieval and heuristic steps)."""
        return [s.step for s in self.steps if s.deterministic]

    def totals(self) -> dict[str, int | float]:
        return {
            "calls": self.calls,
            "cached_calls": sum(s.cached_calls for s in self.steps),
            "prompt_tokens": sum(s.prompt_tokens for s in self.steps),
            "completion_tokens": sum(s.completion_tokens for s in self.steps),
            "total_tokens": self.tokens,
            "model_latency_s": round(sum(s.model_latency_s for s in self.steps), 3),
            "seconds": round(self.seconds, 3),
        }

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "deterministic_steps": self.deterministic_steps, "totals": self.totals()}


@dataclass
class Turn:
    question: str
    reply: str
    state: AgentState  # pass it to the next turn (the agent also keeps it)
    trace: Trace

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, "reply": self.reply, "state": asdict(self.state),
                "trace": self.trace.to_dict()}


# -- per-step usage ------------------------------------------------------------
# Both tracks share one handle, so the recorder's call list cannot be split by
# diffing. Every call is passed to the usage listeners in the thread that made
# it; a thread-local names the step that thread is running.

_active = threading.local()
_listener_lock = threading.Lock()
_listening = False


def _route_call(call: ModelCall) -> None:
    step = getattr(_active, "step", None)
    if step is not None:
        step.add(call)


def listen_for_step_usage() -> None:
    """Route every model call to the step running in its thread (registered once per process)."""
    global _listening
    with _listener_lock:
        if not _listening:
            add_listener(_route_call)
            _listening = True


class TurnLog:
    """The steps of one turn as they run, on either track: each step's usage, timing and fallback."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.steps: list[StepUsage] = []
        self.degraded: list[str] = []
        self._lock = threading.Lock()

    @contextmanager
    def step(self, name: str, track: str, method: str = RETRIEVAL) -> Iterator[StepUsage]:
        usage = StepUsage(step=name, track=track, method=method, started_s=round(time.perf_counter() - self.t0, 4))
        previous = getattr(_active, "step", None)
        _active.step = usage
        started = time.perf_counter()
        try:
            yield usage
        finally:
            _active.step = previous
            usage.seconds = round(time.perf_counter() - started, 4)
            usage.model_latency_s = round(usage.model_latency_s, 4)
            with self._lock:
                self.steps.append(usage)
                if usage.degraded:
                    self.degraded.append(f"{name}: {usage.degraded}")
