"""The emotion track: the state the personality track carries from turn to turn, and its
deterministic Emo-Gate and Emo-Transition.

`AgentState` is the character's emotional state and the behavioural pattern in force; a turn
that does not fire the gate keeps both (emotional inertia). Without a model call (the default),
`emotion_gate` fires when the lexicon annotator of `reveriemem.source_to_memory.emotions` reads a
non-neutral emotion of intensity >= `GATE_INTENSITY` in the turn, or when the turn names
something in the triggers of the character's recent emotional transitions; `emotion_transition`
takes the state the record most often moves to from the current one under triggers like the
turn's, else the turn's own emotion, and its reason names the record steps used. Both are pure
functions of the turn, the state and the character's emotion-transition record.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from dspy_programs.personality import EMOTIONS
from reveriemem.inference.turn_text import clip, mention_keys
from reveriemem.source_to_memory.emotions import read_utterance

TRANSITION_LINES = 8  # emotion-transition records shown to Emo-Transition; recent triggers the gate looks for
GATE_INTENSITY = 2  # the least lexicon intensity of a non-neutral emotion that fires the gate
GATE_METHOD = "heuristic:emo-gate-v1"
TRANSITION_METHOD = "heuristic:emo-transition-v1"


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
    words = mention_keys(turn) - {w for name in own_words for w in mention_keys(name)}
    named: dict[int, tuple[str, ...]] = {}
    for step, row in _recent_triggers(record):
        shared = words & mention_keys(str(row.get("trigger") or ""))
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
        intensity = clamp_intensity(round(sum(clamp_intensity(row.get("to_intensity")) for _, row in used) / len(used)))
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
        return Proposal(str(row["to_emotion"]), clamp_intensity(row.get("to_intensity")),
                        f"{cause}; as at record step {step}: {before} -> {row['to_emotion']}", (step,), "named")
    return Proposal(state.emotion, state.intensity, state.reason, (), "kept")


def state_from_record(record: Sequence[Mapping[str, Any]]) -> AgentState:
    if not record:
        return AgentState()
    last = record[-1]
    emotion = str(last.get("to_emotion") or "neutral")
    return AgentState(emotion if emotion in EMOTIONS else "neutral", clamp_intensity(last.get("to_intensity")),
                      clip(str(last.get("trigger") or ""), 12))


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


def transition_line(row: Mapping[str, Any]) -> str:
    before = row.get("from_emotion") or "(start)"
    line = f"{before} -> {row.get('to_emotion')} ({row.get('to_intensity')}/5)"
    trigger = clip(str(row.get("trigger") or ""), 15)
    return f"{line}: {trigger}" if trigger else line


def clamp_intensity(value: Any) -> int:
    try:
        return min(5, max(1, int(value)))
    except (TypeError, ValueError):
        return 1
