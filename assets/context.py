"""What every asset needs from its partition: the book, its reading, the focus-character guard.

`partition_of(context)` gives an asset its `BookPartition`: the registered
book of the run's partition (book, or book x character), the deterministic
`BookReading` of it (computed on first use) and, for a book x character
partition, the focus character. The multi-partition is a full cross product,
so a pair whose character is not a focus character of the book exists:
`BookPartition.outside_book(context)` says so in the log and an asset then
stores no rows with metadata `in_book: False`.

`book_text` is the registered book as an external asset: its data version
(a hash of the text, body offsets and focus characters) is observed when a
book is registered or built, and the book-level assets depend on it, so a
book registered again with other content makes its memory stale in Dagster.

`CODE_VERSION` is each asset's code version. It carries the version of every
offline step the memory is made with (scenes, rosters, dialogue, aliases,
deaths, entities, relation extraction, evidence units, visibility, episodic
digest, emotions, patterns) and of the agent's reader its calibration reads
with, so a release that changes one of them makes a built book stale in
Dagster and `reveriemem build` redoes it instead of calling it up to date;
bump its leading number when anything else an asset computes changes.
(No `from __future__ import annotations`: asset modules pass `context` annotations to Dagster.)
"""

from dataclasses import dataclass
from functools import cached_property

import dagster as dg

from reveriemem.core.characters import Character
from reveriemem.core.registry import Book, load_book
from reveriemem.core.storage import PartitionRef
from reveriemem.inference.calibration import READER_VERSION
from reveriemem.models import ModelHandle
from reveriemem.source_to_memory.deaths import DEATH_VERSION
from reveriemem.source_to_memory.emotions import EMOTION_VERSION
from reveriemem.source_to_memory.entities import OFFLINE_ENTITY_METHOD
from reveriemem.source_to_memory.episodic import DIGEST_VERSION
from reveriemem.source_to_memory.facts import EVIDENCE_METHOD
from reveriemem.source_to_memory.patterns import PATTERN_VERSION
from reveriemem.source_to_memory.reading import HEURISTIC_METHOD, ROSTER_METHOD, BookReading
from reveriemem.source_to_memory.semantic import EXTRACTION_VERSION
from reveriemem.source_to_memory.visibility import VISIBILITY_VERSION
from reveriemem_dagster.partitions import book_partitions, partition_ref

# 5: facts known to nobody are kept. 4: the readers' versions are part of it. 3: rosters v5. 2: scenes v2
OFFLINE_VERSIONS = (HEURISTIC_METHOD, ROSTER_METHOD, DEATH_VERSION, OFFLINE_ENTITY_METHOD, EXTRACTION_VERSION,
                    EVIDENCE_METHOD, VISIBILITY_VERSION, DIGEST_VERSION, EMOTION_VERSION, PATTERN_VERSION, READER_VERSION)
CODE_VERSION = ";".join(("5", *OFFLINE_VERSIONS))

# The op tag of every asset that asks the model: where several steps of a run are ready at once, Dagster runs
# these first, so their calls go out before the rules steps beside them (a character's scenes, emotions).
ASKS_MODEL = {"dagster/priority": "1"}

book_text = dg.AssetSpec(
    "book_text", partitions_def=book_partitions, group_name="source",
    description="A registered book (text, body offsets, focus characters); observed at registration and build.",
)


@dataclass
class BookPartition:
    """The book (and focus character) an asset's partition stands for."""

    ref: PartitionRef
    book: Book

    @cached_property
    def reading(self) -> BookReading:
        return BookReading(self.book)

    @property
    def slug(self) -> str:
        """The partition's character slug ('' for a book partition)."""
        return self.ref.character or ""

    @property
    def in_book(self) -> bool:
        return self.slug in {c.slug for c in self.book.characters}

    @property
    def character(self) -> Character:
        """The partition's focus character (only for a pair inside its book)."""
        return self.book.character(self.slug)

    def outside_book(self, context: dg.AssetExecutionContext) -> bool:
        """True (and logged) when the pair's character is not a focus character of the book."""
        if self.in_book:
            return False
        context.log.info(f"{self.slug} is not a focus character of {self.ref.book}; storing no rows.")
        return True


def partition_of(context: dg.AssetExecutionContext) -> BookPartition:
    """The registered book (and character) of the asset's partition."""
    ref = partition_ref(context.partition_key)
    return BookPartition(ref, load_book(ref.book))


class ModelUsage:
    """The model usage of one asset: `ModelUsage(handle)` before the work, `.metadata()` after it."""

    def __init__(self, handle: ModelHandle):
        self.handle = handle
        self.before = handle.usage.summary()

    def metadata(self) -> dict:
        before, after = self.before, self.handle.usage.summary()
        return {
            "model": after.get("model", ""),
            "model_calls": int(after.get("calls", 0)) - int(before.get("calls", 0)),
            "prompt_tokens": int(after.get("prompt_tokens", 0)) - int(before.get("prompt_tokens", 0)),
            "completion_tokens": int(after.get("completion_tokens", 0)) - int(before.get("completion_tokens", 0)),
            "model_latency_s": round(float(after.get("latency_s", 0.0)) - float(before.get("latency_s", 0.0)), 3),
        }
