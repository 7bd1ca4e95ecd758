"""Roster accuracy and scene-boundary precision/recall against the demo gold annotation.

    python benchmarks/roster_accuracy.py                 # deterministic path
    python benchmarks/roster_accuracy.py --lm bundled    # also the bundled SmolLM2-135M
    python benchmarks/roster_accuracy.py --lm none --lm openai/gpt-4o-mini

Every figure is printed with the method (model name or heuristic version) that produced it.
"""

from __future__ import annotations

import argparse
import platform
import time

from eval.rosters import score_rosters
from reveriemem.core.demo import DEMO_SLUG, demo_book_path, demo_characters_path, demo_gold
from reveriemem.core.registry import prepare_book
from reveriemem.models import open_model
from reveriemem.source_to_memory.reading import BookReading


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lm", action="append", help="model spec(s); default: none (deterministic)")
    parser.add_argument("--errors", action="store_true", help="list every roster error")
    args = parser.parse_args()
    book, _ = prepare_book(demo_book_path(), demo_characters_path(), slug=DEMO_SLUG)
    gold = demo_gold()
    print(f"machine: {platform.machine()} {platform.processor() or ''}, python {platform.python_version()}")
    print(f"book: {DEMO_SLUG} ({book.info['body_words']} words, {len(gold['scenes'])} gold scenes, "
          f"{len(book.characters)} characters)")
    for spec in args.lm or ["none"]:
        with open_model(spec) as handle:  # answers already in the data home's model cache are not asked again
            started = time.monotonic()
            score = score_rosters(BookReading(book), gold, handle)
            seconds = time.monotonic() - started
            usage = handle.usage.summary()
        print(f"method: {score.method}")
        print(f"  roster accuracy: {score.accuracy:.3f} ({score.correct}/{score.total})")
        print(f"  scene boundaries: precision {score.boundary_precision:.2f}, recall {score.boundary_recall:.2f}")
        print(f"  model calls {usage.get('calls', 0)}, prompt tokens {usage.get('prompt_tokens', 0)}, "
              f"completion tokens {usage.get('completion_tokens', 0)}, wall {seconds:.1f}s")
        if args.errors:
            for error in score.errors:
                print(f"    {error}")


if __name__ == "__main__":
    main()
