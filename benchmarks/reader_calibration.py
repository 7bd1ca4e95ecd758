"""Time the offline reader's calibration (the `reader_calibration` asset) on a built book.

    python benchmarks/reader_calibration.py BOOK [--character NAME]

Reads the built book from $REVERIEMEM_HOME (build it first: `reveriemem build BOOK --lm none`),
generates each focus character's train items as the asset does (`eval.generate.generate_items`,
part "train"), and runs `eval.methods.reveriemem.calibrate_reader` with the agent the asset uses
(no model; the embedder the book was built with). Prints the machine, the embedder, and per
character the train items available and read, the floors found, the train KBF and the seconds,
then the total. Nothing is written.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

from benchmarks.machine import cpu_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("book")
    parser.add_argument("--character", default="", help="Only this focus character.")
    args = parser.parse_args()

    from eval.generate import generate_items
    from eval.methods.reveriemem import calibrate_reader, calibration_agent
    from reveriemem.core.embeddings import embedder_for_book
    from reveriemem.core.registry import load_book
    from reveriemem.core.storage import MemoryStore, PartitionRef
    from reveriemem.inference.memory_reader import MemoryReader

    book = load_book(args.book)
    store = MemoryStore.for_home()
    embedder = embedder_for_book(args.book)
    facts = store.read("facts", PartitionRef(book.slug)).drop("vector").to_dicts()
    entities = store.read("entities", PartitionRef(book.slug)).to_dicts()
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"book: {book.slug}; model: none (offline reader); embedder: {embedder.name}")
    total = 0.0
    for character in book.characters:
        if args.character and book.character(args.character).slug != character.slug:
            continue
        started = time.perf_counter()
        items = [i for i in generate_items(book, character, facts, entities) if i.provenance.get("part") == "train"]
        reader = MemoryReader(book.slug, character.slug, embedder, store.uri)
        calibration = calibrate_reader(calibration_agent(reader, character), items, "benchmark")
        seconds = time.perf_counter() - started
        total += seconds
        ratio = getattr(calibration, "ratio_floor", None)
        print(f"{character.name}: {len(items)} train items, {calibration.n_train} read; option floor "
              f"{calibration.option_floor}, ratio floor {ratio}, question floor {calibration.question_floor}; "
              f"train KBF {calibration.kbf_train}; {seconds:.1f} s")
    print(f"total: {total:.1f} s")


if __name__ == "__main__":
    main()
