"""Register and build the six benchmark novels on the deterministic path; print
scene and roster counts per book beside the paper's scene counts.

    python benchmarks/ingest_novels.py [--books DIR] [--lm none]

Runs in a temporary data home (REVERIEMEM_HOME is set to it), so it never
touches your registered books.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

PAPER_SCENES = {"a-study-in-scarlet": 25, "tom-sawyer": 92, "treasure-island": 46,
                "around-the-world-in-80-days": 41, "dracula": 33, "paradise-lost": 38}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--books", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "books"))
    parser.add_argument("--lm", default="none")
    parser.add_argument("--embedder", default="all-MiniLM-L6-v2")
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="reveriemem-bench-")
    os.environ["REVERIEMEM_HOME"] = home
    os.environ.pop("DAGSTER_HOME", None)
    from click.testing import CliRunner

    from reveriemem.core.demo import shipped_character_file
    from reveriemem_dagster.build import build_book
    from reveriemem_dagster.cli import main as cli

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; model: {args.lm}; embedder: {args.embedder}")
    print(f"{'book':32} {'words':>7} {'chars':>5} {'scenes':>6} {'paper':>5} {'present':>7} {'ref':>4} "
          f"{'utter.':>6} {'to focus':>8} {'seconds':>7}")
    for slug in PAPER_SCENES:
        path = Path(args.books) / f"{slug}.txt"
        characters = shipped_character_file(slug)
        result = CliRunner().invoke(cli, ["add-book", str(path), "--characters", str(characters)])
        if result.exit_code != 0:
            print(f"{slug}: registration failed: {result.output.strip()}")
            continue
        started = time.monotonic()
        report = build_book(slug, lm=args.lm, embedder=args.embedder)
        seconds = time.monotonic() - started
        scenes = report.metadata["scenes"]
        rosters = report.metadata["scene_rosters"]
        utterances = report.metadata["utterances"]
        present = int(rosters.get("status_present_active", 0)) + int(rosters.get("status_present_silent", 0))
        from reveriemem.core.registry import load_book

        book = load_book(slug)
        print(f"{slug:32} {book.info['body_words']:>7} {len(book.characters):>5} {scenes['scenes']:>6} "
              f"{PAPER_SCENES[slug]:>5} {present:>7} {int(rosters.get('status_referenced', 0)):>4} "
              f"{utterances['utterances']:>6} {utterances['to_focus_characters']:>8} {seconds:>7.1f}")


if __name__ == "__main__":
    main()
