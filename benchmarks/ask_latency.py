"""How long an offline answer takes: a cold `reveriemem ask --lm none`, and a warm turn in one process.

    python benchmarks/ask_latency.py [--book the-lamplighters-ledger] [--character Mara] [--runs 5]

Uses the data home of $REVERIEMEM_HOME; the book must be built (with the
default embedder, all-MiniLM-L6-v2, for figures a user would see: `reveriemem
demo` builds the demo story). Prints the machine and load average, then:

- cold: wall time of `python -m reveriemem_dagster.cli ask BOOK CHARACTER Q --lm none`
  run `--runs` times as a new process (median, min, max; plus the child's CPU
  time, which other jobs on the machine inflate less than the wall time);
  whether the process imported torch, sentence-transformers or Dagster;
- warm: one process opens the session once (as `chat` does), answers once,
  then answers each question again: median and max seconds per turn;
- equivalence: the numpy MiniLM's query vectors against sentence-transformers'
  (the same model under torch): the largest difference and the lowest cosine.

Targets (issue 17): cold <= 5 s wall, warm turn <= 0.5 s; the script says whether they are met.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import cpu_model  # noqa: E402

QUESTIONS = [
    "Which cask did you fill the Horn Lamp from on the fourteenth?",
    "Where was the Ledger of Lights kept while it was gone?",
    "What did Jory Pellow fish up off the Teeth?",
    "Who keeps the Horn Lamp through the dark now?",
]
PROBE = ("import sys, runpy; sys.argv = ['reveriemem'] + sys.argv[1:]\n"
         "try:\n    runpy.run_module('reveriemem_dagster.cli', run_name='__main__')\n"
         "except SystemExit:\n    pass\n"
         "print('IMPORTED', ' '.join(m for m in ('torch', 'sentence_transformers', 'dagster') if m in sys.modules),"
         " file=sys.stderr)\n")


def cold(book: str, character: str, runs: int) -> tuple[list[float], list[float], str]:
    walls, cpus, imported = [], [], ""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REVERIEMEM_LM": "none"}
    for i in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", PROBE, "ask", book, character, QUESTIONS[i % len(QUESTIONS)]],
                              capture_output=True, text=True, env=env, cwd=ROOT, check=False)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if "Facts" not in done.stdout and "No fact" not in done.stdout:
            raise SystemExit(f"ask failed: {done.stdout}\n{done.stderr}")
        imported = next((line.removeprefix("IMPORTED").strip() for line in done.stderr.splitlines()
                         if line.startswith("IMPORTED")), "?")
    return walls, cpus, imported


def warm(book: str, character: str) -> tuple[float, list[float], str]:
    from reveriemem.inference.session import open_session

    started = time.perf_counter()
    session = open_session(book, character, lm="none")
    session.agent.respond(QUESTIONS[0], as_of=session.as_of)
    first = time.perf_counter() - started
    turns = []
    for question in QUESTIONS * 2:
        started = time.perf_counter()
        session.agent.respond(question, as_of=session.as_of)
        turns.append(time.perf_counter() - started)
    return first, turns, getattr(session.agent, "reader", None).__class__.__name__


def equivalence() -> tuple[float, float]:
    import numpy as np

    from reveriemem.core.embeddings import bundled_minilm_path
    from reveriemem.core.minilm import MiniLMNumpy

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from sentence_transformers import SentenceTransformer

    path = bundled_minilm_path()
    ours = MiniLMNumpy(path).encode(QUESTIONS)
    theirs = SentenceTransformer(str(path), device="cpu").encode(QUESTIONS, normalize_embeddings=True)
    return float(np.abs(ours - theirs).max()), float((ours * theirs).sum(1).min())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--book", default="the-lamplighters-ledger")
    parser.add_argument("--character", default="Mara")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-equivalence", action="store_true", help="skip the torch comparison (slow import)")
    args = parser.parse_args()
    from reveriemem.core.storage import MemoryStore

    manifest = MemoryStore.for_home().manifest(args.book)
    if manifest is None:
        raise SystemExit(f"{args.book} is not built in {MemoryStore.for_home().home}; run `reveriemem demo` first.")
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at start")
    print(f"book {args.book} ({manifest.embedder}), character {args.character}, model none")
    walls, cpus, imported = cold(args.book, args.character, args.runs)
    print(f"cold ask: median {statistics.median(walls):.2f} s wall (min {min(walls):.2f}, max {max(walls):.2f}; "
          f"CPU {statistics.median(cpus):.2f} s) over {len(walls)} runs; heavy modules imported: {imported or 'none'}")
    first, turns, _ = warm(args.book, args.character)
    print(f"warm turn: median {statistics.median(turns):.3f} s, max {max(turns):.3f} s over {len(turns)} turns "
          f"(opening the session and the first turn: {first:.2f} s)")
    print(f"load average {os.getloadavg()[0]:.1f} at end")
    print(f"targets: cold <= 5 s {'met' if statistics.median(walls) <= 5 else 'NOT met'}; warm <= 0.5 s "
          f"{'met' if statistics.median(turns) <= 0.5 else 'NOT met'}")
    if not args.no_equivalence and manifest.embedder == "all-MiniLM-L6-v2":
        diff, cosine = equivalence()
        print(f"numpy MiniLM against sentence-transformers: max |difference| {diff:.2e}, lowest cosine {cosine:.7f}")


if __name__ == "__main__":
    main()
