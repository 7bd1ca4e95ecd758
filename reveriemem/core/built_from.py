"""Which registration of a book its stored memory was built from.

`book_version(book)` is a hash of what the assets read from a registered book
(its text, body offsets and focus characters): the data version Dagster
observes on `book_text`, and what a build manifest records as `book_version`.
A book removed and registered again with other content keeps the rows of its
last build until it is rebuilt; `registered_since_built` compares the two
versions so that asking that memory is refused instead of answering from
another text (a manifest from before this was recorded is taken as current).
"""

from __future__ import annotations

import hashlib
import json

from reveriemem.core.registry import Book


def book_version(book: Book) -> str:
    """The data version of a registered book: a hash of what the assets read from it."""
    digest = hashlib.sha256(book.text.encode("utf-8"))
    digest.update(f"|{book.body_start}|{book.body_end}|".encode())
    records = [c.to_record() for c in book.characters]
    digest.update(json.dumps(records, sort_keys=True, default=str).encode("utf-8"))
    return digest.hexdigest()[:24]


def registered_since_built(book: Book, built_version: str) -> str | None:
    """Why `book`'s stored memory cannot be asked when it was built from another registration, else None."""
    if not built_version or built_version == book_version(book):
        return None
    return f"{book.slug} was registered again since it was built; run: reveriemem build {book.slug}"
