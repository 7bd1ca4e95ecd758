"""Boundary precision of an offline-built memory against a hand-made presence annotation.

    python benchmarks/boundary.py                      # every book annotated under eval/presence/ (six),
                                                       # then the demo story
    python benchmarks/boundary.py --book PATH --annotation A.jsonl [--annotation B.jsonl]
    python benchmarks/boundary.py --demo-only --keep-home
    python benchmarks/boundary.py --no-demo --presence-from-annotation   # the ceiling of the presence record

Registers the book (and the demo story) in a scratch data home, builds the
memory offline (REVERIEMEM_LM=none), reads the stored facts and prints, per
focus character and overall, the leak rate (grants by routes other than
`direct` to a character not present in the passage), recall (present
characters granted), their counts and the passages with the most leaks,
labelled with the method that built the facts, the embedder and the machine.
The annotation format and the scoring rules: docs/formats.md, "Presence
annotation", and eval/boundary.py. With --presence-from-annotation the same
offline facts are granted from the annotation's own presence instead of the
rosters' (no Dagster, no store): what is left then is owed to the facts and
their privacy, not to who was present. The demo story is scored against its gold
scenes (present = present_active or present_silent).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from machine import cpu_model  # benchmarks/machine.py: scripts run as `python benchmarks/<name>.py`

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "books"
PRESENCE = REPO / "eval" / "presence"


def build_offline(path: Path, characters: Path, slug: str, embedder: str) -> float:
    """Register `path` under `slug` and build its memory without a model; the build's wall time in seconds.

    The one place that knows the build API, so a change there touches one function.
    """
    from reveriemem.core.registry import prepare_book, write_book
    from reveriemem_dagster.build import build_book

    book, _ = prepare_book(path, characters, slug=slug)
    write_book(book)
    started = time.monotonic()
    build_book(slug, lm="none", embedder=embedder)
    return time.monotonic() - started


def stored_facts(slug: str) -> list[dict[str, Any]]:
    """The book's stored fact rows (no vectors), through evaluation's loader."""
    from eval.memory import load_book_memory

    return load_book_memory(slug).facts


def default_annotation(slug: str) -> list[Path]:
    """`eval/presence/<slug>.jsonl` or its parts `<slug>.*.jsonl`, in name order."""
    whole = PRESENCE / f"{slug}.jsonl"
    return [whole] if whole.exists() else sorted(PRESENCE.glob(f"{slug}.*.jsonl"))


def annotated_books() -> list[Path]:
    """The benchmark novels with a presence annotation under eval/presence/, in name order."""
    slugs = sorted({path.name.split(".")[0] for path in PRESENCE.glob("*.jsonl")})
    return [SHARED / f"{slug}.txt" for slug in slugs if (SHARED / f"{slug}.txt").exists()]


def report(slug: str, seconds: float, embedder: str, passages: Any, worst: int) -> None:
    from eval.boundary import format_boundary, score_book_boundary
    from reveriemem.core.registry import load_book

    book = load_book(slug)
    rows = stored_facts(slug)
    methods = Counter(str(row.get("method") or "") for row in rows)
    score = score_book_boundary(book, rows, passages)
    print(f"\nbook: {book.title} ({slug}; {book.info['body_words']:,} words, {len(book.characters)} focus characters)")
    print(f"memory: built offline in {seconds:.1f} s; facts {len(rows):,} by "
          + ", ".join(f"{m or '(none)'} ({n:,})" for m, n in methods.most_common()) + f"; embedder {embedder}")
    print(f"annotation: {len(passages)} passages"
          f" ({sum(p.private for p in passages)} private narration)")
    for line in format_boundary(score, {c.slug: c.name for c in book.characters}, worst=worst):
        print("  " + line)


def annotated_presence_ceiling(path: Path, characters: Path, slug: str, passages: Any, worst: int) -> None:
    """Score offline evidence units granted from the annotation's presence (the rosters left out)."""
    from eval.boundary import format_boundary, locate_passages, score_book_boundary
    from reveriemem.core.registry import prepare_book
    from reveriemem.models import open_model
    from reveriemem.source_to_memory.facts import assign_visibility, evidence_units, fact_rows
    from reveriemem.source_to_memory.preparation import prepare_scenes
    from reveriemem.source_to_memory.reading import BookReading
    from reveriemem.source_to_memory.visibility import Presence

    book, _ = prepare_book(path, characters, slug=slug)
    reading = BookReading(book)
    spans = prepare_scenes(reading, open_model("none")).scenes
    scenes = [(i + 1, reading.paragraphs[s.first].start, reading.paragraphs[s.last].end) for i, s in enumerate(spans)]
    presences = [Presence(c, scene_id, max(a, p.start), min(b, p.end))
                 for p in locate_passages(book, passages) for scene_id, a, b in scenes
                 if min(b, p.end) > max(a, p.start) for c in p.present]
    speakers = {u.start: u.speaker for u in reading.utterances(spans) if u.speaker}
    facts = evidence_units(book, scenes, speakers, headings=reading.heading_spans)
    assign_visibility(facts, presences, [], [], [c.slug for c in book.characters], deaths=reading.deaths)
    rows = [row for row in fact_rows(book, facts, None) if row["visibility"]]
    score = score_book_boundary(book, rows, passages)
    print(f"\nbook: {book.title} ({slug}); offline evidence units granted from the annotation's presence "
          f"(rosters left out): {len(rows):,} facts")
    for line in format_boundary(score, {c.slug: c.name for c in book.characters}, worst=worst):
        print("  " + line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--book", action="append",
                        help="book file, repeatable (default: every book with an annotation under eval/presence/)")
    parser.add_argument("--characters", help="character file of a single --book (default: the one shipped for its name)")
    parser.add_argument("--annotation", action="append", type=Path,
                        help="presence annotation JSONL, repeatable, in story order "
                             "(default: eval/presence/<book>.jsonl or <book>.*.jsonl)")
    parser.add_argument("--embedder", default="", help="embedding model (default: the project's default)")
    parser.add_argument("--demo-only", action="store_true", help="score only the demo story")
    parser.add_argument("--no-demo", action="store_true", help="leave out the demo story")
    parser.add_argument("--worst", type=int, default=10, help="how many worst passages to list")
    parser.add_argument("--presence-from-annotation", action="store_true",
                        help="grant the offline facts from the annotation's presence instead (the rosters' ceiling)")
    parser.add_argument("--keep-home", action="store_true", help="keep the scratch data home and print its path")
    args = parser.parse_args()

    home = tempfile.mkdtemp(prefix="reveriemem-boundary-")
    os.environ["REVERIEMEM_HOME"] = home
    os.environ.pop("DAGSTER_HOME", None)
    os.environ.pop("REVERIEMEM_LANCEDB_URI", None)
    os.environ["REVERIEMEM_LM"] = "none"

    from eval.boundary import gold_scene_passages, load_presence_annotation
    from reveriemem.core.characters import slugify
    from reveriemem.core.demo import DEMO_SLUG, demo_book_path, demo_characters_path, demo_gold, shipped_character_file
    from reveriemem.core.settings import embedder_spec

    embedder = args.embedder or embedder_spec()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {cpu_model()}, python {platform.python_version()}")
    print("model: none (offline build); leaks count grants by routes other than `direct` to a focus character "
          "not present in the passage (private narration: only its narrator)")
    try:
        books = [Path(b) for b in args.book or []] or annotated_books()
        if args.characters and len(books) != 1:
            raise SystemExit("--characters goes with a single --book.")
        if args.annotation and len(books) != 1:
            raise SystemExit("--annotation goes with a single --book.")
        for path in [] if args.demo_only else books:
            slug = slugify(path.stem)
            characters = Path(args.characters) if args.characters else shipped_character_file(slug)
            if characters is None:
                raise SystemExit(f"No character file is shipped for {slug}; pass --characters FILE.")
            files = args.annotation or default_annotation(slug)
            if not files:
                raise SystemExit(f"No presence annotation for {slug} under {PRESENCE}; pass --annotation FILE.")
            passages = load_presence_annotation(files)
            if args.presence_from_annotation:
                annotated_presence_ceiling(path, characters, slug, passages, args.worst)
                continue
            seconds = build_offline(path, characters, slug, embedder)
            report(slug, seconds, embedder, passages, args.worst)
        if args.presence_from_annotation:
            return
        if args.demo_only or not args.no_demo:
            seconds = build_offline(demo_book_path(), demo_characters_path(), DEMO_SLUG, embedder)
            report(DEMO_SLUG, seconds, embedder, gold_scene_passages(demo_gold()), args.worst)
    finally:
        if args.keep_home:
            print(f"\ndata home kept: {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
