"""Model calls per query of the character agent on the demo story's gold items (issue 14,
item 4: a median of at most 3).

    python benchmarks/agent_calls.py [--lm bundled | --stand-in] [--limit N] [--emotion-model]

Builds the demo story offline (`reveriemem demo --lm none`, embedder
all-MiniLM-L6-v2) in a temporary data home (REVERIEMEM_HOME points at it, so
your books and model caches are never touched), then asks every gold item of
the demo (`reveriemem.core.demo.demo_gold()["items"]`) of its character through
`reveriemem.inference.session.open_session(DEMO_SLUG, character, lm=...)`
and `session.agent.respond(question)`. Every item is a first turn: the agent's
state is cleared before it, so no emotional state or pattern carries over from
another item (a first turn holds the pattern closest to the recorded state and the
question without a call, and asks Pattern only when the Emo-Gate fires).

Prints the machine and the model, then per query the model calls (retries of
unparseable output included; cached calls are not counted, the cache starts
empty), the prompts asked (steps that called the model, each counted once
however often it was retried), the exit round, the stop
reason, whether the emotional gate fired and how the pattern was chosen;
then the median and maximum calls per query, the number of facts in the
traces outside the asker's visibility (must be 0) and the wall time.

`--lm bundled` (the default) is the SmolLM2-135M shipped with the project:
on two cores a call takes some 10-60 s, so the full 30 items take hours;
`--limit N` asks only the first N. `--lm none` takes the extractive path (no
calls). `--stand-in` answers with `stand_in_model()`, a recording `FakeModel` whose
handler writes well-formed outputs at once (Self-Probe probes with the question and says
Sufficient from round 2 when a fact was found; Pattern picks the first candidate, only when the
agent asks; Memory-Fusion quotes the first fact), so the count measures the agent's control flow,
not a model's parsing: it runs the 30 items in seconds. `--emotion-model` asks the model for Emo-Gate and Emo-Transition too
(`ReverieInference(..., emotion_model=True)`), for comparison.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

EMBEDDER = "all-MiniLM-L6-v2"
STAND_IN = "agent-calls-stand-in"  # the registered fake's name: `--lm fake:agent-calls-stand-in`


def stand_in_answer(signature: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Well-formed outputs for the agent's prompts, keyed by signature class (see the module docstring)."""
    from dspy_programs.inference import EmoGate, EmoTransition, MemoryFusion, SelectPattern, SelfProbe

    if signature is SelfProbe:
        question = str(inputs.get("question") or "")
        found = bool(inputs.get("fact_pool"))
        return {"refined_question": question, "probe": question if not inputs.get("earlier_probes") else
                f"{question} (again)", "sufficient": found}
    if signature is SelectPattern:
        return {"choice": 1}
    if signature is MemoryFusion:
        facts = [str(f) for f in inputs.get("facts") or []]
        if not facts:
            return {"reply": "I don't know.", "used_facts": []}
        return {"reply": f"I recall it: {facts[0].split('] ', 1)[-1]}", "used_facts": [1]}
    if signature is EmoGate:
        return {"fires": False}
    if signature is EmoTransition:
        return {"emotion": "neutral", "intensity": 1, "reason": "stand-in"}
    return {}


def stand_in_model() -> Any:
    """The recording stand-in model (a `reveriemem.models.FakeModel` named after `STAND_IN`)."""
    from reveriemem.models import FakeModel

    return FakeModel(stand_in_answer, name=STAND_IN)


def _machine() -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    cpu = platform.processor() or platform.machine()
    return f"{platform.system()} {platform.machine()} ({cpu}), {os.cpu_count()} cores, load average {load}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lm", default="bundled", help="model string (default: bundled; none: no model)")
    parser.add_argument("--stand-in", action="store_true",
                        help="answer with the recording stand-in model instead of --lm (seconds, not hours)")
    parser.add_argument("--limit", type=int, default=None, help="ask only the first N gold items")
    parser.add_argument("--emotion-model", action="store_true",
                        help="ask the model for Emo-Gate and Emo-Transition as well")
    args = parser.parse_args()

    home = tempfile.mkdtemp(prefix="reveriemem-agent-calls-")
    os.environ["REVERIEMEM_HOME"] = home
    os.environ["REVERIEMEM_EMBEDDER"] = EMBEDDER
    os.environ.pop("DAGSTER_HOME", None)
    try:
        run(args, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def run(args: argparse.Namespace, home: str) -> None:
    from click.testing import CliRunner

    from reveriemem.core.demo import DEMO_SLUG, demo_gold
    from reveriemem.core.errors import ModelOutputError
    from reveriemem.inference.session import Session, open_session
    from reveriemem.models import register_fake
    from reveriemem_dagster.cli import main as cli

    if args.stand_in:
        register_fake(STAND_IN, stand_in_model())
        args.lm = f"fake:{STAND_IN}"

    print(f"machine: {_machine()}", flush=True)
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["demo", "--lm", "none"])
    if result.exit_code != 0:
        print(result.output)
        raise SystemExit(f"building the demo failed (exit code {result.exit_code})")
    built = time.monotonic() - started
    print(f"demo built offline in {built:.1f}s (data home {home}, embedder {EMBEDDER})", flush=True)

    items = demo_gold()["items"][: args.limit]
    sessions: dict[str, Session] = {}
    rows: list[dict[str, Any]] = []
    outside = 0
    asking = time.monotonic()
    model_name = ""
    for n, item in enumerate(items, 1):
        name = item["character"]
        if name not in sessions:
            sessions[name] = open_session(DEMO_SLUG, name, lm=args.lm)
            sessions[name].agent.emotion_model = args.emotion_model
        session = sessions[name]
        model_name = session.handle.name
        if n == 1:
            print(f"model: {model_name}; emotion steps: {'model' if args.emotion_model else 'deterministic'}; "
                  f"{len(items)} of {len(demo_gold()['items'])} gold items", flush=True)
        session.agent.state = None  # every item is a first turn
        before = int(session.handle.usage.summary()["calls"])
        t0 = time.monotonic()
        print(f"[{n}/{len(items)}] {item['id']} {name}: {item['question']}", flush=True)
        try:
            turn = session.agent.respond(item["question"])
        except ModelOutputError as exc:  # Memory-Fusion never parsed: the query fails, the others go on
            calls = int(session.handle.usage.summary()["calls"]) - before
            row = {"id": item["id"], "calls": calls, "prompts": None, "exit_round": None, "stop": f"failed: {exc}",
                   "gate": None, "pattern": "", "seconds": time.monotonic() - t0}
        else:
            trace = turn.trace
            hidden = [f.fact_id for f in trace.facts if session.character.slug not in f.visibility]
            outside += len(hidden)
            prompts = sum(1 for s in trace.steps if s.calls or s.cached_calls)
            row = {"id": item["id"], "calls": trace.calls, "prompts": prompts, "exit_round": trace.exit_round,
                   "stop": trace.stop_reason,
                   "gate": trace.gate, "pattern": trace.pattern_source, "seconds": time.monotonic() - t0,
                   "cached": sum(s.cached_calls for s in trace.steps), "reply": turn.reply}
        rows.append(row)
        print(f"    calls {row['calls']} ({row['prompts']} prompts), exit round {row['exit_round']}, stop {row['stop']}, gate {row['gate']}, "
              f"pattern {row['pattern'] or '-'}, {row['seconds']:.1f}s", flush=True)
    asked = time.monotonic() - asking

    print()
    print(f"machine: {_machine()}")
    print(f"model: {model_name}; emotion steps: {'model' if args.emotion_model else 'deterministic'}")
    print(f"{'item':5} {'calls':>5} {'prompts':>7} {'exit':>4} {'stop':14} {'gate':5} {'pattern':16} {'seconds':>8}")
    for row in rows:
        print(f"{row['id']:5} {row['calls']:>5} {row['prompts'] if row['prompts'] is not None else '-':>7} "
              f"{row['exit_round'] if row['exit_round'] is not None else '-':>4} "
              f"{str(row['stop'])[:14]:14} {str(row['gate']):5} {row['pattern'] or '-':16} {row['seconds']:>8.1f}")
    per_query = [row["calls"] for row in rows]
    if per_query:
        print(f"calls per query: median {statistics.median(per_query):g}, max {max(per_query)} over "
              f"{len(per_query)} queries "
              f"(target: median <= 3)")
        prompted = [row["prompts"] for row in rows if row["prompts"] is not None]
        if prompted:
            print(f"prompts per query (retries not counted): median {statistics.median(prompted):g}, "
                  f"max {max(prompted)}")
    failed = sum(1 for row in rows if str(row["stop"]).startswith("failed"))
    print(f"failed queries: {failed}")
    print(f"facts in traces outside the asker's visibility: {outside} (must be 0)")
    print(f"wall time: {asked:.1f}s asking ({asked / max(1, len(rows)):.1f}s per query), {built:.1f}s building, "
          f"{time.monotonic() - started:.1f}s in all")


if __name__ == "__main__":
    main()
