"""The character agent: one perspective-bounded reply per turn (paper: "Inference
Pipeline", Algorithm 1).

Two tracks run for every turn, at the same time:

- the reasoning chain, in the calling thread: **Anchor** recalls the
  character's own first-person scene notes (no model call); **Self-Probe**
  rounds each name one concrete thing to look up and **Vis-Retrieve** adds
  the facts it finds to the pool. From the second round on, the same
  Self-Probe call also says whether the pool is already **Sufficient**; the
  loop stops then, after `max_rounds`, or when no new probe is left (a probe
  never repeats an earlier one);
- the personality track, in a worker thread: **Emo-Gate** decides whether the
  turn stirs the character; only then does **Emo-Transition** propose a new
  emotional state from the character's emotion-transition record and
  **Pattern** choose among the behavioural patterns retrieved for that state
  and the conversation. A turn that does not fire the gate keeps the
  previous state and pattern (emotional inertia).

**Memory-Fusion** then writes the reply from the scene notes, the pool and
the pattern. Facts reach it only through `reader.vis_retrieve`, whose
visibility (and `as_of`) filter runs inside LanceDB; every row is checked
again here, and a row that should not have come back is dropped and counted.

As in the paper, only three steps are model prompts: Self-Probe, Pattern and
Memory-Fusion. By default Emo-Gate and Emo-Transition are deterministic
(`emotion_gate`, `emotion_transition`): the gate fires when the lexicon
annotator of `reveriemem.source_to_memory.emotions` reads a non-neutral emotion of intensity
>= 2 in the turn, or when the turn names something in the triggers of the
character's recent emotional transitions; the transition takes the state the
record most often moves to from the current one under triggers like the
turn's, else the turn's own emotion, and its reason names the record steps
used. `emotion_model=True` asks the model instead (the `EmoGate` and
`EmoTransition` signatures). Pattern asks the model only when the gate fired
or there is no pattern yet, and not when a single candidate is retrieved. A
turn therefore makes one Self-Probe call per round plus Memory-Fusion, and
one more (Pattern) when the gate fires or on a first turn: 3 calls for an
exit at round 2 with a quiet gate, 4 when it fires. Each step of the trace
says how it was decided (`StepUsage.method`: `model:<name>`,
`heuristic:<step>-v<N>` or `retrieval`).

Round n is the n-th Self-Probe call followed by the retrieval of its probe.
Round 1 has no pool to judge, so its `sufficient` is ignored; a Sufficient
verdict at round n >= 2 ends the loop before that round's probe is issued
(the pool is then the one of n - 1 retrievals, the paper's exit round). A
proposed probe that repeats an earlier one (compared case- and
punctuation-insensitively) is replaced by the round's refined question, and
if that repeats too the loop stops.

Every step degrades rather than fails when the model's output never parses
(after `run_program`'s retries): Self-Probe falls back to the question, a
model Emo-Gate counts as not firing, a model Emo-Transition keeps the
previous emotion, Pattern takes the candidate closest by embedding; the trace
lists each fallback in `degraded`. Memory-Fusion is the exception: it raises
`ModelOutputError`. The trace also carries each step's calls, tokens and
latency, taken from the handle's usage recorder.

Without a model (`handle.lm is None`) the agent answers extractively: the
best retrieved fact's evidence framed in the first person, or an in-character
refusal when no fact is at least `min_score` similar to the question (cosine)
and shares a content word with it. The deterministic personality track runs
all the same (Pattern then takes the closest candidate by embedding).

The three prompts are the predictors of one `InferencePrograms` module
(`self_probe`, `select_pattern`, `memory_fusion`, from the factories of
`dspy_programs.inference`), so DSPy can compile them together
(`eval/compile.py`). By default the agent loads compiled state (demos and,
after MIPROv2, instructions) from `dspy_programs/compiled/inference.json`
when that file exists; `REVERIEMEM_COMPILED=<path>` names another compiled
file and `REVERIEMEM_COMPILED=none` loads none; `programs=` overrides both.
The trace's `method` then reads `model:<name>+compiled:<file name>` and
`compiled` holds the file's path. A compiled file made from other signatures
than the current ones (its `reveriemem.signatures` digest differs) is never
loaded: a stale default file is skipped with a warning, a file named by
`REVERIEMEM_COMPILED` is an error. Calls still go through `run_program`,
whose persistent-cache key includes each program's state (its demos), so a
compiled program never reuses an uncompiled program's answers.

For compiling, `inline_personality=True` runs the personality track in the
calling thread; by default it runs in a worker thread that inherits the
caller's context (`contextvars`), DSPy settings and trace included. A call
answered from the persistent model cache never runs its predictor, so DSPy
does not trace it: compile with a handle whose `cache` is off.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import dspy
from dspy.utils.saving import get_dependency_versions

import dspy_programs
from dspy_programs.inference import (
    emo_gate_program,
    emo_transition_program,
    memory_fusion_program,
    select_pattern_program,
    self_probe_program,
)
from dspy_programs.personality import EMOTIONS
from reveriemem.core.characters import Character
from reveriemem.core.errors import ModelOutputError, ReverieMemError, StorageError
from reveriemem.models import ModelCall, ModelHandle, run_program
from reveriemem.models.usage import add_listener
from reveriemem.source_to_memory.emotions import read_utterance

log = logging.getLogger(__name__)

AGENT_VERSION = "agent-v1"
EXTRACTIVE_METHOD = f"heuristic:extractive-{AGENT_VERSION}"
ANCHOR_K = 3  # scenes recalled as the frame
PATTERN_K = 3  # candidate patterns offered to the Pattern step
HISTORY_LINES = 8  # conversation lines shown to the model
TRANSITION_LINES = 8  # emotion-transition records shown to Emo-Transition; recent triggers the gate looks for
GATE_INTENSITY = 2  # the least lexicon intensity of a non-neutral emotion that fires the gate
GATE_METHOD = "heuristic:emo-gate-v1"
TRANSITION_METHOD = "heuristic:emo-transition-v1"
PATTERN_METHOD = "heuristic:pattern-v1"  # no model call: a single candidate, none, or the closest by embedding
RETRIEVAL = "retrieval"  # Anchor, Vis-Retrieve and the emotion record: reads, never a model call
SCENE_WORDS = 150  # a scene note in a prompt
EVIDENCE_WORDS = 40  # a fact's quotation in a prompt
MIN_SCORE = 0.3  # extractive path: the least cosine similarity of a fact worth quoting
REFUSAL = "I can't tell you that; it is nothing I saw or heard for myself."
LAYERS = frozenset({"episodic", "semantic", "personality"})  # the three memory layers; ablations drop one


class Reader(Protocol):
    """What the agent needs of `reveriemem.inference.retrieval.MemoryReader` (one book, one character)."""

    def anchor(self, query: str, k: int = 3, as_of: int | None = None) -> list[dict[str, Any]]: ...

    def vis_retrieve(self, probes: list[str], k: int = 8, as_of: int | None = None,
                     exclude: Iterable[str] = ...) -> list[dict[str, Any]]: ...

    def patterns(self, query: str, k: int = 3) -> list[dict[str, Any]]: ...

    def emotion_record(self, as_of: int | None = None) -> list[dict[str, Any]]: ...


# -- the inference programs ---------------------------------------------------

COMPILED_ENV = "REVERIEMEM_COMPILED"  # a compiled program's JSON for the agent; "none": load none
COMPILED_DIR = Path(dspy_programs.__file__).resolve().parent / "compiled"
DEFAULT_COMPILED = COMPILED_DIR / "inference.json"  # loaded by default when present
COMPILED_KEY = "reveriemem"  # the project's own block in a compiled program's JSON
_NO_COMPILED = frozenset({"none", "off", "0", "false", "no"})


class CompiledProgramError(ReverieMemError):
    """A compiled program file is missing, unreadable, or made for other signatures."""


class InferencePrograms(dspy.Module):
    """The agent's three model prompts as one DSPy module, so they compile together.

    `self_probe`, `select_pattern` and `memory_fusion` are the predictors of
    `dspy_programs.inference` (EmoGate and EmoTransition are not: by default
    they are no prompts at all). The agent calls each one through
    `run_program`; the module itself is never called. `compiled` is the file
    its state was loaded from (None: the plain signatures, no demos).
    """

    def __init__(self) -> None:
        super().__init__()
        self.self_probe = self_probe_program()
        self.select_pattern = select_pattern_program()
        self.memory_fusion = memory_fusion_program()
        self.compiled: Path | None = None

    def forward(self, **inputs: Any) -> dspy.Prediction:
        raise TypeError("InferencePrograms only holds the agent's programs; the agent calls each one itself.")

    @property
    def demos(self) -> dict[str, int]:
        """Predictor name -> number of demos."""
        return {name: len(predictor.demos) for name, predictor in self.named_predictors()}

    @property
    def label(self) -> str | None:
        """What the trace names: the compiled file's name, "unsaved" for demos not loaded from a file, else None."""
        if self.compiled is not None:
            return self.compiled.name
        return "unsaved" if any(self.demos.values()) else None

    @classmethod
    def from_file(cls, path: str | Path) -> InferencePrograms:
        """Programs with the compiled state of `path` (a JSON written by `save_compiled` or DSPy's `save`)."""
        path = Path(path).expanduser().resolve()
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CompiledProgramError(f"The compiled program {path} could not be read ({exc}).") from exc
        programs = cls()
        made_for = (state.get(COMPILED_KEY) or {}).get("signatures") if isinstance(state, dict) else None
        if made_for is not None and made_for != programs.signature_digest():
            raise CompiledProgramError(
                f"The compiled program {path} was made for other prompts than those in dspy_programs/inference.py; "
                "compile again (`reveriemem compile BOOK`) or remove it.")
        try:
            programs.load(path)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CompiledProgramError(f"The compiled program {path} does not fit the agent's programs ({exc}).") from exc
        programs.compiled = path
        return programs

    @classmethod
    def signature_digest(cls) -> str:
        """A digest of the plain signatures (as the factories build them): what a compiled file was made for."""
        parts = []
        for name, predictor in cls().named_predictors():
            signature = predictor.signature
            fields = [[key, dict(value.json_schema_extra or {}), repr(value.annotation)]
                      for key, value in signature.fields.items()]
            parts.append([name, signature.instructions, fields])
        text = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def save_compiled(self, path: str | Path, **about: Any) -> Path:
        """Write the state (demos, instructions) as JSON, atomically; `about` joins the file's `reveriemem` block."""
        path = Path(path).expanduser().resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        state: dict[str, Any] = self.dump_state()
        state["metadata"] = {"dependency_versions": get_dependency_versions()}
        state[COMPILED_KEY] = {"signatures": self.signature_digest(), "demos": self.demos, **about}
        text = json.dumps(state, indent=2, ensure_ascii=False, default=str) + "\n"
        _atomic_write(path, text)
        return path


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def compiled_path() -> Path | None:
    """The compiled program the agent loads: `$REVERIEMEM_COMPILED` ("none": none), else
    `dspy_programs/compiled/inference.json` when it exists, else None."""
    value = os.environ.get(COMPILED_ENV, "").strip()
    if value.lower() in _NO_COMPILED:
        return None
    if value:
        path = Path(value).expanduser().resolve()
        if not path.is_file():
            raise CompiledProgramError(f"{COMPILED_ENV} names {path}, which is not a file; "
                                       f"set it to a compiled program's JSON or to 'none'.")
        return path
    return DEFAULT_COMPILED if DEFAULT_COMPILED.is_file() else None


def default_programs() -> InferencePrograms:
    """The agent's programs when none are given: compiled from `compiled_path()`, else plain.

    A default file that cannot be loaded (unreadable, or made for other
    signatures) is skipped with a warning; one named by `$REVERIEMEM_COMPILED` raises."""
    path = compiled_path()
    if path is None:
        return InferencePrograms()
    try:
        return InferencePrograms.from_file(path)
    except CompiledProgramError as exc:
        if os.environ.get(COMPILED_ENV, "").strip():
            raise
        log.warning("%s The agent uses the plain programs.", exc)
        return InferencePrograms()


# -- state and trace -----------------------------------------------------------


@dataclass(frozen=True)
class PatternChoice:
    """A behavioural pattern of the Personality layer, as injected into Memory-Fusion."""

    pattern_id: int
    description: str
    excerpts: tuple[str, ...] = ()
    dominant_emotion: str | None = None
    score: float | None = None


@dataclass(frozen=True)
class AgentState:
    """What carries from one turn to the next: the emotional state and the pattern."""

    emotion: str = "neutral"
    intensity: int = 1
    reason: str = ""
    pattern: PatternChoice | None = None

    def describe(self) -> str:
        text = f"{self.emotion}, intensity {self.intensity} of 5"
        return f"{text}, because of {self.reason}" if self.reason else text


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
    method: str  # model:<name>, model:<name>+compiled:<file name>, or heuristic:extractive-agent-v1
    model: str
    as_of: int | None
    anchored: list[AnchoredScene]
    rounds: list[ProbeRound]
    facts: list[RecalledFact]  # the terminal pool, in the order shown to Memory-Fusion
    used_facts: list[str]
    exit_round: int
    stop_reason: str  # sufficient | max_rounds | no_new_probe | extractive | refusal
    gate: bool | None  # None: the model gate's output never parsed (emotion_model=True)
    gate_reason: str  # why the gate fired or stayed quiet
    emotion: dict[str, Any]  # emotion, intensity, reason, changed, source, method, record_steps
    pattern: dict[str, Any] | None
    pattern_source: str  # selected | only-candidate | inertia | embedding | embedding-fallback | none
    pattern_candidates: list[int]
    steps: list[StepUsage]
    degraded: list[str]
    dropped_rows: int  # rows the reader returned that the character may not know (should stay 0)
    seconds: float = 0.0
    compiled: str | None = None  # the compiled program file the model steps ran with (None: the plain programs)

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


def _ensure_listener() -> None:
    global _listening
    with _listener_lock:
        if not _listening:
            add_listener(_route_call)
            _listening = True


class _TurnLog:
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


@dataclass
class _Reasoning:
    anchored: list[AnchoredScene]
    scene_memory: list[str]
    rounds: list[ProbeRound]
    pool: list[dict[str, Any]]
    exit_round: int
    stop_reason: str
    dropped: int


@dataclass
class _Personality:
    state: AgentState
    gate: bool | None
    gate_reason: str
    changed: bool
    emotion_source: str
    emotion_method: str  # what decided the emotion: heuristic:emo-transition-v1, model:<name> or "" (unchanged)
    record_steps: list[int]  # the emotion-record steps a deterministic transition drew on
    pattern_source: str
    candidates: list[int]


# -- the deterministic Emo-Gate and Emo-Transition -------------------------------


@dataclass(frozen=True)
class GateVerdict:
    """Emo-Gate without a model: the lexicon's reading of the turn and the recent triggers it names."""

    fires: bool
    emotion: str  # the lexicon annotator's emotion of the turn (reveriemem.source_to_memory.emotions.read_utterance)
    intensity: int
    named: dict[int, tuple[str, ...]]  # record step -> the words of the turn its trigger holds
    reason: str

    @property
    def stirred(self) -> bool:
        return self.emotion != "neutral" and self.intensity >= GATE_INTENSITY


@dataclass(frozen=True)
class Proposal:
    """Emo-Transition without a model: the next state and the record steps it rests on."""

    emotion: str
    intensity: int
    reason: str
    steps: tuple[int, ...]
    rule: str  # record | turn | named | kept


def emotion_gate(turn: str, record: Sequence[Mapping[str, Any]], own_words: Iterable[str] = ()) -> GateVerdict:
    """Does `turn` stir the character? Yes when the lexicon annotator reads a non-neutral emotion of
    intensity >= GATE_INTENSITY in it, or when it names something (a word of four letters or more, the
    character's own names aside) in a recent trigger: one of the last TRANSITION_LINES rows of the
    character's emotion-transition `record` that left the character in a non-neutral emotion."""
    reading = read_utterance(turn)
    words = _mention_keys(turn) - {w for name in own_words for w in _mention_keys(name)}
    named: dict[int, tuple[str, ...]] = {}
    for step, row in _recent_triggers(record):
        shared = words & _mention_keys(str(row.get("trigger") or ""))
        if shared:
            named[step] = tuple(sorted(shared))
    stirred = reading.emotion != "neutral" and reading.intensity >= GATE_INTENSITY
    reasons = []
    if stirred:
        reasons.append(f"the lexicon reads {reading.emotion} {reading.intensity} of 5 in the turn")
    if named:
        mentioned = sorted({w for ws in named.values() for w in ws})
        reasons.append(f"the turn names {', '.join(mentioned)} from the triggers of record "
                       f"{_steps_text(sorted(named))}")
    if not reasons:
        reasons.append(f"quiet: the lexicon reads {reading.emotion} {reading.intensity} of 5 and the turn names "
                       "nothing of the recent triggers")
    return GateVerdict(stirred or bool(named), reading.emotion, reading.intensity, named, "; ".join(reasons))


def emotion_transition(state: AgentState, gate: GateVerdict, record: Sequence[Mapping[str, Any]]) -> Proposal:
    """The next emotional state after a turn that fired the gate, read off the character's record.

    Among the record's rows from the current emotion whose trigger is like the turn (the lexicon reads
    the turn's emotion in it, or the turn names it), the emotion they most often move to (ties: the
    latest), at their mean intensity; with no such row, the turn's own emotion when the lexicon found
    one; else the state the latest trigger the turn names left the character in; else no change.
    """
    cause = (f"{gate.emotion} in what was said" if gate.stirred
             else f"the mention of {', '.join(sorted({w for ws in gate.named.values() for w in ws}))}")
    rows = [(step, row) for step, row in _numbered_record(record) if str(row.get("to_emotion")) in EMOTIONS]
    like = [(step, row) for step, row in rows
            if step in gate.named or (gate.stirred and _trigger_emotion(str(row.get("trigger") or "")) == gate.emotion)]
    current = [(step, row) for step, row in like if row.get("from_emotion") == state.emotion]
    if current:
        counts = Counter(str(row["to_emotion"]) for _, row in current)
        latest = {str(row["to_emotion"]): i for i, (_, row) in enumerate(current)}
        best = max(counts, key=lambda e: (counts[e], latest[e]))
        used = [(step, row) for step, row in current if row["to_emotion"] == best]
        intensity = _intensity(round(sum(_intensity(row.get("to_intensity")) for _, row in used) / len(used)))
        steps = tuple(step for step, _ in used)
        return Proposal(best, intensity, f"{cause}; as at record {_steps_text(steps)}: {state.emotion} -> {best}",
                        steps, "record")
    if gate.stirred:
        return Proposal(gate.emotion, gate.intensity,
                        f"{cause}; no record step moves from {state.emotion} under a like trigger", (), "turn")
    named = [(step, row) for step, row in like if step in gate.named]
    if named:
        step, row = named[-1]
        before = row.get("from_emotion") or "(start)"
        return Proposal(str(row["to_emotion"]), _intensity(row.get("to_intensity")),
                        f"{cause}; as at record step {step}: {before} -> {row['to_emotion']}", (step,), "named")
    return Proposal(state.emotion, state.intensity, state.reason, (), "kept")


# -- the agent -----------------------------------------------------------------


class ReverieAgent:
    """A character of a book answering from its own memory, as bounded by `reader`.

    `reader` is a `reveriemem.inference.retrieval.MemoryReader` for the same book and
    character. `respond` with `state=None` continues from the agent's own
    previous turn (or, on the first turn, from the character's latest
    recorded emotion up to `as_of`). `emotion_model=True` asks the model for
    Emo-Gate and Emo-Transition (two more calls when the gate fires) instead
    of deciding them from the lexicon and the emotion record; without a model
    they are deterministic either way. `programs` are the three prompts
    (default: `default_programs()`, compiled state from
    `dspy_programs/compiled/inference.json` or `$REVERIEMEM_COMPILED` when
    present); `inline_personality=True` runs the personality track in the
    calling thread, one step after another (for compiling).
    """

    def __init__(self, reader: Reader, handle: ModelHandle, character: Character, max_rounds: int = 3,
                 k: int = 8, *, anchor_k: int = ANCHOR_K, pattern_k: int = PATTERN_K,
                 min_score: float = MIN_SCORE, backoff: float = 0.5, emotion_model: bool = False,
                 layers: Iterable[str] = LAYERS, programs: InferencePrograms | None = None,
                 inline_personality: bool = False) -> None:
        self.layers = frozenset(layers)
        if not self.layers <= LAYERS:
            raise ValueError(f"Unknown memory layer(s): {', '.join(sorted(self.layers - LAYERS))}.")
        if max_rounds < 1:
            raise ValueError("max_rounds must be at least 1.")
        if k < 1:
            raise ValueError("k must be at least 1.")
        self.reader = reader
        self.handle = handle
        self.character = character
        self.max_rounds = max_rounds
        self.k = k
        self.anchor_k = anchor_k
        self.pattern_k = pattern_k
        self.min_score = min_score
        self.backoff = backoff
        self.emotion_model = emotion_model
        self.programs = programs if programs is not None else default_programs()
        self.inline_personality = inline_personality
        self.state: AgentState | None = None
        self._reader_lock = threading.Lock()  # the two tracks share the reader
        _ensure_listener()

    @property
    def method(self) -> str:
        if self.handle.lm is None:
            return EXTRACTIVE_METHOD
        label = self.programs.label
        return self._model_method + (f"+compiled:{label}" if label else "")

    @property
    def compiled(self) -> str | None:
        """The compiled program file the model steps use (None: none, or no model)."""
        path = self.programs.compiled
        return str(path) if path is not None and self.handle.lm is not None else None

    @property
    def _model_method(self) -> str:
        return f"model:{self.handle.name}"

    @property
    def _who(self) -> str:
        others = [a for a in self.character.aliases if a != self.character.name]
        return self.character.name + (f" (also called {', '.join(others)})" if others else "")

    def respond(self, question: str, history: Sequence[str | tuple[str, str]] = (),
                state: AgentState | None = None, as_of: int | None = None, probes: Sequence[str] = ()) -> Turn:
        """Answer `question` as the character; `history` is the conversation so far,
        as lines or (speaker, text) pairs; `as_of` bounds memory to a point of the story.
        `probes` are further look-ups for the deterministic chain (no model), issued after
        the question, one round each (e.g. the question read with each option of a
        multiple-choice item); with a model, Self-Probe writes the probes and these are unused."""
        question = " ".join(question.split())
        if not question:
            raise ValueError("The question is empty: ask the character something.")
        lines = [_history_line(item) for item in history][-HISTORY_LINES:]
        start = state if state is not None else self.state
        run = _TurnLog()
        if self.handle.lm is None:
            reasoning = self._extractive_chain(run, question, as_of, probes)
            personality = self._personality_track(run, question, lines, start, as_of)
            reply, used, stop = self._extract(question, reasoning.pool)
            reasoning.stop_reason = stop
        elif self.inline_personality:
            reasoning = self._reasoning_chain(run, question, as_of)
            personality = self._personality_track(run, question, lines, start, as_of)
            reply, used = self._fuse(run, question, lines, reasoning, personality.state)
        else:
            # the worker runs in a copy of this context: DSPy's settings (its trace) reach it
            context = contextvars.copy_context()
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="reverie-personality") as pool:
                track = pool.submit(context.run, self._personality_track, run, question, lines, start, as_of)
                reasoning = self._reasoning_chain(run, question, as_of)
                personality = track.result()
            reply, used = self._fuse(run, question, lines, reasoning, personality.state)
        self.state = personality.state
        trace = self._trace(run, as_of, reasoning, personality, used)
        return Turn(question=question, reply=reply, state=personality.state, trace=trace)

    # -- reasoning chain ---------------------------------------------------------

    def _anchor(self, run: _TurnLog, question: str, as_of: int | None) -> tuple[list[AnchoredScene], list[str]]:
        if "episodic" not in self.layers:
            return [], []
        with run.step("anchor", "reasoning"), self._reader_lock:
            rows = self.reader.anchor(question, k=self.anchor_k, as_of=as_of)
        rows = [r for r in rows if _own_scene(r, self.character.slug, as_of)]
        anchored: list[AnchoredScene] = []
        for row in rows:
            where = ", ".join(x for x in (row.get("location"), row.get("time")) if x)
            note = (f"Scene {row.get('scene_id')}" + (f" ({where})" if where else "") + ": "
                    + _clip(str(row.get("text") or ""), SCENE_WORDS))
            anchored.append(AnchoredScene(
                scene_id=int(row.get("scene_id") or 0), score=_score(row), location=str(row.get("location") or ""),
                time=str(row.get("time") or ""), source_start=row.get("source_start"),
                source_end=row.get("source_end"), note=note,
            ))
        return anchored, [a.note for a in anchored]

    def _retrieve(self, run: _TurnLog, n: int, probe: str, as_of: int | None,
                  pool: dict[str, dict[str, Any]]) -> tuple[list[str], int]:
        """Vis-Retrieve one probe into the pool; (new fact ids, rows dropped by the check)."""
        if "semantic" not in self.layers:
            return [], 0
        with run.step(f"vis_retrieve:{n}", "reasoning"), self._reader_lock:
            rows = self.reader.vis_retrieve([probe], k=self.k, as_of=as_of, exclude=set(pool))
        new: list[str] = []
        dropped = 0
        for row in rows:
            if not _admissible(row, self.character.slug, as_of):
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

    def _reasoning_chain(self, run: _TurnLog, question: str, as_of: int | None) -> _Reasoning:
        anchored, scene_memory = self._anchor(run, question, as_of)
        pool: dict[str, dict[str, Any]] = {}
        issued: list[str] = []
        rounds: list[ProbeRound] = []
        refined, dropped, stop, n = question, 0, "max_rounds", 0
        for n in range(1, self.max_rounds + 1):
            with run.step(f"self_probe:{n}", "reasoning", self._model_method) as step:
                try:
                    pred = run_program(self.handle, self.programs.self_probe, backoff=self.backoff,
                                       character=self._who, question=question, scene_memory=scene_memory,
                                       earlier_probes=list(issued), fact_pool=_numbered(pool.values()))
                except ModelOutputError as exc:
                    step.degraded = f"output never parsed; the probe falls back to the question ({exc})"
                    proposed, sufficient, candidates = "", None, [question, refined]
                else:
                    refined = _clean(pred.refined_question) or refined
                    proposed = _clean(pred.probe)
                    sufficient = bool(pred.sufficient) if n >= 2 else None
                    candidates = [proposed, refined]
            record = ProbeRound(round=n, refined_question=refined, proposed=proposed, probe=None, sufficient=sufficient)
            rounds.append(record)
            if sufficient:
                record.note = "the pool already answers the question; this probe was not issued"
                stop = "sufficient"
                break
            seen = {_probe_key(p) for p in issued}
            probe = next((c for c in candidates if _probe_key(c) and _probe_key(c) not in seen), None)
            if probe is None:
                record.note = "every candidate probe repeats an earlier one; the search stops"
                stop = "no_new_probe"
                break
            if proposed and probe != proposed:
                record.note = "the proposed probe repeats an earlier one; the refined question is used instead"
            record.probe = probe
            issued.append(probe)
            record.new_facts, lost = self._retrieve(run, n, probe, as_of, pool)
            dropped += lost
        return _Reasoning(anchored, scene_memory, rounds, list(pool.values()), n, stop, dropped)

    def _extractive_chain(self, run: _TurnLog, question: str, as_of: int | None,
                          probes: Sequence[str] = ()) -> _Reasoning:
        anchored, scene_memory = self._anchor(run, question, as_of)
        pool: dict[str, dict[str, Any]] = {}
        rounds: list[ProbeRound] = []
        dropped = 0
        seen: set[str] = set()
        for probe in [question, *probes]:
            probe, key = " ".join(str(probe).split()), _probe_key(probe)
            if not key or key in seen:
                continue
            seen.add(key)
            n = len(rounds) + 1
            new, lost = self._retrieve(run, n, probe, as_of, pool)
            dropped += lost
            note = "no model: the question itself is the probe" if n == 1 else "no model: a probe the caller gave"
            rounds.append(ProbeRound(round=n, refined_question=question, proposed="", probe=probe, sufficient=None,
                                     new_facts=new, note=note))
        return _Reasoning(anchored, scene_memory, rounds, list(pool.values()), len(rounds), "extractive", dropped)

    def _extract(self, question: str, pool: list[dict[str, Any]]) -> tuple[str, list[str], str]:
        """The fact most similar to the question among those at least `min_score` similar
        (cosine) that share a content word with it; else a refusal."""
        asked = _content_words(question)
        scored = [row for row in pool if (_similarity(row) or 0.0) >= self.min_score
                  and asked & _content_words(f"{row.get('text') or ''} {row.get('evidence') or ''}")]
        if not scored:
            return REFUSAL, [], "refusal"
        best = max(scored, key=lambda row: _similarity(row) or 0.0)
        quote = _clip(str(best.get("evidence") or best.get("text") or ""), 60)
        return f'As I remember it: "{quote}"', [str(best["fact_id"])], "extractive"

    # -- personality track -------------------------------------------------------

    def _personality_track(self, run: _TurnLog, question: str, lines: list[str], state: AgentState | None,
                           as_of: int | None) -> _Personality:
        if "personality" not in self.layers:
            kept = state or AgentState("neutral", 0, "", None)
            return _Personality(AgentState(kept.emotion, kept.intensity, kept.reason, None), None,
                                "no Personality layer", False, "inertia", "", [], "none", [])
        if self.emotion_model and self.handle.lm is not None:
            return self._model_personality(run, question, lines, state, as_of)
        with run.step("emotion_record", "personality") as step:
            record = self._personality_rows(step, self.reader.emotion_record, as_of=as_of)
        emotion_source = "inertia"
        if state is None:
            state = _state_from_record(record)
            emotion_source = "record" if record else "default"
        with run.step("emo_gate", "personality", GATE_METHOD):
            gate = emotion_gate(question, record, [self.character.name, *self.character.aliases])
        new, method, steps = state, "", []
        if gate.fires:
            with run.step("emo_transition", "personality", TRANSITION_METHOD):
                proposal = emotion_transition(state, gate, record)
            new = AgentState(proposal.emotion, proposal.intensity, proposal.reason, state.pattern)
            emotion_source, method, steps = "transition", TRANSITION_METHOD, list(proposal.steps)
        pattern: PatternChoice | None
        candidates: list[int]
        if not gate.fires and state.pattern is not None:
            pattern, source, candidates = state.pattern, "inertia", []
        elif self.handle.lm is None:
            pattern, source, candidates = self._closest_pattern(run, new, question, lines)
        else:
            pattern, source, candidates = self._select_pattern(run, new, question, lines)
        changed = (new.emotion, new.intensity) != (state.emotion, state.intensity)
        return _Personality(AgentState(new.emotion, new.intensity, new.reason, pattern), gate.fires, gate.reason,
                            changed, emotion_source, method, steps, source, candidates)

    def _model_personality(self, run: _TurnLog, question: str, lines: list[str], state: AgentState | None,
                           as_of: int | None) -> _Personality:
        """The personality track with Emo-Gate and Emo-Transition asked of the model (emotion_model=True)."""
        emotion_source, method = "inertia", ""
        if state is None:
            with run.step("emotion_record", "personality") as step:
                record = self._personality_rows(step, self.reader.emotion_record, as_of=as_of)
            state = _state_from_record(record)
            emotion_source = "record" if record else "default"
        gate: bool | None = None
        gate_reason = "the model's output never parsed; treated as not firing"
        with run.step("emo_gate", "personality", self._model_method) as step:
            try:
                pred = run_program(self.handle, emo_gate_program(), backoff=self.backoff, character=self._who,
                                   emotion_state=state.describe(), history=lines, turn=question)
                gate = bool(pred.fires)
                gate_reason = f"the model says the turn {'stirs' if gate else 'does not stir'} the character"
            except ModelOutputError as exc:
                step.degraded = f"output never parsed; treated as not firing, the state is kept ({exc})"
        new = state
        if gate:
            with run.step("emo_transition", "personality", self._model_method) as step:
                record = self._personality_rows(step, self.reader.emotion_record, as_of=as_of)
                transitions = [_transition_line(r) for r in record[-TRANSITION_LINES:]]
                try:
                    pred = run_program(self.handle, emo_transition_program(), backoff=self.backoff,
                                       character=self._who, emotion_state=state.describe(),
                                       transitions=transitions, turn=question)
                    emotion = str(pred.emotion) if str(pred.emotion) in EMOTIONS else state.emotion
                    new = AgentState(emotion, _intensity(pred.intensity), _clean(pred.reason), state.pattern)
                    emotion_source, method = "transition", self._model_method
                except ModelOutputError as exc:
                    step.degraded = f"output never parsed; the previous emotion is kept ({exc})"
                    emotion_source = "kept"
        pattern: PatternChoice | None
        candidates: list[int]
        if not gate and state.pattern is not None:
            pattern, source, candidates = state.pattern, "inertia", []
        else:
            pattern, source, candidates = self._select_pattern(run, new, question, lines)
        changed = (new.emotion, new.intensity) != (state.emotion, state.intensity)
        return _Personality(AgentState(new.emotion, new.intensity, new.reason, pattern), gate, gate_reason, changed,
                            emotion_source, method, [], source, candidates)

    def _personality_rows(self, step: StepUsage, read: Any, **kwargs: Any) -> list[dict[str, Any]]:
        """A personality-layer read; a layer that was not built degrades the step instead of failing the turn."""
        try:
            with self._reader_lock:
                return list(read(**kwargs))
        except StorageError as exc:
            step.degraded = f"the personality layer could not be read ({exc})"
            return []

    def _candidates(self, step: StepUsage, state: AgentState, question: str, lines: list[str]) -> list[PatternChoice]:
        query = " ".join([state.emotion, state.reason, *lines[-2:], question])
        rows = self._personality_rows(step, self.reader.patterns, query=query, k=self.pattern_k)
        return [PatternChoice(int(r["pattern_id"]), str(r.get("description") or ""),
                              tuple(str(x) for x in (r.get("excerpts") or ())), r.get("dominant_emotion"),
                              _score(r)) for r in rows]

    def _closest_pattern(self, run: _TurnLog, state: AgentState, question: str,
                         lines: list[str]) -> tuple[PatternChoice | None, str, list[int]]:
        """Without a model: the candidate closest by embedding."""
        with run.step("pattern", "personality", PATTERN_METHOD) as step:
            candidates = self._candidates(step, state, question, lines)
        ids = [c.pattern_id for c in candidates]
        return (candidates[0], "embedding", ids) if candidates else (None, "none", ids)

    def _select_pattern(self, run: _TurnLog, state: AgentState, question: str,
                        lines: list[str]) -> tuple[PatternChoice | None, str, list[int]]:
        with run.step("pattern", "personality", PATTERN_METHOD) as step:
            candidates = self._candidates(step, state, question, lines)
            ids = [c.pattern_id for c in candidates]
            if not candidates:
                return None, "none", ids
            if len(candidates) == 1:
                return candidates[0], "only-candidate", ids
            step.method = self._model_method
            numbered = [f"[{i}] {c.description}" for i, c in enumerate(candidates, 1)]
            context = "\n".join([*lines[-4:], f"Now: {question}"])
            try:
                pred = run_program(self.handle, self.programs.select_pattern, backoff=self.backoff, character=self._who,
                                   emotion_state=state.describe(), context=context, patterns=numbered)
                choice = int(pred.choice)
            except (ModelOutputError, TypeError, ValueError) as exc:
                step.degraded = f"output never parsed; the closest pattern by embedding is used ({exc})"
                return candidates[0], "embedding-fallback", ids
            if not 1 <= choice <= len(candidates):
                step.degraded = f"chose {choice}, not among 1..{len(candidates)}; the closest by embedding is used"
                return candidates[0], "embedding-fallback", ids
            return candidates[choice - 1], "selected", ids

    # -- memory fusion -----------------------------------------------------------

    def _fuse(self, run: _TurnLog, question: str, lines: list[str], reasoning: _Reasoning,
              state: AgentState) -> tuple[str, list[str]]:
        pattern = state.pattern
        inputs: dict[str, Any] = {
            "character": self._who, "question": question, "history": lines,
            "scene_memory": reasoning.scene_memory, "facts": _numbered(reasoning.pool),
            "pattern": pattern.description if pattern else "", "pattern_excerpts": list(pattern.excerpts) if pattern else [],
            "emotion_state": state.describe(),
        }
        with run.step("memory_fusion", "fusion", self._model_method) as step:
            # run_program retries unparseable output and then raises ModelOutputError;
            # an empty reply gets one more try, sampled afresh and past the caches
            pred = run_program(self.handle, self.programs.memory_fusion, backoff=self.backoff, **inputs)
            reply = " ".join(str(pred.reply or "").split())
            if not reply:
                step.degraded = "the model wrote an empty reply; asked again"
                pred = run_program(_fresh(self.handle), self.programs.memory_fusion, backoff=self.backoff, **inputs)
                reply = " ".join(str(pred.reply or "").split())
            if not reply:
                raise ModelOutputError(f"The model {self.handle.name} wrote an empty reply as MemoryFusion twice.")
        numbers = {int(x) for x in (pred.used_facts or []) if isinstance(x, int) or str(x).isdigit()}
        used = [str(reasoning.pool[i - 1]["fact_id"]) for i in sorted(numbers) if 1 <= i <= len(reasoning.pool)]
        return reply, used

    # -- the trace -----------------------------------------------------------------

    def _trace(self, run: _TurnLog, as_of: int | None, reasoning: _Reasoning, personality: _Personality,
               used: list[str]) -> Trace:
        state = personality.state
        facts = [RecalledFact(
            fact_id=str(r["fact_id"]), text=str(r.get("text") or ""), visibility=list(r.get("visibility") or []),
            routes=list(r.get("routes") or []), evidence=str(r.get("evidence") or ""),
            route=r.get("route") or _route_of(r, self.character.slug), source_start=r.get("source_start"),
            source_end=r.get("source_end"), known_from=r.get("known_from"), scene_id=r.get("scene_id"),
            score=_score(r), similarity=_similarity(r), probe=r.get("probe"), round=int(r.get("round", 1)),
        ) for r in reasoning.pool]
        return Trace(
            character=self.character.slug, character_name=self.character.name, method=self.method,
            model=self.handle.name, as_of=as_of, anchored=reasoning.anchored, rounds=reasoning.rounds, facts=facts,
            used_facts=used, exit_round=reasoning.exit_round, stop_reason=reasoning.stop_reason,
            gate=personality.gate, gate_reason=personality.gate_reason,
            emotion={"emotion": state.emotion, "intensity": state.intensity, "reason": state.reason,
                     "changed": personality.changed, "source": personality.emotion_source,
                     "method": personality.emotion_method, "record_steps": personality.record_steps},
            pattern=asdict(state.pattern) if state.pattern else None, pattern_source=personality.pattern_source,
            pattern_candidates=personality.candidates,
            steps=sorted(run.steps, key=lambda s: s.started_s), degraded=list(run.degraded),
            dropped_rows=reasoning.dropped, seconds=time.perf_counter() - run.t0, compiled=self.compiled,
        )


# -- helpers -----------------------------------------------------------------------


def _fresh(handle: ModelHandle) -> ModelHandle:
    """The same model, sampled afresh: no persistent or DSPy cache, a small temperature if it had none."""
    lm = handle.lm
    if lm is None:
        return handle
    changes: dict[str, Any] = {"cache": False}
    if not lm.kwargs.get("temperature"):
        changes["temperature"] = 0.7
    return replace(handle, lm=lm.copy(**changes), cache=False)


def _admissible(row: Mapping[str, Any], slug: str, as_of: int | None) -> bool:
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


def _own_scene(row: Mapping[str, Any], slug: str, as_of: int | None) -> bool:
    """The reader's contract for episodes, checked again: the character's own, over by `as_of`."""
    if row.get("character") not in (None, slug):
        return False
    end = row.get("scene_end", row.get("source_end"))
    return as_of is None or end is None or int(end) <= as_of


def _route_of(row: Mapping[str, Any], slug: str) -> str | None:
    visibility = list(row.get("visibility") or [])
    routes = list(row.get("routes") or [])
    if slug in visibility and visibility.index(slug) < len(routes):
        return str(routes[visibility.index(slug)])
    return None


def _state_from_record(record: Sequence[Mapping[str, Any]]) -> AgentState:
    if not record:
        return AgentState()
    last = record[-1]
    emotion = str(last.get("to_emotion") or "neutral")
    return AgentState(emotion if emotion in EMOTIONS else "neutral", _intensity(last.get("to_intensity")),
                      _clip(str(last.get("trigger") or ""), 12))


def _numbered_record(record: Sequence[Mapping[str, Any]]) -> list[tuple[int, Mapping[str, Any]]]:
    """The record's rows with their step numbers (the `step` column, else the 1-based position)."""
    return [(int(row.get("step") or i), row) for i, row in enumerate(record, 1)]


def _recent_triggers(record: Sequence[Mapping[str, Any]]) -> list[tuple[int, Mapping[str, Any]]]:
    """The last TRANSITION_LINES rows that left the character in a non-neutral emotion, with a trigger."""
    stirring = [(step, row) for step, row in _numbered_record(record)
                if row.get("to_emotion") not in (None, "neutral") and str(row.get("trigger") or "").strip()]
    return stirring[-TRANSITION_LINES:]


@lru_cache(maxsize=4096)
def _trigger_emotion(trigger: str) -> str:
    """The lexicon annotator's emotion of a recorded trigger."""
    return read_utterance(trigger).emotion if trigger.strip() else "neutral"


def _steps_text(steps: Sequence[int]) -> str:
    return ("step " if len(steps) == 1 else "steps ") + ", ".join(str(s) for s in steps)


def _transition_line(row: Mapping[str, Any]) -> str:
    before = row.get("from_emotion") or "(start)"
    line = f"{before} -> {row.get('to_emotion')} ({row.get('to_intensity')}/5)"
    trigger = _clip(str(row.get("trigger") or ""), 15)
    return f"{line}: {trigger}" if trigger else line


def _numbered(rows: Any) -> list[str]:
    out = []
    for i, row in enumerate(rows, 1):
        text = str(row.get("text") or "")
        evidence = _clip(str(row.get("evidence") or ""), EVIDENCE_WORDS)
        quoted = f' ("{evidence}")' if evidence and evidence.strip().casefold() != text.strip().casefold() else ""
        out.append(f"[{i}] {text}{quoted}")
    return out


def _history_line(item: str | tuple[str, str]) -> str:
    if isinstance(item, str):
        return " ".join(item.split())
    speaker, text = item
    return f"{speaker}: {' '.join(str(text).split())}"


def _score(row: Mapping[str, Any]) -> float | None:
    value = row.get("score")
    return None if value is None else float(value)


def _similarity(row: Mapping[str, Any]) -> float | None:
    value = row.get("similarity", row.get("score"))
    return None if value is None else float(value)


def _intensity(value: Any) -> int:
    try:
        return min(5, max(1, int(value)))
    except (TypeError, ValueError):
        return 1


def _clean(value: Any) -> str:
    return " ".join(str(value or "").split()).strip(" \"'")


_FUNCTION_WORDS = frozenset({
    "what", "when", "where", "which", "while", "whom", "whose", "with", "without", "that", "this", "these",
    "those", "there", "their", "them", "they", "then", "than", "have", "has", "had", "been", "being", "were",
    "your", "yours", "about", "tell", "know", "knew", "from", "into", "onto", "upon", "over", "under", "after",
    "before", "does", "did", "done", "doing", "could", "would", "should", "shall", "will", "just", "only",
    "also", "very", "much", "many", "some", "such", "every", "list", "rules", "ignore", "remember", "recall"
})


def _content_words(text: str) -> set[str]:
    """Words of four letters or more that carry meaning (an embedder-independent check of the extractive path)."""
    return {w for w in re.findall(r"[a-z0-9']+", text.casefold()) if len(w) >= 4 and w not in _FUNCTION_WORDS}


_COMMON_WORDS = frozenset({
    "said", "says", "like", "come", "came", "went", "here", "well", "good", "back", "still", "again", "away",
    "even", "ever", "once", "more", "most", "other", "something", "anything", "nothing", "someone", "anyone",
    "thing", "things", "time", "night", "morning", "evening", "today", "yesterday", "last", "first", "make", "made",
    "take", "took", "give", "gave", "want", "think", "thought", "look", "looked", "told", "asked", "yours",
    "left", "kept", "keep", "going", "know", "heard", "seen",
})


def _mention_keys(text: str) -> set[str]:
    """The words a turn or a trigger names things by: four letters or more, possessives and plurals
    folded ("guild's" -> guild, "lamps" -> lamp), function and everyday words left out."""
    keys = set()
    for word in re.findall(r"[a-z0-9'’]+", text.casefold()):
        word = word.replace("’", "'").strip("'").removesuffix("'s")
        if len(word) >= 5 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
            word = word[:-1]
        if len(word) >= 4 and word not in _FUNCTION_WORDS and word not in _COMMON_WORDS:
            keys.add(word)
    return keys


def _probe_key(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.casefold()))


def _clip(text: str, words: int) -> str:
    parts = text.split()
    return " ".join(parts) if len(parts) <= words else " ".join(parts[:words]) + " ..."
