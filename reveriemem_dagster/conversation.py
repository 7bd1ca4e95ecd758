"""`reveriemem ask` and `reveriemem chat`: a character agent over a built memory, in the terminal."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from reveriemem.core.user_text import well_formed
from reveriemem.inference.reply_evidence import sentence_support
from reveriemem.inference.session import Session
from reveriemem.inference.trace import Turn

CHAT_HELP = "Commands: /trace shows the last turn's trace, /json the same as JSON, /quit (or Ctrl-D, Ctrl-C) ends."
DEMO_CHARACTER, DEMO_QUESTION = "Mara Quell", "Which cask did you fill the Horn Lamp from on the fourteenth?"


def turn_json(session: Session, turn: Turn) -> dict[str, Any]:
    """The reply, the scenes and facts it rests on, which sentence each used fact supports, and the trace."""
    trace = turn.trace
    used = [f for f in trace.facts if f.fact_id in trace.used_facts]
    sentences = sentence_support(turn.reply, used, session.agent.offline_reasoner().rarity,
                                 session.character.surface_forms, option=trace.stop_reason == "option")
    return {
        "book": session.book.slug, "character": session.character.name, "question": turn.question,
        "reply": turn.reply, "model": trace.model, "method": trace.method, "as_of": trace.as_of,
        "scenes": [{"scene_id": s.scene_id, "location": s.location, "time": s.time, "score": s.score,
                    "source_start": s.source_start, "source_end": s.source_end, "note": s.note}
                   for s in trace.anchored],
        "facts": [{"id": f.fact_id, "text": f.text, "evidence": f.evidence, "visibility": f.visibility,
                   "routes": f.routes, "route": f.route, "scene_id": f.scene_id, "source_start": f.source_start,
                   "source_end": f.source_end, "used": f.fact_id in trace.used_facts} for f in trace.facts],
        "sentences": [s.to_dict() for s in sentences],
        "rests_on_scene": (trace.offline or {}).get("rests_on_scene"),  # an option chosen from a scene memory
        "trace": turn.to_dict()["trace"],
    }


def render_turn(session: Session, turn: Turn) -> str:
    """The reply, then what it rests on: anchored scenes and the facts used (or retrieved)."""
    trace = turn.trace
    lines = [f"{session.character.name}: {turn.reply}", ""]
    if trace.anchored:
        lines.append("Scenes recalled: " + "; ".join(
            f"scene {s.scene_id}" + (f" ({s.location})" if s.location else "") for s in trace.anchored))
    rested = [f for f in trace.facts if f.fact_id in trace.used_facts]
    used = rested or trace.facts[:3]
    label = "Facts used" if rested else "Facts retrieved"
    note = (trace.offline or {}).get("rests_on_scene")
    if note is not None and not rested:
        start, end = (trace.offline or {}).get("rests_on_chars") or (None, None)
        lines.append(f"Rests on: {session.character.name}'s own memory of scene {note}"
                     + (f" (chars {start}-{end})" if start is not None else ""))
    elif used:
        lines.append(f"{label}:")
        for fact in used:
            where = f"chars {fact.source_start}-{fact.source_end}" if fact.source_start is not None else ""
            lines.append(f"  [{fact.fact_id}] {fact.text}  ({fact.route}; scene {fact.scene_id}; {where})")
            if fact.evidence and fact.evidence != fact.text:
                lines.append(f"      \u201c{' '.join(fact.evidence.split())[:240]}\u201d")
    else:
        lines.append("No fact of this character's memory was retrieved.")
    totals = trace.totals()
    lines.append(f"({trace.model}; {totals['calls']} model calls, {totals['total_tokens']} tokens, "
                 f"exit round {trace.exit_round}, {totals['seconds']:.1f}s)")
    return "\n".join(lines)


def render_trace(turn: Turn) -> str:
    trace = turn.trace
    lines = [f"method {trace.method}; model {trace.model}; as of {trace.as_of if trace.as_of is not None else 'end'}"]
    for scene in trace.anchored:
        lines.append(f"anchor: scene {scene.scene_id} score {scene.score}")
    for round_ in trace.rounds:
        lines.append(f"round {round_.round}: probe {round_.probe!r} sufficient={round_.sufficient} "
                     f"new facts {', '.join(round_.new_facts) or '-'}" + (f" ({round_.note})" if round_.note else ""))
    for fact in trace.facts:
        lines.append(f"fact {fact.fact_id} [{fact.route}] visible to {', '.join(fact.visibility)}: {fact.text}")
    lines.append(f"exit round {trace.exit_round} ({trace.stop_reason}); emotion {trace.emotion}; "
                 f"pattern {trace.pattern.get('description') if trace.pattern else None} ({trace.pattern_source})")
    for step in trace.steps:
        lines.append(f"step {step.step}: {step.calls} calls, {step.prompt_tokens}+{step.completion_tokens} tokens, "
                     f"{step.seconds:.2f}s" + (f", degraded: {step.degraded}" if step.degraded else ""))
    if trace.degraded:
        lines.append("degraded: " + "; ".join(trace.degraded))
    return "\n".join(lines)


def chat_loop(session: Session, read: Callable[[str], str], write: Callable[[str], None]) -> int:
    """An interactive conversation keeping history and emotional state; returns the number of turns."""
    write(f"Talking with {session.character.name} of {session.book.title} ({session.handle.name}). {CHAT_HELP}")
    history: list[tuple[str, str]] = []
    last: Turn | None = None
    turns = 0
    while True:
        try:
            line = well_formed(read("You: ")).strip()  # undecodable bytes as U+FFFD, not an error
        except (EOFError, KeyboardInterrupt):
            write("")
            return turns
        if not line:
            continue
        command = line.casefold() if line.startswith("/") else ""  # /QUIT is /quit
        if command in ("/quit", "/exit"):
            return turns
        if command in ("/trace", "/json"):
            if last is None:
                write("No turn yet.")
            elif command == "/trace":
                write(render_trace(last))
            else:
                write(json.dumps(turn_json(session, last), ensure_ascii=False, indent=2, default=str))
            continue
        if line.startswith("/"):
            write(CHAT_HELP)
            continue
        try:
            last = session.agent.respond(line, history=list(history), as_of=session.as_of)
        except KeyboardInterrupt:
            write("")
            return turns
        history += [("You", line), (session.character.name, last.reply)]
        turns += 1
        write(f"{session.character.name}: {last.reply}")


def demo_question(lm: str = "") -> str:
    """The end of `reveriemem demo`: one question to one character of the demo story, with the facts it rests on."""
    from reveriemem.core.demo import DEMO_SLUG
    from reveriemem.inference.session import open_session

    session = open_session(DEMO_SLUG, DEMO_CHARACTER, lm=lm)
    turn = session.agent.respond(DEMO_QUESTION, as_of=session.as_of)
    return f"You (to {session.character.name}): {DEMO_QUESTION}\n" + render_turn(session, turn)
