"""The orchestration layer: Dagster definitions, partitions, resources, IO managers, the build and the CLI.

For scripts: `add_book(path)` registers a book, `build(book)` materialises its memory (the same runs as
`reveriemem build`); then `reveriemem.ask(...)` talks with a character.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reveriemem.core.registry import Book

__all__ = ["add_book", "build"]


def add_book(path: str | Path, characters: str | Path | None = None, name: str | None = None) -> Book:
    """Register a book file (the character file defaults to the one shipped for the benchmark novels)."""
    from reveriemem_dagster.instance import add_book as register

    book, _warnings = register(Path(path), Path(characters) if characters else None, name)
    return book


def build(book: str, *, lm: str = "", embedder: str = "", force: bool = False, retry_failed: bool = False) -> Any:
    """Materialise a registered book's whole memory, skipping what is up to date; returns the build report."""
    from reveriemem_dagster.build import build_book

    return build_book(book, lm=lm, embedder=embedder, force=force, retry_failed=retry_failed)
