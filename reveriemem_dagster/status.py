"""`reveriemem books`: per registered book, what is built, with row counts per layer and what built it.

Read from the data home only (the build manifest `<home>/manifests/<book>.json`
and the stored tables through `MemoryStore`), so it needs neither Dagster nor
a model and answers in about a second.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reveriemem.core.built_from import registered_since_built
from reveriemem.core.registry import Book, load_book
from reveriemem.core.storage import MemoryStore, PartitionRef

# The layers in build order; the per-character ones are summed over the book's focus characters.
BOOK_LAYERS = ("scenes", "utterances", "scene_rosters", "scene_graphs", "entities", "memberships", "facts",
               "dialogue_records")
CHARACTER_LAYERS = ("character_scenes", "episodes", "emotion_transitions", "personality_patterns",
                    "reader_calibration", "kbf_items")


@dataclass
class BookStatus:
    book: Book
    rows: dict[str, int] = field(default_factory=dict)  # layer -> stored rows (absent: never stored)
    characters_built: dict[str, int] = field(default_factory=dict)  # layer -> characters with rows stored
    model: str | None = None
    embedder: str | None = None
    dim: int | None = None
    built_at: str | None = None
    stale: str | None = None  # why the stored memory is not of the book as registered now (registered again)

    @property
    def built(self) -> bool:
        return bool(self.rows)

    def lines(self) -> list[str]:
        book = self.book
        head = (f"{book.slug}: {book.title}, {book.info.get('body_words', '?')} words, "
                f"{len(book.characters)} focus characters ({', '.join(c.name for c in book.characters)})")
        if not self.built:
            return [head, f"  not built yet (run: reveriemem build {book.slug})"]
        if self.built_at is None:  # rows of an unfinished build, stored before any vectors recorded what built them
            out = [head, f"  not built yet (run: reveriemem build {book.slug}); an unfinished build stored:"]
        elif self.stale is not None:
            out = [head, f"  needs a rebuild: {self.stale} (built {self.built_at} with model {self.model or '?'})"]
        else:
            out = [head, f"  built {self.built_at} with model {self.model or '?'}, embedder {self.embedder or '?'}"
                         + (f" ({self.dim}-d)" if self.dim else "")]
        n = len(book.characters)
        layers = [f"{layer} {self.rows[layer]}" for layer in BOOK_LAYERS if layer in self.rows]
        out.append("  book: " + (", ".join(layers) or "nothing stored"))
        per = [f"{layer} {self.rows[layer]}" + ("" if self.characters_built[layer] == n
                                                 else f" ({self.characters_built[layer]}/{n} characters)")
               for layer in CHARACTER_LAYERS if layer in self.rows]
        out.append("  characters: " + (", ".join(per) or "nothing stored"))
        return out


def book_status(slug: str, store: MemoryStore | None = None) -> BookStatus:
    """What the data home holds of `slug`'s memory."""
    store = store or MemoryStore.for_home()
    book = load_book(slug)
    status = BookStatus(book)
    for layer in BOOK_LAYERS:
        count = store.stored_rows(layer, PartitionRef(book.slug))
        if count is not None:
            status.rows[layer] = count
    for layer in CHARACTER_LAYERS:
        counts = [store.stored_rows(layer, PartitionRef(book.slug, c.slug)) for c in book.characters]
        stored = [c for c in counts if c is not None]
        if stored:
            status.rows[layer] = sum(stored)
            status.characters_built[layer] = len(stored)
    manifest = store.manifest(book.slug)
    if manifest is not None:
        status.model, status.embedder, status.dim, status.built_at = (
            manifest.model, manifest.embedder, manifest.dim, manifest.built_at[:19].replace("T", " "))
        status.stale = registered_since_built(book, manifest.book_version)
    return status
