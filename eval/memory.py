"""What evaluation reads of a built memory: the book's facts and entities, through the storage layer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reveriemem.core.errors import StorageError
from reveriemem.core.storage import MemoryStore, PartitionRef
from reveriemem.inference.offline_reader import fact_passage


@dataclass
class BookMemory:
    book: str
    facts: list[dict[str, Any]]  # rows of `facts` without vectors, in story order
    entities: list[dict[str, Any]]


def load_book_memory(book: str, uri: str | None = None, store: MemoryStore | None = None) -> BookMemory:
    """The stored facts and entities of `book` in `store` (default: the data home's; `uri` names another LanceDB);
    one sentence saying what to run when not built."""
    part = PartitionRef(book)
    store = store or MemoryStore.for_home(lancedb=uri)
    try:
        facts = store.read("facts", part)
        entities = store.read("entities", part)
    except StorageError as exc:
        raise StorageError(f"The memory of {book} is not built yet; run `reveriemem build {book}` ({exc})") from exc
    if facts.is_empty():
        raise StorageError(f"The memory of {book} holds no facts; run `reveriemem build {book}`.")
    rows = facts.drop("vector").sort("source_start").to_dicts() if "vector" in facts.columns else \
        facts.sort("source_start").to_dicts()
    return BookMemory(book, rows, entities.to_dicts())


def passage_of(row: dict[str, Any]) -> str:
    """The text a fact is read by (the library's `fact_passage`: its statement and its source sentence)."""
    return fact_passage(row)
