"""What building a novel's whole memory costs, and what it holds, beside the paper.

    python benchmarks/memory_build.py [--book PATH] [--embedder all-MiniLM-L6-v2]

Defaults to A Study in Scarlet from ../shared/books with its five focus
characters. Prints:
1. the LLM build's model calls and prompt/completion tokens per book token,
   from a dry run with a recording stand-in model (no real model is called;
   answer sizes are the assumptions `reveriemem.source_to_memory.estimate.ANSWER_SIZES` lists;
   tokens counted with cl100k_base), against the target of 5 prompt tokens
   per book token;
2. the offline build's wall time (no model, real embedder) against the
   target of 3 minutes on this machine;
3. row counts per layer of the offline build beside the paper's
   memory-statistics table (which the paper built with GPT-class models).

Runs in a temporary data home, so it never touches your registered books.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

from machine import cpu_model  # benchmarks/machine.py: scripts run as `python benchmarks/<name>.py`

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "books"
# Paper, appendix "Three-Layer Memory Statistics": characters, scenes, SPOCV facts, patterns.
PAPER = {"a-study-in-scarlet": (5, 25, 904, 197), "tom-sawyer": (3, 92, 2298, 170),
         "treasure-island": (3, 46, 1517, 126), "around-the-world-in-80-days": (10, 41, 1836, 175),
         "dracula": (9, 33, 973, 166), "paradise-lost": (7, 38, 1926, 167)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--book", default=str(SHARED / "a-study-in-scarlet.txt"))
    parser.add_argument("--embedder", default="all-MiniLM-L6-v2")
    args = parser.parse_args()
    os.environ["REVERIEMEM_HOME"] = tempfile.mkdtemp(prefix="reveriemem-bench-")
    os.environ.pop("DAGSTER_HOME", None)
    os.environ["REVERIEMEM_LM"] = "none"

    import polars as pl
    from click.testing import CliRunner

    from reveriemem.core.registry import load_book
    from reveriemem.core.storage import MemoryStore, PartitionRef
    from reveriemem.source_to_memory.estimate import ANSWER_SIZES, dry_run
    from reveriemem_dagster.build import build_book
    from reveriemem_dagster.cli import main as cli

    result = CliRunner().invoke(cli, ["add-book", args.book])
    if result.exit_code != 0:
        raise SystemExit(result.output)
    slug = Path(args.book).stem
    book = load_book(slug)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {cpu_model()}")
    print(f"book: {book.title} ({book.info['body_words']:,} words, {len(book.characters)} focus characters: "
          f"{', '.join(c.name for c in book.characters)})")

    estimate = dry_run(slug, build_book)
    print(f"\n1. LLM build, counted with a recording stand-in model (no real model called; tokens: {estimate.counter}; "
          f"dry run {estimate.seconds:.0f} s)")
    print(f"   {'step':<28}{'calls':>7}{'prompt tok':>12}{'completion tok':>16}")
    for name, step in sorted(estimate.steps.items(), key=lambda kv: -kv[1].prompt_tokens):
        print(f"   {name:<28}{step.calls:>7}{step.prompt_tokens:>12,}{step.completion_tokens:>16,}")
    print(f"   {'total':<28}{estimate.calls:>7}{estimate.prompt_tokens:>12,}{estimate.completion_tokens:>16,}")
    ratio = estimate.per_book_token(estimate.prompt_tokens)
    print(f"   book tokens {estimate.book_tokens:,}; per book token: {estimate.per_book_token(estimate.calls) * 1000:.2f}"
          f" calls per 1k, {ratio:.2f} prompt tokens (target <= 5: {'met' if ratio <= 5 else 'NOT met'}), "
          f"{estimate.per_book_token(estimate.completion_tokens):.2f} completion tokens")
    print("   assumed answer sizes: " + "; ".join(f"{k.__name__}: {v}" for k, v in ANSWER_SIZES.items()))

    started = time.monotonic()
    report = build_book(slug, lm="none", embedder=args.embedder)
    seconds = time.monotonic() - started
    print(f"\n2. offline build (no model, embedder {args.embedder}): {seconds:.1f} s in {report.runs} Dagster runs "
          f"(target <= 180 s: {'met' if seconds <= 180 else 'NOT met'})")

    store = MemoryStore.for_home()
    parquet, lance = store, store
    part = PartitionRef(slug)
    scenes = lance.read("scenes", part).height
    facts = lance.read("facts", part)
    entities = parquet.read("entities", part).height
    records = parquet.read("dialogue_records", part).height
    episodes = patterns = transitions = 0
    for character in book.characters:
        pair = PartitionRef(slug, character.slug)
        episodes += lance.read("episodes", pair).height
        patterns += lance.read("personality_patterns", pair).height
        transitions += parquet.read("emotion_transitions", pair).height
    paper = PAPER.get(slug)
    print("\n3. memory of the offline build beside the paper's table (paper: GPT-class models, SPOCV relations;"
          " ours offline: evidence units, heuristic patterns)")
    print(f"   {'':<26}{'ours':>8}{'paper':>8}")
    rows = [("characters", len(book.characters), paper[0] if paper else None),
            ("scenes", scenes, paper[1] if paper else None),
            ("facts (evidence units)", facts.height, paper[2] if paper else None),
            ("patterns", patterns, paper[3] if paper else None),
            ("episodes", episodes, None), ("entities", entities, None),
            ("dialogue records", records, None), ("emotion transitions", transitions, None)]
    for label, ours, theirs in rows:
        print(f"   {label:<26}{ours:>8,}{theirs if theirs is not None else '-':>8}")
    if facts.height:
        routes = pl.Series(facts["routes"].explode()).value_counts(sort=True)
        print("   fact routes: " + ", ".join(f"{r}: {n}" for r, n in routes.iter_rows()))


if __name__ == "__main__":
    main()
