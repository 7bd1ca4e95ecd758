"""The record of a played story: each move with its actor, audience and the facts behind it.

A move is `[thought] (action) speech`. Its `audience` is every character at the same
location when it happened (the actor excluded): they perceive the action and the speech,
never the thought. `facts` are the fact ids the actor's agent said it used, `pool` every
fact id its bounded retrieval recalled for the move (empty for profile-driven methods).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

_THOUGHT = re.compile(r"\[([^\]]*)\]|【([^】]*)】")
_ACTION = re.compile(r"\(([^)]*)\)|（([^）]*)）")
MAX_WORDS = 60  # a move longer than this is cut (the form asks for about 40)


@dataclass
class Move:
    index: int
    round: int  # 0-based round (= stage index in with-script mode)
    actor: str
    kind: str  # "move" (a character's turn), "movement" (going elsewhere) or "narration"
    location: str
    audience: list[str]
    thought: str = ""
    action: str = ""
    speech: str = ""
    goal: str = ""  # the director's goal for the actor in this round
    facts: list[str] = field(default_factory=list)
    pool: list[str] = field(default_factory=list)

    def visible_text(self) -> str:
        """What the audience perceives: the action and the speech, never the thought."""
        parts = [f"({self.action})" if self.action else "", self.speech]
        return " ".join(p for p in parts if p).strip()

    def full_text(self) -> str:
        parts = [f"[{self.thought}]" if self.thought else "", self.visible_text()]
        return " ".join(p for p in parts if p).strip()

    def line(self, with_thought: bool = True) -> str:
        return f"{self.actor} {self.full_text() if with_thought else self.visible_text()}".strip()


@dataclass
class Story:
    script_id: str
    method: str
    model: str
    text: str  # the narrated story
    log: list[Move] = field(default_factory=list)
    steps: dict[str, str] = field(default_factory=dict)  # step -> how it was decided (model:<name> or a fallback)
    calls: int = 0
    seconds: float = 0.0
    error: str = ""

    def rounds_played(self) -> set[int]:
        return {m.round for m in self.log if m.kind == "move"}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Story:
        log = [Move(**m) for m in data.get("log") or []]
        return cls(**{**data, "log": log})

    def render_log(self) -> str:
        lines = []
        for m in self.log:
            heard = ", ".join(m.audience) or "nobody"
            used = f"  facts: {', '.join(m.facts)}" if m.facts else ""
            lines.append(f"[round {m.round + 1}] {m.kind} @ {m.location} -> {heard}: {m.line()}{used}")
        return "\n".join(lines)


def parse_move(text: str) -> tuple[str, str, str]:
    """(thought, action, speech) of a move written `[thought] (action) speech` (any part may be absent)."""
    text = " ".join(str(text or "").split())
    words = text.split()
    if len(words) > MAX_WORDS:
        text = " ".join(words[:MAX_WORDS])
    thoughts = [a or b for a, b in _THOUGHT.findall(text)]
    rest = _THOUGHT.sub(" ", text)
    actions = [a or b for a, b in _ACTION.findall(rest)]
    speech = " ".join(_ACTION.sub(" ", rest).split()).strip(" \"'")
    return " ".join(t.strip() for t in thoughts).strip(), " ".join(a.strip() for a in actions).strip(), speech
