"""Concurrent model calls: the demo story built with a stand-in model of fixed latency at several concurrencies.

    python benchmarks/build_concurrency.py [--latency 0.5] [--levels 1,4,16]

The stand-in model `latency-stand-in` is a `FakeModel` keyed by signature class that sleeps
`--latency` seconds per call and then gives the recording stand-in's answer of plausible size
(`reveriemem.source_to_memory.estimate.plausible_answer`, as `reveriemem estimate` uses): it
stands for a hosted model's round trip, not for its quality. Each level builds the demo
story (all book and character partitions, hashing embedder) in a fresh data home, in its own
process, with `REVERIEMEM_MAX_CONCURRENCY` set to the level and the model cache off, so every
call is made. Prints per level the wall time of the whole build and the model-bound time
(wall time with at least one call in the model), each with its speed-up over the first level,
the model calls and the most calls seen in flight at once, and whether every
stored table (each asset, each book and character partition) holds the same rows as the
first level's. Target: at least 8x at 16.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import cpu_model  # noqa: E402

MODEL = "latency-stand-in"
TARGET = 8.0


def build_once(latency: float) -> dict[str, Any]:
    """Build the demo story in this process's data home with the stand-in; the figures as a dict."""
    from reveriemem.core import progress
    from reveriemem.core.demo import DEMO_SLUG, demo_book_path, demo_characters_path
    from reveriemem.models import FakeModel
    from reveriemem.models.backends import register_fake
    from reveriemem.source_to_memory.estimate import plausible_answer
    from reveriemem_dagster.build import build_book
    from reveriemem_dagster.instance import add_book

    lock = threading.Lock()
    active = [0, 0.0, 0.0]  # calls in the model now, since when one has been, seconds with one or more
    spans: list[tuple[str, float, float]] = []  # (signature, start, end) of every call, from the build's start

    def answer(signature: Any, inputs: dict[str, Any]) -> dict[str, Any]:
        start = time.monotonic()
        with lock:
            if active[0] == 0:
                active[1] = start
            active[0] += 1
        try:
            time.sleep(latency)
            return plausible_answer(signature, inputs)
        finally:
            with lock:
                end = time.monotonic()
                active[0] -= 1
                if active[0] == 0:
                    active[2] += end - active[1]
                spans.append((getattr(signature, "__name__", "other"), start - began, end - began))

    most = [0]

    def watch(event: progress.ProgressEvent) -> None:
        if event.kind == "in_flight":
            most[0] = max(most[0], event.done)

    fake = FakeModel(answer, name=MODEL)
    register_fake(MODEL, fake)
    add_book(demo_book_path(), demo_characters_path(), DEMO_SLUG)
    progress.add_listener(watch)
    began = time.monotonic()
    report = build_book(DEMO_SLUG, lm=f"fake:{MODEL}", embedder="hash", dagster_log_level="ERROR")
    seconds = time.monotonic() - began
    by_step: dict[str, int] = {}
    for call in fake.calls:
        by_step[call.label or "other"] = by_step.get(call.label or "other", 0) + 1
    return {"seconds": seconds, "model_bound": active[2], "calls": len(fake.calls), "runs": report.runs, "most_in_flight": most[0],
            "by_step": by_step, "timeline": timeline(spans, latency)}


def timeline(spans: list[tuple[str, float, float]], latency: float) -> list[dict[str, Any]]:
    """Per program, in order of its first call: calls, first start, last end, rounds (its model-bound time / latency)."""
    out: list[dict[str, Any]] = []
    for name in sorted({n for n, _, _ in spans}, key=lambda n: min(s for m, s, _ in spans if m == n)):
        mine = sorted((s, e) for m, s, e in spans if m == name)
        busy, until = 0.0, float("-inf")
        for start, end in mine:
            busy += max(0.0, end - max(start, until))
            until = max(until, end)
        out.append({"program": name, "calls": len(mine), "first": mine[0][0], "last": max(e for _, e in mine),
                    "rounds": busy / latency if latency > 0 else 0.0})
    return out


def stored_tables(home: str) -> dict[str, Any]:
    """Every asset's rows for the demo's book and character partitions, keyed by asset and partition."""
    from assets import CHARACTER_ASSETS
    from reveriemem.core.demo import DEMO_SLUG
    from reveriemem.core.errors import StorageError
    from reveriemem.core.registry import load_book
    from reveriemem.core.schemas import BY_ASSET
    from reveriemem.core.settings import environment
    from reveriemem.core.storage import MemoryStore, PartitionRef

    per_character = {a.key.to_user_string() for a in CHARACTER_ASSETS}
    tables: dict[str, Any] = {}
    with environment(REVERIEMEM_HOME=home, REVERIEMEM_LANCEDB_URI=None):
        store = MemoryStore.for_home(home)
        characters = [PartitionRef(DEMO_SLUG, c.slug) for c in load_book(DEMO_SLUG).characters]
        for asset in sorted(BY_ASSET):
            # a per-character table read by book alone would mix the characters' rows in the order their
            # runs (at once) finished: each character's partition is compared instead
            for part in characters if asset in per_character else [PartitionRef(DEMO_SLUG)] + characters:
                try:
                    frame = store.read(asset, part)
                except StorageError:
                    continue
                if frame.height:
                    tables[f"{asset}[{part.label()}]"] = frame  # in the order stored: it must not depend on timing
    return tables


def _child(args: argparse.Namespace) -> None:
    print(json.dumps(build_once(args.latency)))


def _build_in_child(level: int, latency: float, homes: list[str]) -> dict[str, Any]:
    """Build in a fresh data home, in a child process, at concurrency `level`; the child's figures."""
    home = tempfile.mkdtemp(prefix=f"reveriemem-concurrency-{level}-")
    homes.append(home)
    env = {**os.environ, "REVERIEMEM_HOME": home, "REVERIEMEM_MAX_CONCURRENCY": str(level),
           "REVERIEMEM_MODEL_CACHE": "0", "REVERIEMEM_EMBEDDER": "hash"}
    env.pop("DAGSTER_HOME", None)
    env.pop("REVERIEMEM_LANCEDB_URI", None)
    done = subprocess.run([sys.executable, __file__, "--child", "--latency", str(latency)], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the build at concurrency {level} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.5, help="seconds the stand-in takes per call")
    parser.add_argument("--levels", default="1,4,16")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    levels = [int(n) for n in args.levels.split(",")]
    print(f"machine: {os.cpu_count()} cores, {cpu_model()}, {platform.system()} {platform.machine()}, "
          f"Python {platform.python_version()}")
    print(f"model: {MODEL} (a FakeModel keyed by signature class, {args.latency} s per call, answers of plausible "
          f"size; no real model); embedder: hash; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    homes: list[str] = []
    results: list[dict[str, Any]] = []
    try:
        for level in levels:
            results.append(_build_in_child(level, args.latency, homes))
        reference = stored_tables(homes[0])
        print(f"\nmodel calls per build: {results[0]['calls']} "
              f"({', '.join(f'{k}: {v}' for k, v in sorted(results[0]['by_step'].items()))}); "
              f"{results[0]['runs']} Dagster runs")
        print("'model-bound s': the wall time during which at least one call was in the model (the rest is "
              "Dagster, rules, embeddings and storage, the same at every level)")
        print(f"{'concurrency':>11} | {'wall s':>7} | {'speed-up':>8} | {'model-bound s':>13} | {'speed-up':>8} | "
              f"{'calls':>5} | {'most in flight':>14} | tables identical to concurrency {levels[0]}")
        wait_1 = results[0]["model_bound"]
        verdict = ""
        for level, result, home in zip(levels, results, homes):
            tables = stored_tables(home)
            differing = sorted(k for k in set(reference) | set(tables)
                               if k not in reference or k not in tables or not reference[k].equals(tables[k]))
            same = "yes" if not differing else f"NO ({', '.join(differing[:4])})"
            speed = results[0]["seconds"] / result["seconds"]
            wait = result["model_bound"]
            wait_speed = wait_1 / wait if wait > 0 else float("inf")
            print(f"{level:>11} | {result['seconds']:>7.1f} | {speed:>7.1f}x | {wait:>13.1f} | {wait_speed:>7.1f}x | "
                  f"{result['calls']:>5} | {result['most_in_flight']:>14} | {same} ({len(tables)} tables)")
            if level == 16:
                verdict = (f"speed-up at 16: {speed:.1f}x of the whole build, {wait_speed:.1f}x of the model-bound time, "
                           f"against a target of {TARGET:.0f}x: "
                           f"{'met' if speed >= TARGET and not differing else 'MISSED'}")
        if verdict:
            print(verdict)
        chain = results[-1]["model_bound"] / args.latency if args.latency > 0 else 0.0
        if chain:
            print(f"at concurrency {levels[-1]} the model-bound time is {chain:.1f} rounds of {args.latency} s for "
                  f"{results[-1]['calls']} calls: calls that waited for an earlier answer (or an earlier step); "
                  f"more concurrency cannot shorten it, so {results[-1]['calls'] / chain:.1f}x is the ceiling of "
                  f"the model-bound speed-up for this book")
        print(f"\ncalls over time at concurrency {levels[-1]} (seconds from the build's start; 'rounds': the "
              f"program's model-bound time over the latency, i.e. how many calls had to wait for an earlier one)")
        print(f"{'program':>26} | {'calls':>5} | {'first s':>7} | {'last s':>7} | {'rounds':>6}")
        for row in results[-1]["timeline"]:
            print(f"{row['program']:>26} | {row['calls']:>5} | {row['first']:>7.1f} | {row['last']:>7.1f} | "
                  f"{row['rounds']:>6.1f}")
    finally:
        for home in homes:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
