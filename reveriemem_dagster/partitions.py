"""Partitions: books (dynamic) and book x character (multi-partition).

The multi-partition is a full cross product: `dracula|sherlock-holmes`
exists as a key even though Holmes is not in Dracula. Assets partitioned by
book x character check membership and, for a pair that does not belong to
its book, store no rows and say so in the output metadata (`in_book: false`),
so a backfill over the whole grid succeeds without inventing memories. The
CLI and `reveriemem build` only launch the pairs that exist.
"""

from __future__ import annotations

import dagster as dg

from reveriemem.core.storage import PartitionRef

BOOK = "book"
CHARACTER = "character"

book_partitions = dg.DynamicPartitionsDefinition(name=BOOK)
character_partitions = dg.DynamicPartitionsDefinition(name=CHARACTER)
book_character_partitions = dg.MultiPartitionsDefinition({BOOK: book_partitions, CHARACTER: character_partitions})

book_of_pair = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name=BOOK)


def partition_ref(key: str | dg.MultiPartitionKey) -> PartitionRef:
    """A storage partition from a Dagster key: `book`, or `book|character`."""
    if isinstance(key, dg.MultiPartitionKey):
        dims = key.keys_by_dimension
        return PartitionRef(dims[BOOK], dims[CHARACTER])
    if "|" in key:  # dimensions in alphabetical order: book, character
        book, character = key.split("|", 1)
        return PartitionRef(book, character)
    return PartitionRef(key)


def pair_key(book: str, character: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({BOOK: book, CHARACTER: character})
