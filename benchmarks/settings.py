"""Offline scene locations against a hand-made annotation of where each scene opens.

    python benchmarks/settings.py                 # every novel annotated under eval/settings/
    python benchmarks/settings.py --book treasure-island -v

Segments each annotated novel offline (no model, no data home: the scenes a build stores) and compares
each scene's offline location (`heuristic_setting`) with the annotation, matched by the scene's first 80
characters (a scene the segmenter no longer opens there is skipped and counted). A guess is right when,
leaving out articles and possessives, it names the annotated place or one of its accepted variants, or
contains one, or is contained in one ("the cabin" is not "the Hispaniola"). Prints per book and overall:

- precision: right guesses / guesses (a wrong place misleads a reader of the note more than none);
- recall: annotated places found / scenes the annotation gives a place (empty: exposition, a journey).

The annotation (eval/settings/<slug>.jsonl: scene_id, marker, location, accept, why) was written from
the text of each scene's opening before the location rule was changed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
from pathlib import Path

from machine import cpu_model  # benchmarks/machine.py: scripts run as `python benchmarks/<name>.py`

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
BOOKS = REPO.parent / "shared" / "books"
SETTINGS = REPO / "eval" / "settings"
_LEFT_OUT = frozenset(("the", "a", "an", "his", "her", "their", "our", "my", "of", "on", "board", "at", "in"))


def words(place: str) -> str:
    folded = re.sub(r"[^a-z0-9 ]", " ", place.lower().replace("’", "'").replace("'s", ""))
    return " ".join(w for w in folded.split() if w not in _LEFT_OUT)


def names_place(guess: str, place: str, accept: list[str]) -> bool:
    said = words(guess)
    for variant in (place, *accept):
        wanted = words(variant)
        if said and wanted and (said == wanted or f" {wanted} " in f" {said} " or f" {said} " in f" {wanted} "):
            return True
    return False


def score_book(slug: str, verbose: bool) -> tuple[int, int, int, int]:
    from reveriemem.core.registry import prepare_book
    from reveriemem.models import open_model
    from reveriemem.source_to_memory.preparation import prepare_scenes
    from reveriemem.source_to_memory.reading import BookReading

    gold = {}
    for line in (SETTINGS / f"{slug}.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            gold[record["marker"]] = record
    book, _ = prepare_book(BOOKS / f"{slug}.txt", REPO / "reveriemem" / "data" / "characters" / f"{slug}.yaml", slug=slug)
    reading = BookReading(book)
    prepared = prepare_scenes(reading, open_model("none"))
    guessed = right = annotated = unmatched = 0
    for scene, setting in zip(prepared.scenes, prepared.settings):
        start = reading.paragraphs[scene.first].start
        record = gold.get(" ".join(book.text[start: start + 80].split()))
        if record is None:
            unmatched += 1
            continue
        ok = bool(setting.location and record["location"]) and names_place(setting.location, record["location"],
                                                                          record["accept"])
        guessed += bool(setting.location)
        right += ok
        annotated += bool(record["location"])
        if verbose and setting.location and not ok:
            print(f"    scene {record['scene_id']}: {setting.location!r}, annotated {record['location']!r}")
    print(f"  {slug:30} guessed {guessed:3}, right {right:3} (precision {right / max(guessed, 1):.2f}) | annotated "
          f"{annotated:3}, found {right:3} (recall {right / max(annotated, 1):.2f}) | scenes not in the annotation "
          f"{unmatched}")
    return guessed, right, annotated, unmatched


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--book", action="append", help="an annotated novel's slug (default: every one)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each wrong guess")
    args = parser.parse_args()
    slugs = args.book or sorted(p.stem for p in SETTINGS.glob("*.jsonl"))
    from reveriemem.source_to_memory.reading import HEURISTIC_METHOD

    print(f"machine: {cpu_model()} ({os.cpu_count()} cores), Python {platform.python_version()}; model: none; "
          f"locations: {HEURISTIC_METHOD}")
    total = [0, 0, 0, 0]
    for slug in slugs:
        total = [a + b for a, b in zip(total, score_book(slug, args.verbose))]
    guessed, right, annotated, _ = total
    print(f"  all: precision {right / max(guessed, 1):.2f} ({right}/{guessed}), recall {right / max(annotated, 1):.2f} "
          f"({right}/{annotated})")


if __name__ == "__main__":
    main()
