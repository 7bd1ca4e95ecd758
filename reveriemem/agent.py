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
- the personality track, in a worker thread: **Emo-Gate** asks whether the
  turn stirs the character; only then does **Emo-Transition** propose a new
  emotional state from the character's emotion-transition record and
  **Pattern** chooses among the behavioural patterns retrieved for that state
  and the conversation. A turn that does not fire the gate keeps the
  previous state and pattern (emotional inertia).

**Memory-Fusion** then writes the reply from the scene notes, the pool and
the pattern. Facts reach it only through `reader.vis_retrieve`, whose
visibility (and `as_of`) filter runs inside LanceDB; every row is checked
again here, and a row that should not have come back is dropped and counted.

Round n is the n-th Self-Probe call followed by the retrieval of its probe.
Round 1 has no pool to judge, so its `sufficient` is ignored; a Sufficient
verdict at round n >= 2 ends the loop before that round's probe is issued
(the pool is then the one of n - 1 retrievals, the paper's exit round). A
proposed probe that repeats an earlier one (compared case- and
punctuation-insensitively) is replaced by the round's refined question, and
if that repeats too the loop stops.

Every step degrades rather than fails when the model's output never parses
(after `run_program`'s retries): Self-Probe falls back to the question,
Emo-Gate counts as not firing, Emo-Transition keeps the previous emotion,
Pattern takes the candidate closest by embedding; the trace lists each
fallback in `degraded`. Memory-Fusion is the exception: it raises
`ModelOutputError`. The trace also carries each step's calls, tokens and
latency, taken from the handle's usage recorder.

Without a model (`handle.lm is None`) the agent answers extractively: the
best retrieved fact's evidence framed in the first person, or an in-character
refusal when no fact is at least `min_score` similar to the question (cosine)
and shares a content word with it.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

from dspy_programs.inference import (
    emo_gate_program,
    emo_transition_program,
    memory_fusion_program,
    select_pattern_program,
    self_probe_program,
)
from dspy_programs.personality import EMOTIONS
from reveriemem.characters import Character
from reveriemem.errors import ModelOutputError, StorageError
from reveriemem.models import ModelCall, ModelHandle, run_program
from reveriemem.models.usage import add_listener

log = logging.getLogger(__name__)

AGENT_VERSION = "agent-v1"
EXTRACTIVE_METHOD = f"heuristic:extractive-{AGENT_VERSION}"
ANCHOR_K = 3  # scenes recalled as the frame
PATTERN_K = 3  # candidate patterns offered to the Pattern step
HISTORY_LINES = 8  # conversation lines shown to the model
TRANSITION_LINES = 8  # emotion-transition records shown to Emo-Transition
SCENE_WORDS = 150  # a scene note in a prompt
EVIDENCE_WORDS = 40  # a fact's quotation in a prompt
MIN_SCORE = 0.3  # extractive path: the least cosine similarity of a fact worth quoting
REFUSAL = "I can't tell you that; it is nothing I saw or heard for myself."


class Reader(Protocol):
    """What the agent needs of `reveriemem.retrieval.MemoryReader` (one book, one character)."""

    def anchor(self, query: str, k: int = 3, as_of: int | None = None) -> list[dict[str, Any]]: ...

    def vis_retrieve(self, probes: list[str], k: int = 8, as_of: int | None = None,
                     exclude: Iterable[str] = ...) -> list[dict[str, Any]]: ...

    def patterns(self, query: str, k: int = 3) -> list[dict[str, Any]]: ...

    def emotion_record(self, as_of: int | None = None) -> list[dict[str, Any]]: ...


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
    method: str  # model:<name> or heuristic:extractive-agent-v1
    model: str
    as_of: int | None
    anchored: list[AnchoredScene]
    rounds: list[ProbeRound]
    facts: list[RecalledFact]  # the terminal pool, in the order shown to Memory-Fusion
    used_facts: list[str]
    exit_round: int
    stop_reason: str  # sufficient | max_rounds | no_new_probe | extractive | refusal
    gate: bool | None  # None: not asked (no model) or its output never parsed
    emotion: dict[str, Any]
    pattern: dict[str, Any] | None
    pattern_source: str  # selected | only-candidate | inertia | embedding | embedding-fallback | none
    pattern_candidates: list[int]
    steps: list[StepUsage]
    degraded: list[str]
    dropped_rows: int  # rows the reader returned that the character may not know (should stay 0)
    seconds: float = 0.0

    @property
    def calls(self) -> int:
        return sum(s.calls for s in self.steps)

    @property
    def tokens(self) -> int:
        return sum(s.prompt_tokens + s.completion_tokens for s in self.steps)

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
        return {**asdict(self), "totals": self.totals()}


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
    def step(self, name: str, track: str) -> Iterator[StepUsage]:
        usage = StepUsage(step=name, track=track, started_s=round(time.perf_counter() - self.t0, 4))
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
    changed: bool
    emotion_source: str
    pattern_source: str
    candidates: list[int]


# -- the agent -----------------------------------------------------------------


class ReverieAgent:
    """A character of a book answering from its own memory, as bounded by `reader`.

    `reader` is a `reveriemem.retrieval.MemoryReader` for the same book and
    character. `respond` with `state=None` continues from the agent's own
    previous turn (or, on the first turn, from the character's latest
    recorded emotion up to `as_of`).
    """

    def __init__(self, reader: Reader, handle: ModelHandle, character: Character, max_rounds: int = 3,
                 k: int = 8, *, anchor_k: int = ANCHOR_K, pattern_k: int = PATTERN_K,
                 min_score: float = MIN_SCORE, backoff: float = 0.5) -> None:
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
        self.state: AgentState | None = None
        self._reader_lock = threading.Lock()  # the two tracks share the reader
        _ensure_listener()

    @property
    def method(self) -> str:
        return EXTRACTIVE_METHOD if self.handle.lm is None else f"model:{self.handle.name}"

    @property
    def _who(self) -> str:
        others = [a for a in self.character.aliases if a != self.character.name]
        return self.character.name + (f" (also called {', '.join(others)})" if others else "")

    def respond(self, question: str, history: Sequence[str | tuple[str, str]] = (),
                state: AgentState | None = None, as_of: int | None = None) -> Turn:
        """Answer `question` as the character; `history` is the conversation so far,
        as lines or (speaker, text) pairs; `as_of` bounds memory to a point of the story."""
        question = " ".join(question.split())
        if not question:
            raise ValueError("The question is empty: ask the character something.")
        lines = [_history_line(item) for item in history][-HISTORY_LINES:]
        start = state if state is not None else self.state
        run = _TurnLog()
        if self.handle.lm is None:
            reasoning = self._extractive_chain(run, question, as_of)
            personality = self._personality_track(run, question, lines, start, as_of)
            reply, used, stop = self._extract(question, reasoning.pool)
            reasoning.stop_reason = stop
        else:
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="reverie-personality") as pool:
                track = pool.submit(self._personality_track, run, question, lines, start, as_of)
                reasoning = self._reasoning_chain(run, question, as_of)
                personality = track.result()
            reply, used = self._fuse(run, question, lines, reasoning, personality.state)
        self.state = personality.state
        trace = self._trace(run, as_of, reasoning, personality, used)
        return Turn(question=question, reply=reply, state=personality.state, trace=trace)

    # -- reasoning chain ---------------------------------------------------------

    def _anchor(self, run: _TurnLog, question: str, as_of: int | None) -> tuple[list[AnchoredScene], list[str]]:
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
            with run.step(f"self_probe:{n}", "reasoning") as step:
                try:
                    pred = run_program(self.handle, self_probe_program(), backoff=self.backoff,
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

    def _extractive_chain(self, run: _TurnLog, question: str, as_of: int | None) -> _Reasoning:
        anchored, scene_memory = self._anchor(run, question, as_of)
        pool: dict[str, dict[str, Any]] = {}
        new, dropped = self._retrieve(run, 1, question, as_of, pool)
        record = ProbeRound(round=1, refined_question=question, proposed="", probe=question, sufficient=None,
                            new_facts=new, note="no model: the question itself is the probe")
        return _Reasoning(anchored, scene_memory, [record], list(pool.values()), 1, "extractive", dropped)

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
        emotion_source = "inertia"
        if state is None:
            with run.step("emotion_record", "personality") as step:
                record = self._personality_rows(step, self.reader.emotion_record, as_of=as_of)
            state = _state_from_record(record)
            emotion_source = "record" if record else "default"
        if self.handle.lm is None:
            pattern, source, candidates = self._offline_pattern(run, state, question, lines)
            return _Personality(AgentState(state.emotion, state.intensity, state.reason, pattern), None, False,
                                emotion_source, source, candidates)
        gate: bool | None = None
        with run.step("emo_gate", "personality") as step:
            try:
                pred = run_program(self.handle, emo_gate_program(), backoff=self.backoff, character=self._who,
                                   emotion_state=state.describe(), history=lines, turn=question)
                gate = bool(pred.fires)
            except ModelOutputError as exc:
                step.degraded = f"output never parsed; treated as not firing, the state is kept ({exc})"
        new = state
        if gate:
            with run.step("emo_transition", "personality") as step:
                record = self._personality_rows(step, self.reader.emotion_record, as_of=as_of)
                transitions = [_transition_line(r) for r in record[-TRANSITION_LINES:]]
                try:
                    pred = run_program(self.handle, emo_transition_program(), backoff=self.backoff,
                                       character=self._who, emotion_state=state.describe(),
                                       transitions=transitions, turn=question)
                    emotion = str(pred.emotion) if str(pred.emotion) in EMOTIONS else state.emotion
                    new = AgentState(emotion, _intensity(pred.intensity), _clean(pred.reason), state.pattern)
                    emotion_source = "transition"
                except ModelOutputError as exc:
                    step.degraded = f"output never parsed; the previous emotion is kept ({exc})"
                    emotion_source = "kept"
        if not gate and state.pattern is not None:
            pattern, source, candidates = state.pattern, "inertia", []
        else:
            pattern, source, candidates = self._select_pattern(run, new, question, lines)
        changed = (new.emotion, new.intensity) != (state.emotion, state.intensity)
        return _Personality(AgentState(new.emotion, new.intensity, new.reason, pattern), gate, changed,
                            emotion_source, source, candidates)

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

    def _offline_pattern(self, run: _TurnLog, state: AgentState, question: str,
                         lines: list[str]) -> tuple[PatternChoice | None, str, list[int]]:
        if state.pattern is not None:
            return state.pattern, "inertia", []
        with run.step("pattern", "personality") as step:
            candidates = self._candidates(step, state, question, lines)
        ids = [c.pattern_id for c in candidates]
        return (candidates[0], "embedding", ids) if candidates else (None, "none", ids)

    def _select_pattern(self, run: _TurnLog, state: AgentState, question: str,
                        lines: list[str]) -> tuple[PatternChoice | None, str, list[int]]:
        with run.step("pattern", "personality") as step:
            candidates = self._candidates(step, state, question, lines)
            ids = [c.pattern_id for c in candidates]
            if not candidates:
                return None, "none", ids
            if len(candidates) == 1:
                return candidates[0], "only-candidate", ids
            numbered = [f"[{i}] {c.description}" for i, c in enumerate(candidates, 1)]
            context = "\n".join([*lines[-4:], f"Now: {question}"])
            try:
                pred = run_program(self.handle, select_pattern_program(), backoff=self.backoff, character=self._who,
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
        with run.step("memory_fusion", "fusion") as step:
            # run_program retries unparseable output and then raises ModelOutputError;
            # an empty reply gets one more try, sampled afresh and past the caches
            pred = run_program(self.handle, memory_fusion_program(), backoff=self.backoff, **inputs)
            reply = " ".join(str(pred.reply or "").split())
            if not reply:
                step.degraded = "the model wrote an empty reply; asked again"
                pred = run_program(_fresh(self.handle), memory_fusion_program(), backoff=self.backoff, **inputs)
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
            gate=personality.gate,
            emotion={"emotion": state.emotion, "intensity": state.intensity, "reason": state.reason,
                     "changed": personality.changed, "source": personality.emotion_source},
            pattern=asdict(state.pattern) if state.pattern else None, pattern_source=personality.pattern_source,
            pattern_candidates=personality.candidates,
            steps=sorted(run.steps, key=lambda s: s.started_s), degraded=list(run.degraded),
            dropped_rows=reasoning.dropped, seconds=time.perf_counter() - run.t0,
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


def _probe_key(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.casefold()))


def _clip(text: str, words: int) -> str:
    parts = text.split()
    return " ".join(parts) if len(parts) <= words else " ".join(parts[:words]) + " ..."
