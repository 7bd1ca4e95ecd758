"""Playing a script: the director, rounds and stages, characters' moves, movement, the narrator.

Each round plays one stage (with a script) or the opening event and then free play
(without one). At a round's start the stage's cast moves to the stage's location (a
logged `movement` seen by those at both places); the director turns the stage into one
goal per character, without later stages; then each character of the stage takes
`script.turns` moves in turn, through an `Actor`. Every move is logged with the
characters present to perceive it. What a character may recall of the simulation is
decided here, by `Memories`: the actor's own moves with its thoughts, and the visible
part of the moves it was present for; nothing else. A method that shares one history
with everyone (`shared=True`, BookWorld's way) is marked as such. The narrator turns the
log into prose. Without a model the director gives everyone the stage as goal and the
narrator writes the log out plainly (both labelled as fallbacks in `Story.steps`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from dspy_programs.narrative import direct_stage_program, narrate_program
from reveriemem.models import ModelHandle, run_or_fallback, run_program
from reveriemem.narrative.log import Move, Story
from reveriemem.narrative.scripts import Script

HISTORY_LINES = 12  # lines of a character's memory of the simulation shown per move


@dataclass
class ActorMove:
    thought: str
    action: str
    speech: str
    facts: list[str] = field(default_factory=list)
    pool: list[str] = field(default_factory=list)
    calls: int = 0


class Actor(Protocol):
    """How a method plays one character's move."""

    def act(self, character: str, goal: str, location: str, company: list[str],
            history: list[tuple[str, str]]) -> ActorMove: ...


class Memories:
    """Each character's memory of the simulation: its own moves (with its thoughts) and what it perceived."""

    def __init__(self, cast: list[str], shared: bool = False) -> None:
        self.shared = shared
        self._lines: dict[str, list[tuple[str, str]]] = {c: [] for c in cast}
        self._all: list[tuple[str, str]] = []

    def record(self, move: Move) -> None:
        self._all.append((move.actor, move.full_text() or move.kind))
        if move.actor in self._lines:
            self._lines[move.actor].append((move.actor, move.full_text() or f"({move.kind} to {move.location})"))
        for other in move.audience:
            if other in self._lines and other != move.actor:
                self._lines[other].append((move.actor, move.visible_text() or f"(goes to {move.location})"))

    def of(self, character: str) -> list[tuple[str, str]]:
        lines = self._all if self.shared else self._lines.get(character, [])
        return lines[-HISTORY_LINES:]


def parse_goals(lines: list[str], cast: list[str], stage: str) -> dict[str, str]:
    """'Name: goal' lines to a goal per cast member (a first name or surname is enough); the stage for the rest."""
    goals: dict[str, str] = {}
    for line in lines or []:
        name, sep, goal = str(line).partition(":")
        if not sep or not goal.strip():
            continue
        key = " ".join(name.split()).strip("*- ").lower()
        for member in cast:
            words = member.lower().split()
            if key == member.lower() or key in words:
                goals.setdefault(member, goal.strip())
    return {member: goals.get(member, stage) for member in cast}


def direct(handle: ModelHandle, script: Script, stage: str, cast: list[str], where: dict[str, str],
           events: list[str]) -> tuple[dict[str, str], str]:
    """The director's goal per character for one stage, and how it was decided."""
    def step(h: ModelHandle) -> dict[str, str]:
        pred = run_program(h, direct_stage_program(), world=script.world or script.title, stage=stage,
                           cast=[f"{c} (at {script.location_name(where.get(c))})" for c in cast],
                           events=events[-HISTORY_LINES:])
        return parse_goals(list(pred.goals or []), cast, stage)

    outcome = run_or_fallback(handle, step, lambda: {c: stage for c in cast}, fallback_method="heuristic:stage-as-goal")
    return outcome.value, outcome.method


def plain_prose(log: list[Move]) -> str:
    """The log written out without a model: actions and speech, thoughts as the actor's own."""
    out = []
    for m in log:
        if m.kind == "movement":
            out.append(f"{m.actor} went to {m.location}.")
        elif m.kind == "narration":
            out.append(m.speech)
        else:
            parts = [f"{m.actor} {m.action}." if m.action else "", f'{m.actor} said, "{m.speech}"' if m.speech else "",
                     f"{m.actor} thought: {m.thought}." if m.thought else ""]
            out.append(" ".join(p for p in parts if p))
    return "\n\n".join(p for p in out if p)


def narrate(handle: ModelHandle, script: Script, log: list[Move]) -> tuple[str, str]:
    """The story as prose, and how it was written."""
    def step(h: ModelHandle) -> str:
        pred = run_program(h, narrate_program(), book=f"{script.title}. {script.world}".strip(),
                           log=[m.line() for m in log if m.kind != "narration"] or ["(nothing happened)"])
        text = str(pred.story or "").strip()
        return text or plain_prose(log)

    outcome = run_or_fallback(handle, step, lambda: plain_prose(log), fallback_method="heuristic:plain-log")
    return outcome.value, outcome.method


@dataclass
class Simulation:
    """One script played by one method's actors; `run()` gives the narrated story with its log."""

    script: Script
    handle: ModelHandle  # the director's and narrator's model (the generator)
    actor: Actor
    method: str
    shared_memory: bool = False
    log: list[Move] = field(default_factory=list)
    steps: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        first = self.script.locations[0].code if self.script.locations else "here"
        self.where = {c: self.script.start.get(c, first) for c in self.script.cast}
        self.memories = Memories(self.script.cast, shared=self.shared_memory)
        self.calls = 0

    def _present(self, location: str) -> list[str]:
        return [c for c in self.script.cast if self.where.get(c) == location]

    def _log(self, move: Move) -> None:
        self.log.append(move)
        self.memories.record(move)

    def _move_to(self, round_index: int, character: str, destination: str) -> None:
        origin = self.where.get(character)
        if origin == destination:
            return
        audience = sorted({*self._present(origin or ""), *self._present(destination)} - {character})
        self.where[character] = destination
        self._log(Move(len(self.log), round_index, character, "movement", destination, audience))

    def play_round(self, index: int) -> None:
        stage = self.script.stage(index)
        cast = self.script.stage_cast(index)
        if stage.location:
            for character in cast:
                self._move_to(index, character, stage.location)
        events = [m.line(with_thought=False) for m in self.log]
        goals, how = direct(self.handle, self.script, stage.text, cast, self.where, events)
        self.steps.setdefault("director", how)
        for _ in range(self.script.turns):
            for character in cast:
                here = self.where[character]
                company = [c for c in self._present(here) if c != character]
                played = self.actor.act(character, goals[character], self.script.location_name(here), company,
                                        self.memories.of(character))
                self.calls += played.calls
                self._log(Move(len(self.log), index, character, "move", here, company, played.thought,
                               played.action, played.speech, goals[character], played.facts, played.pool))

    def run(self, model: str) -> Story:
        started = time.perf_counter()
        before = len(self.handle.usage.calls) if self.handle.lm is not None else 0
        for index in range(self.script.round_count):
            self.play_round(index)
        text, how = narrate(self.handle, self.script, self.log)
        self.steps["narrator"] = how
        own = (len(self.handle.usage.calls) - before) if self.handle.lm is not None else 0
        return Story(self.script.id, self.method, model, text, self.log, dict(self.steps),
                     calls=self.calls + own, seconds=round(time.perf_counter() - started, 3))


ActorFactory = Callable[[Script, ModelHandle], Actor]
