"""A conversation's session: one book's built memory, one character (by any alias), one model to speak with.

The one way the CLI (`ask`, `chat`), the public API (`reveriemem.ask`) and the benchmarks open an agent.
"""

from __future__ import annotations

from dataclasses import dataclass

from reveriemem.core.characters import Character
from reveriemem.core.embeddings import embedder_for_book
from reveriemem.core.registry import Book, load_book
from reveriemem.inference.memory_reader import MemoryReader, cut_offset
from reveriemem.inference.module import ReverieInference
from reveriemem.models import ModelHandle, open_model


@dataclass
class Session:
    book: Book
    character: Character
    agent: ReverieInference  # the one agent module, speaking as `character`
    handle: ModelHandle
    as_of: int | None


def open_session(book_slug: str, character_name: str, *, lm: str = "", embedder: str = "",
                 as_of_scene: int | None = None, as_of_chapter: int | None = None, rounds: int = 3) -> Session:
    """Load a book's built memory for one character (named by any alias) and a model to speak with.

    The embedder is the one the book's build manifest names; naming another is an `EmbedderMismatchError`.
    The agent loads the compiled program `reveriemem.inference.compiled.compiled_path()` names, if any.
    """
    book = load_book(book_slug)
    character = book.character(character_name)
    embedding = embedder_for_book(book.slug, embedder, registered=book)  # refused when registered again since
    reader = MemoryReader(book.slug, character.slug, embedding)
    as_of = None
    if as_of_scene is not None or as_of_chapter is not None:
        as_of = cut_offset(book.slug, scene=as_of_scene, chapter=as_of_chapter)
    handle = open_model(lm or None)
    agent = ReverieInference(reader, handle, character, max_rounds=rounds)
    return Session(book, character, agent, handle, as_of)
