"""ReverieMem: perspective-bounded memory for book-based character agents.

The public API for scripts, without reaching into the phases' modules:

    import reveriemem
    book = reveriemem.open_book("the-lamplighters-ledger")          # a registered book
    turn = reveriemem.ask("the-lamplighters-ledger", "Mara", "Which cask did you fill the Horn Lamp from?")
    print(turn.reply, [f.fact_id for f in turn.trace.facts])
    session = reveriemem.open_session("the-lamplighters-ledger", "Tobin", lm="none")  # for several turns

Registering and building a memory is orchestration, so it lives one layer up (this package never
imports Dagster): `reveriemem_dagster.add_book(path)` and `reveriemem_dagster.build(book)`, or the
`reveriemem add-book` / `reveriemem build` commands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reveriemem.core.registry import Book
    from reveriemem.inference.session import Session
    from reveriemem.inference.trace import Turn

__version__ = "0.1.0"
__all__ = ["ask", "open_book", "open_session"]


def open_book(book: str) -> Book:
    """A registered book (text, offsets, focus characters) by its slug."""
    from reveriemem.core.registry import load_book

    return load_book(book)


def open_session(book: str, character: str, *, lm: str = "", as_of_scene: int | None = None,
                 as_of_chapter: int | None = None) -> Session:
    """An agent for one character of a built book (any alias), bounded to what it could know.

    `lm` is a model string (`none` for the offline path); `as_of_*` bounds it to a point of the story.
    """
    from reveriemem.inference.session import open_session as _open

    return _open(book, character, lm=lm, as_of_scene=as_of_scene, as_of_chapter=as_of_chapter)


def ask(book: str, character: str, question: str, *, lm: str = "", as_of_scene: int | None = None,
        as_of_chapter: int | None = None) -> Turn:
    """One in-character reply with its trace (anchored scenes, facts with routes and offsets, calls)."""
    session = open_session(book, character, lm=lm, as_of_scene=as_of_scene, as_of_chapter=as_of_chapter)
    return session.agent.respond(question, as_of=session.as_of)
