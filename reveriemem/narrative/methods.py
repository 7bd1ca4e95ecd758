"""The story methods of Task 2, behind one interface: `tell(script, lm) -> Story`.

- `reveriemem` and its ablations (`-no-episodic`, `-no-semantic`, `-no-personality`):
  every character acts through its own ReverieMem agent, opened with the public session
  API (`reveriemem.open_session`) and bounded at the script's point (`as_of`); the
  agent is asked for its next move and remembers only its own moves and what it
  perceived (`simulation.Memories`). The ablation drops one memory layer of the agent.
- `bookworld`: characters act from their profiles and the world description, with one
  history shared by all, thoughts included (as BookWorld's released code does).
- `hollmwood`: a writer drafts a beat outline, an editor revises it, and an actor per
  character plays each beat from the profile; the narrator writes the log up.
- `direct`: one call writes the whole story from the profiles and the plot.

All use the generator model given as `lm` (a model string); `none` runs the
deterministic fallbacks where a step has one (the ReverieMem agent's offline reasoner,
the stage as goal, the plain log); profile-driven moves without a model repeat the goal.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dspy_programs.narrative import (
    MOVE_REQUEST,
    act_from_profile_program,
    outline_program,
    revise_outline_program,
    whole_story_program,
)
from reveriemem.core.errors import ModelOutputError, ReverieMemError
from reveriemem.inference.session import Session, open_session
from reveriemem.models import ModelHandle, open_model, run_or_fallback, run_program
from reveriemem.narrative.log import Move, Story, parse_move
from reveriemem.narrative.scripts import Script
from reveriemem.narrative.simulation import ActorMove, Simulation, narrate, parse_goals, plain_prose

LAYERS = frozenset({"episodic", "semantic", "personality"})
ABLATIONS = {"reveriemem": LAYERS, "reveriemem-no-episodic": LAYERS - {"episodic"},
             "reveriemem-no-semantic": LAYERS - {"semantic"},
             "reveriemem-no-personality": LAYERS - {"personality"}}


class MethodError(ReverieMemError):
    """A story method cannot run on this script (unknown method, no built memory, unknown character)."""


# -- ReverieMem ----------------------------------------------------------------------------


@dataclass
class ReverieActor:
    """Each character's own ReverieMem session, bounded at the script's point."""

    script: Script
    lm: str
    layers: frozenset[str] = LAYERS
    sessions: dict[str, Session] = field(default_factory=dict)

    def session(self, character: str) -> Session:
        if character not in self.sessions:
            if not self.script.book:
                raise MethodError(f"The script {self.script.id!r} names no book, so its characters have no "
                                  f"ReverieMem memory; use a profile-driven method (bookworld, hollmwood, direct).")
            try:
                session = open_session(self.script.book, character, lm=self.lm, as_of_scene=self.script.as_of_scene,
                                       as_of_chapter=self.script.as_of_chapter)
            except ReverieMemError as exc:
                raise MethodError(f"Cannot open {character!r} of {self.script.book}: {exc}") from exc
            if self.layers != LAYERS:
                session.agent.layers = self.layers  # the ablation: the agent without one memory layer
            self.sessions[character] = session
        return self.sessions[character]

    def act(self, character: str, goal: str, location: str, company: list[str],
            history: list[tuple[str, str]]) -> ActorMove:
        session = self.session(character)
        question = MOVE_REQUEST.format(location=location, company=", ".join(company) or "nobody else",
                                       goal=goal.rstrip(".") + ".")
        try:
            turn = session.agent.respond(question, history=history, as_of=session.as_of, probes=[goal])
        except ModelOutputError:  # Memory-Fusion never parsed: as the profile actors do, the goal is the move
            return ActorMove(*parse_move(goal))
        thought, action, speech = parse_move(turn.reply)
        return ActorMove(thought, action, speech, list(turn.trace.used_facts), [f.fact_id for f in turn.trace.facts],
                         calls=turn.trace.calls)


# -- profile-driven actors -----------------------------------------------------------------


@dataclass
class ProfileActor:
    """A character played from its profile and the world description (BookWorld, HoLLMwood's actors)."""

    script: Script
    handle: ModelHandle

    def act(self, character: str, goal: str, location: str, company: list[str],
            history: list[tuple[str, str]]) -> ActorMove:
        def step(h: ModelHandle) -> str:
            pred = run_program(h, act_from_profile_program(), character=character,
                               profile=self.script.profiles.get(character, "") or "a character of the book",
                               world=f"{self.script.world} {character} is at {location}"
                                     f"{' with ' + ', '.join(company) if company else ''}.".strip(),
                               goal=goal, history=[f"{who}: {text}" for who, text in history])
            return str(pred.move or "")

        outcome = run_or_fallback(self.handle, step, lambda: goal, fallback_method="heuristic:goal-as-move")
        return ActorMove(*parse_move(outcome.value))


# -- the methods ---------------------------------------------------------------------------

Teller = Callable[[Script, str], Story]
METHODS: dict[str, Teller] = {}


def register(name: str) -> Callable[[Teller], Teller]:
    def add(fn: Teller) -> Teller:
        METHODS[name] = fn
        return fn
    return add


def method_names() -> list[str]:
    return list(METHODS)


def tell(script: Script, method: str, lm: str = "") -> Story:
    """`script` played by `method` under the generator model `lm`; a clear error for an unknown method."""
    if method not in METHODS:
        raise MethodError(f"Unknown story method {method!r} (known: {', '.join(METHODS)}).")
    return METHODS[method](script, lm)


def _reverie(name: str) -> Teller:
    def run(script: Script, lm: str) -> Story:
        handle = open_model(lm or None)
        actor = ReverieActor(script, lm, ABLATIONS[name])
        return Simulation(script, handle, actor, name).run(handle.name)
    return run


for _name in ABLATIONS:
    register(_name)(_reverie(_name))


@register("bookworld")
def _bookworld(script: Script, lm: str) -> Story:
    handle = open_model(lm or None)
    return Simulation(script, handle, ProfileActor(script, handle), "bookworld", shared_memory=True).run(handle.name)


@register("hollmwood")
def _hollmwood(script: Script, lm: str) -> Story:
    started = time.perf_counter()
    handle = open_model(lm or None)
    before = len(handle.usage.calls)
    fallback = [f"{c}: {script.stage(i).text}" for i in range(script.round_count) for c in script.stage_cast(i)]

    def step(h: ModelHandle) -> list[str]:
        drafted = run_program(h, outline_program(), book=f"{script.title}. {script.world}".strip(),
                              profiles=script.profile_lines(), plot=script.plot_text())
        revised = run_program(h, revise_outline_program(), plot=script.plot_text(), profiles=script.profile_lines(),
                              beats=list(drafted.beats or []))
        return [str(b) for b in revised.revised or drafted.beats or []] or fallback

    outline = run_or_fallback(handle, step, lambda: fallback, fallback_method="heuristic:stages-as-beats")
    # The actors play at most as many beats as the simulations make moves (one per character of a
    # stage per turn): a model that writes a 70-beat outline must not buy itself 70 actor calls.
    budget = len(fallback) * max(1, script.turns)
    beats = [b for b in outline.value if b.strip()][:budget] or fallback
    actor = ProfileActor(script, handle)
    log: list[Move] = []
    history: list[tuple[str, str]] = []
    location = script.locations[0].name if script.locations else "here"
    for beat in beats:
        goals = parse_goals([beat], script.cast, "")
        character = next((c for c, g in goals.items() if g), script.cast[len(log) % len(script.cast)])
        played = actor.act(character, goals.get(character) or beat, location,
                           [c for c in script.cast if c != character], history[-12:])
        move = Move(len(log), 0, character, "move", location, [c for c in script.cast if c != character],
                    played.thought, played.action, played.speech, beat)
        log.append(move)
        history.append((character, move.full_text()))
    text, how = narrate(handle, script, log)
    return Story(script.id, "hollmwood", handle.name, text, log, {"outline": outline.method, "narrator": how},
                 calls=len(handle.usage.calls) - before, seconds=round(time.perf_counter() - started, 3))


@register("direct")
def _direct(script: Script, lm: str) -> Story:
    started = time.perf_counter()
    handle = open_model(lm or None)
    before = len(handle.usage.calls)
    log = [Move(0, 0, "narrator", "narration", "", [], speech=script.plot_text())]

    def step(h: ModelHandle) -> str:
        pred = run_program(h, whole_story_program(), book=f"{script.title}. {script.world}".strip(),
                           profiles=script.profile_lines(), plot=script.plot_text())
        return str(pred.story or "").strip() or plain_prose(log)

    outcome = run_or_fallback(handle, step, lambda: plain_prose(log), fallback_method="heuristic:plot-as-story")
    return Story(script.id, "direct", handle.name, outcome.value, log, {"writer": outcome.method},
                 calls=len(handle.usage.calls) - before, seconds=round(time.perf_counter() - started, 3))
