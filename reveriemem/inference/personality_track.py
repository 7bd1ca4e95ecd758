"""The personality track: Emo-Gate, Emo-Transition and Pattern for one turn.

**Emo-Gate** decides whether the turn stirs the character; only then does **Emo-Transition**
propose a new emotional state from the character's emotion-transition record and **Pattern**
choose among the behavioural patterns retrieved for that state and the conversation. A turn that
does not fire the gate keeps the previous state and pattern (emotional inertia). By default
Emo-Gate and Emo-Transition are the deterministic ones of `reveriemem.inference.emotion_track`;
`emotion_model=True` asks the model instead (the `EmoGate` and `EmoTransition` signatures).
A first turn holds no pattern yet: it takes, without a model call, the pattern of the Personality
layer closest by embedding to the recorded state, the conversation and the turn (`initial`). Pattern
asks the model only when the gate fires (and not when a single candidate is retrieved); without a
model it takes the candidate closest by embedding. Emo-Gate and Emo-Transition are handed in as
callables (`gate`, `transition`; default: the deterministic ones).

Every step degrades rather than fails: a model Emo-Gate whose output never parses counts as not
firing, a model Emo-Transition keeps the previous emotion, Pattern takes the candidate closest by
embedding, and a personality layer that was not built degrades the step instead of failing the
turn. The agent runs this track in a worker thread beside the reasoning chain.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dspy_programs.inference import emo_gate_program, emo_transition_program
from dspy_programs.personality import EMOTIONS
from reveriemem.core.characters import Character
from reveriemem.core.errors import ModelOutputError, StorageError
from reveriemem.inference.emotion_track import (
    GATE_METHOD,
    TRANSITION_LINES,
    TRANSITION_METHOD,
    AgentState,
    GateVerdict,
    PatternChoice,
    clamp_intensity,
    emotion_gate,
    emotion_transition,
    state_from_record,
    transition_line,
)
from reveriemem.inference.memory_reader import Reader, score_of
from reveriemem.inference.trace import StepUsage, TurnLog
from reveriemem.inference.turn_text import clean
from reveriemem.models import ModelHandle, run_or_fallback, run_program

PATTERN_METHOD = "heuristic:pattern-v1"  # no model call: a single candidate, none, or the closest by embedding


@dataclass
class Personality:
    """What the personality track hands to Memory-Fusion and the trace."""

    state: AgentState
    gate: bool | None
    gate_reason: str
    changed: bool
    emotion_source: str
    emotion_method: str  # what decided the emotion: heuristic:emo-transition-v1, model:<name> or "" (unchanged)
    record_steps: list[int]  # the emotion-record steps a deterministic transition drew on
    pattern_source: str
    candidates: list[int]


@dataclass
class PersonalityTrack:
    """One character's personality track over `reader`, as the agent configures it for a turn."""

    reader: Reader
    reader_lock: threading.Lock  # the two tracks share the reader
    character: Character
    who: str  # the character as named in prompts
    handle: ModelHandle
    select_pattern: Any  # the Pattern predictor
    layers: frozenset[str]
    pattern_k: int
    backoff: float
    emotion_model: bool
    gate: Callable[..., GateVerdict] = emotion_gate  # the deterministic Emo-Gate
    transition: Callable[..., Any] = emotion_transition  # the deterministic Emo-Transition

    @property
    def model_method(self) -> str:
        return f"model:{self.handle.name}"

    def decide(self, run: TurnLog, question: str, lines: list[str], state: AgentState | None,
               as_of: int | None) -> Personality:
        """The turn's emotional state and pattern, from `state` (None: the record's latest, up to `as_of`)."""
        if "personality" not in self.layers:
            kept = state or AgentState("neutral", 0, "", None)
            return Personality(AgentState(kept.emotion, kept.intensity, kept.reason, None), None,
                               "no Personality layer", False, "inertia", "", [], "none", [])
        if self.emotion_model and self.handle.lm is not None:
            return self._with_model_emotion(run, question, lines, state, as_of)
        with run.step("emotion_record", "personality") as step:
            record = self._rows(step, self.reader.emotion_record, as_of=as_of)
        emotion_source = "inertia"
        if state is None:
            state = state_from_record(record)
            emotion_source = "record" if record else "default"
        with run.step("emo_gate", "personality", GATE_METHOD):
            gate = self.gate(question, record, [self.character.name, *self.character.aliases])
        new, method, steps = state, "", []
        if gate.fires:
            with run.step("emo_transition", "personality", TRANSITION_METHOD):
                proposal = self.transition(state, gate, record)
            new = AgentState(proposal.emotion, proposal.intensity, proposal.reason, state.pattern)
            emotion_source, method, steps = "transition", TRANSITION_METHOD, list(proposal.steps)
        pattern, source, candidates = self._pattern(run, gate.fires, state, new, question, lines, as_of)
        changed = (new.emotion, new.intensity) != (state.emotion, state.intensity)
        return Personality(AgentState(new.emotion, new.intensity, new.reason, pattern), gate.fires, gate.reason,
                           changed, emotion_source, method, steps, source, candidates)

    def _with_model_emotion(self, run: TurnLog, question: str, lines: list[str], state: AgentState | None,
                            as_of: int | None) -> Personality:
        """The personality track with Emo-Gate and Emo-Transition asked of the model (emotion_model=True)."""
        emotion_source, method = "inertia", ""
        if state is None:
            with run.step("emotion_record", "personality") as step:
                record = self._rows(step, self.reader.emotion_record, as_of=as_of)
            state = state_from_record(record)
            emotion_source = "record" if record else "default"
        with run.step("emo_gate", "personality", self.model_method) as step:
            gated = run_or_fallback(self.handle, lambda handle: self._model_gate(handle, state, lines, question),
                                    lambda: (None, "the model's output never parsed; treated as not firing"),
                                    fallback_method="inertia")
            if gated.error is not None:
                step.degraded = f"output never parsed; treated as not firing, the state is kept ({gated.error})"
        gate, gate_reason = gated.value
        new = state
        if gate:
            with run.step("emo_transition", "personality", self.model_method) as step:
                record = self._rows(step, self.reader.emotion_record, as_of=as_of)
                transitions = [transition_line(r) for r in record[-TRANSITION_LINES:]]
                moved = run_or_fallback(
                    self.handle, lambda handle: self._model_transition(handle, state, transitions, question),
                    lambda: state, fallback_method="kept")
                new = moved.value
                if moved.error is None:
                    emotion_source, method = "transition", self.model_method
                else:
                    step.degraded = f"output never parsed; the previous emotion is kept ({moved.error})"
                    emotion_source = "kept"
        pattern, source, candidates = self._pattern(run, bool(gate), state, new, question, lines, as_of)
        changed = (new.emotion, new.intensity) != (state.emotion, state.intensity)
        return Personality(AgentState(new.emotion, new.intensity, new.reason, pattern), gate, gate_reason, changed,
                           emotion_source, method, [], source, candidates)

    def _pattern(self, run: TurnLog, fired: bool, state: AgentState, new: AgentState, question: str,
                 lines: list[str], as_of: int | None = None) -> tuple[PatternChoice | None, str, list[int]]:
        """The turn's pattern: asked of the model only when the gate fired; else the held one (inertia),
        or on a first turn the closest by embedding (no call)."""
        if fired and self.handle.lm is not None:
            return self._select_pattern(run, new, question, lines, as_of)
        if not fired and state.pattern is not None:
            return state.pattern, "inertia", []
        pattern, source, candidates = self._closest_pattern(run, new, question, lines, as_of)
        return pattern, ("initial" if source == "embedding" and not fired else source), candidates

    def _model_gate(self, handle: ModelHandle, state: AgentState, lines: list[str],
                    question: str) -> tuple[bool | None, str]:
        """Emo-Gate asked of the model: whether the turn stirs the character, and the reason given."""
        pred = run_program(handle, emo_gate_program(), backoff=self.backoff, character=self.who,
                           emotion_state=state.describe(), history=lines, turn=question)
        fires = bool(pred.fires)
        return fires, f"the model says the turn {'stirs' if fires else 'does not stir'} the character"

    def _model_transition(self, handle: ModelHandle, state: AgentState, transitions: list[str],
                          question: str) -> AgentState:
        """Emo-Transition asked of the model: the new state (an emotion outside the label set keeps the old one)."""
        pred = run_program(handle, emo_transition_program(), backoff=self.backoff, character=self.who,
                           emotion_state=state.describe(), transitions=transitions, turn=question)
        emotion = str(pred.emotion) if str(pred.emotion) in EMOTIONS else state.emotion
        return AgentState(emotion, clamp_intensity(pred.intensity), clean(pred.reason), state.pattern)

    def _rows(self, step: StepUsage, read: Any, **kwargs: Any) -> list[dict[str, Any]]:
        """A personality-layer read; a layer that was not built degrades the step instead of failing the turn."""
        try:
            with self.reader_lock:
                return list(read(**kwargs))
        except StorageError as exc:
            step.degraded = f"the personality layer could not be read ({exc})"
            return []

    def _candidates(self, step: StepUsage, state: AgentState, question: str, lines: list[str],
                    as_of: int | None = None) -> list[PatternChoice]:
        """The nearest patterns; with `as_of`, only those seen by then, with their excerpts from before it."""
        query = " ".join([state.emotion, state.reason, *lines[-2:], question])
        rows = self._rows(step, self.reader.patterns, query=query, k=self.pattern_k, as_of=as_of)
        return [PatternChoice(int(r["pattern_id"]), str(r.get("description") or ""),
                              tuple(str(x) for x in (r.get("excerpts") or ())), r.get("dominant_emotion"),
                              score_of(r)) for r in rows]

    def _closest_pattern(self, run: TurnLog, state: AgentState, question: str,
                         lines: list[str], as_of: int | None = None) -> tuple[PatternChoice | None, str, list[int]]:
        """Without a model: the candidate closest by embedding."""
        with run.step("pattern", "personality", PATTERN_METHOD) as step:
            candidates = self._candidates(step, state, question, lines, as_of)
        ids = [c.pattern_id for c in candidates]
        return (candidates[0], "embedding", ids) if candidates else (None, "none", ids)

    def _select_pattern(self, run: TurnLog, state: AgentState, question: str,
                        lines: list[str], as_of: int | None = None) -> tuple[PatternChoice | None, str, list[int]]:
        with run.step("pattern", "personality", PATTERN_METHOD) as step:
            candidates = self._candidates(step, state, question, lines, as_of)
            ids = [c.pattern_id for c in candidates]
            if not candidates:
                return None, "none", ids
            if len(candidates) == 1:
                return candidates[0], "only-candidate", ids
            step.method = self.model_method
            numbered = [f"[{i}] {c.description}" for i, c in enumerate(candidates, 1)]
            context = "\n".join([*lines[-4:], f"Now: {question}"])
            try:
                pred = run_program(self.handle, self.select_pattern, backoff=self.backoff, character=self.who,
                                   emotion_state=state.describe(), context=context, patterns=numbered)
                choice = int(pred.choice)
            except (ModelOutputError, TypeError, ValueError) as exc:
                step.degraded = f"output never parsed; the closest pattern by embedding is used ({exc})"
                return candidates[0], "embedding-fallback", ids
            if not 1 <= choice <= len(candidates):
                step.degraded = f"chose {choice}, not among 1..{len(candidates)}; the closest by embedding is used"
                return candidates[0], "embedding-fallback", ids
            return candidates[choice - 1], "selected", ids
