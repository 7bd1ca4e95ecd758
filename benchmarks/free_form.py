"""Free-form questions to the offline agent: what `reveriemem ask BOOK CHARACTER "question" --lm none`
does with the hand-written KBF-QA items asked without their options (issue 14).

    python benchmarks/free_form.py                  # builds the two novels and the demo in a scratch data home
    python benchmarks/free_form.py --home DIR       # a data home where they are already built (nothing is built)
    python benchmarks/free_form.py --home DIR --items eval/handwritten/treasure-island.set4.jsonl

KBF-QA puts options in the question; users mostly do not. Here every item's question alone is put
to its character through the one agent `ask` serves (`ReverieInference`, no model: the offline
reasoner decides), each as a new conversation, and the reply is read as a user would read it:

- a knowable item (KRf) is *answered* when the reply quotes a memory rather than refusing, and
  *found* when the quoted line states the answer: it holds at least half the words of the item's
  locator quote (`where`, the book's own words; for the demo, its gold fact's evidence) or of its
  gold option;
- an unknowable item (KR) is *refused* when the reply is one of the two refusals.

Prints per item file the counts, the found and refused rates and their harmonic mean (sample-weighted,
as KBF), labelled with the model (none), the embedder and the machine. A quote that does not state
the answer is no leak (the agent quotes only its own bounded memory), but it is no answer either.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import cpu_model  # benchmarks/machine.py: scripts run as `python benchmarks/<name>.py`

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
BOOKS = REPO.parent / "shared" / "books"
HANDWRITTEN = REPO / "eval" / "handwritten"
NOVELS = ("a-study-in-scarlet", "treasure-island")
_QUOTED = re.compile(r"[“\"]([^”\"]+)[”\"]")


def build(home: Path) -> None:
    """Register and build the two novels and the demo offline in `home` (the CLI, as a user would)."""
    env = {**os.environ, "REVERIEMEM_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    (home / "dagster").mkdir(parents=True, exist_ok=True)
    cli = [sys.executable, "-m", "reveriemem_dagster.cli"]
    for slug in NOVELS:
        subprocess.run([*cli, "add-book", str(BOOKS / f"{slug}.txt")], env=env, check=True, capture_output=True)
        subprocess.run([*cli, "build", slug, "--lm", "none"], env=env, check=True, capture_output=True)
    subprocess.run([*cli, "demo", "--lm", "none"], env=env, check=True, capture_output=True)


def item_sets() -> list[tuple[str, list[dict[str, Any]]]]:
    """Every hand-written item file of the two novels, and the demo's gold items, as raw records with
    `locator` (the words that state the answer)."""
    from reveriemem.core.demo import DEMO_SLUG, demo_gold

    sets = [read_file(path) for path in sorted(HANDWRITTEN.glob("*.jsonl"))]
    gold = demo_gold()
    evidence = {f["id"]: f.get("evidence", "") for f in gold["facts"]}
    demo = [{**r, "book": DEMO_SLUG, "locator": evidence.get(r.get("fact"), "")} for r in gold["items"]]
    return [("demo gold", demo), *sets]


def read_file(path: Path) -> tuple[str, list[dict[str, Any]]]:
    """An item file's records, each with `locator`: the quoted words of its `where`."""
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return path.name, [{**r, "locator": " ".join(_QUOTED.findall(r.get("where", ""))) or r.get("where", "")}
                       for r in records]


def score(name: str, records: list[dict[str, Any]], agents: dict[str, Any]) -> dict[str, int]:
    from eval import metrics
    from reveriemem.core.embeddings import embedder_for_book
    from reveriemem.core.registry import load_book
    from reveriemem.inference.module import BookMemory, ReverieInference
    from reveriemem.inference.offline import REFUSALS
    from reveriemem.inference.offline_reader import term_set
    from reveriemem.models import open_model

    counts = {"KRf": 0, "answered": 0, "found": 0, "KR": 0, "refused": 0}
    for record in records:
        slug = record["book"]
        if slug not in agents:
            book = load_book(slug)
            agents[slug] = ReverieInference(BookMemory(book, embedder_for_book(slug)), open_model("none"))
        agent = agents[slug]
        agent.state = None
        reply = agent(question=record["question"], character=record["character"]).reply
        refused = any(refusal in reply for refusal in REFUSALS)
        counts[record["split"]] += 1
        if record["split"] == "KR":
            counts["refused"] += refused
            continue
        counts["answered"] += not refused
        said = term_set(reply)
        wanted = [term_set(record["locator"]), term_set(record["options"][record["gold"]])]
        counts["found"] += not refused and any(w and len(w & said) >= len(w) / 2 for w in wanted)
    found = counts["found"] / counts["KRf"] if counts["KRf"] else 0.0
    refused_rate = counts["refused"] / counts["KR"] if counts["KR"] else 0.0
    kbf = metrics.kbf(found, refused_rate, counts["KRf"], counts["KR"]) or 0.0
    print(f"  {name:36} knowable {counts['KRf']:3}: answered {counts['answered']:3}, found {counts['found']:3} "
          f"({100 * found:5.1f}%) | unknowable {counts['KR']:3}: refused {counts['refused']:3} "
          f"({100 * refused_rate:5.1f}%) | free-form KBF {100 * kbf:5.1f}")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, help="a data home where the books are built (default: build them)")
    parser.add_argument("--items", type=Path, action="append", help="item files (default: every hand-written set)")
    args = parser.parse_args()
    started = time.perf_counter()
    scratch = None
    home = args.home
    if home is None:
        scratch = tempfile.TemporaryDirectory(prefix="reveriemem-free-form-")
        home = Path(scratch.name)
        build(home)
    os.environ["REVERIEMEM_HOME"] = str(home)
    os.environ.setdefault("DAGSTER_HOME", str(home / "dagster"))
    sets = [read_file(p) for p in args.items] if args.items else item_sets()
    print(f"machine: {cpu_model()} ({os.cpu_count()} cores), Python {platform.python_version()}; model: none "
          f"(the offline reasoner); embedder: the books' own (all-MiniLM-L6-v2 by default); data home {home}")
    agents: dict[str, Any] = {}
    total = {"KRf": 0, "answered": 0, "found": 0, "KR": 0, "refused": 0}
    for name, records in sets:
        for key, value in score(name, records, agents).items():
            total[key] += value
    print(f"  all: knowable {total['KRf']}: answered {total['answered']}, found {total['found']}; unknowable "
          f"{total['KR']}: refused {total['refused']} ({time.perf_counter() - started:.0f} s)")
    if scratch is not None:
        scratch.cleanup()


if __name__ == "__main__":
    main()
