"""The characters a server offers, the sessions it keeps warm, and the state of each conversation.

A served model is `book/character` (the character's slug; any alias is accepted on the way in) of a
book whose memory is built. Sessions are opened through `reveriemem.inference.session.open_session`
once per (book, character, cut point) and kept; a session's agent answers one turn at a time (its
lock), so conversations with different characters run side by side and those with one character
queue. HTTP is stateless, so a conversation's emotional state is found again by the conversation
itself: after a turn the state is kept under a digest of the whole exchange (every message and the
reply); the next request, which repeats that exchange and adds one user message, finds it. A
conversation never seen starts fresh, from the character's recorded emotion at the cut point.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from reveriemem.core.built_from import registered_since_built
from reveriemem.core.errors import RegistryError
from reveriemem.core.registry import Book, list_books, load_book, registered_slug
from reveriemem.core.storage import MemoryStore
from reveriemem.inference.emotion_track import AgentState
from reveriemem.inference.session import Session, open_session
from reveriemem.inference.trace import Turn

MAX_CONVERSATIONS = 10_000  # conversation states kept, least recently used dropped first


@dataclass(frozen=True)
class CutPoint:
    """`as_of` of a request: the end of a scene or of a chapter (both None: the whole book)."""

    scene: int | None = None
    chapter: int | None = None

    def label(self) -> str:
        return f"scene:{self.scene}" if self.scene is not None else (
            f"chapter:{self.chapter}" if self.chapter is not None else "end")


@dataclass(frozen=True)
class ServedModel:
    """One `book/character` pair a server offers."""

    book: str
    character: str  # slug
    name: str
    aliases: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.book}/{self.character}"


def built_books(store: MemoryStore | None = None, stale: dict[str, str] | None = None) -> list[Book]:
    """The registered books whose memory has been built (a build manifest exists) from their registration.

    A book registered again since its build is left out, and why is put in `stale` (slug -> sentence).
    """
    store = store or MemoryStore.for_home()
    books = []
    for slug in list_books():
        manifest = store.manifest(slug)
        if manifest is None:
            continue
        book = load_book(slug)
        note = registered_since_built(book, manifest.book_version)
        if note is None:
            books.append(book)
        elif stale is not None:
            stale[slug] = note
    return books


def served_models(store: MemoryStore | None = None, stale: dict[str, str] | None = None) -> list[ServedModel]:
    """Every `book/character` pair of the built books, in registry order (see `built_books` for `stale`)."""
    return [ServedModel(book.slug, c.slug, c.name, tuple(c.aliases))
            for book in built_books(store, stale) for c in book.characters]


def resolve_model(model: str) -> ServedModel:
    """The pair a `book/character` string names (the character by slug, name or alias).

    Raises `RegistryError` when the book is not built or the character is not one of its focus characters.
    """
    book_slug, sep, character_name = model.strip().partition("/")
    if not sep or not book_slug or not character_name:
        raise RegistryError(f"The model {model!r} is not of the form 'book/character' (see GET /v1/models).")
    stale: dict[str, str] = {}
    books = {book.slug: book for book in built_books(stale=stale)}
    # "A Study in Scarlet/Watson" as "a-study-in-scarlet/Watson"; a title several built books share is refused
    book_slug = registered_slug(book_slug, books, {slug: book.title for slug, book in books.items()})
    if book_slug in stale:
        raise RegistryError(f"{stale[book_slug]}.")
    if book_slug not in books:
        built = ", ".join(sorted(books)) or "none"
        raise RegistryError(f"No built book is called {book_slug!r} (built: {built}).")
    character = books[book_slug].character(character_name)
    return ServedModel(book_slug, character.slug, character.name, tuple(character.aliases))


def conversation_key(model: str, cut: CutPoint, messages: Sequence[tuple[str, str]]) -> str:
    """A digest of a conversation so far: the model, the cut point and every (role, text), spacing folded."""
    payload = [model, cut.label(), [[role, " ".join(text.split())] for role, text in messages]]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()


@dataclass
class _Warm:
    session: Session
    lock: threading.Lock = field(default_factory=threading.Lock)


class SessionPool:
    """Open sessions per (book, character, cut point), and the emotional state of each conversation."""

    def __init__(self, *, lm: str = "none", embedder: str = "", rounds: int = 3,
                 max_conversations: int = MAX_CONVERSATIONS) -> None:
        self.lm = lm
        self.embedder = embedder
        self.rounds = rounds
        self.max_conversations = max_conversations
        self._sessions: dict[tuple[str, str, CutPoint], _Warm] = {}
        self._opening: dict[tuple[str, str, CutPoint], threading.Lock] = {}
        self._lock = threading.Lock()
        self._states: OrderedDict[str, AgentState] = OrderedDict()

    def _warm(self, model: ServedModel, cut: CutPoint) -> _Warm:
        key = (model.book, model.character, cut)
        with self._lock:
            warm = self._sessions.get(key)
            if warm is not None:
                return warm
            opening = self._opening.setdefault(key, threading.Lock())
        with opening:  # one opening per key; other keys open meanwhile
            with self._lock:
                if key in self._sessions:
                    return self._sessions[key]
            session = open_session(model.book, model.character, lm=self.lm, embedder=self.embedder,
                                   as_of_scene=cut.scene, as_of_chapter=cut.chapter, rounds=self.rounds)
            with self._lock:
                self._sessions[key] = _Warm(session)
                self._opening.pop(key, None)
                return self._sessions[key]

    def session(self, model: ServedModel, cut: CutPoint) -> Session:
        """The warm session of a pair at a cut point, opened on first use (raises for a bad cut point)."""
        return self._warm(model, cut).session

    def reply(self, model: ServedModel, cut: CutPoint, history: Sequence[tuple[str, str]], question: str) -> Turn:
        """One turn of a conversation whose earlier messages are `history` ((role, text), role user or assistant).

        The turn starts from the state this conversation reached (when its exchange so far was seen), else fresh.
        """
        warm = self._warm(model, cut)
        before = conversation_key(model.id, cut, history)
        with self._lock:
            state = self._states.get(before)
        name = warm.session.character.name
        lines = [("You" if role == "user" else name, text) for role, text in history]
        with warm.lock:
            agent = warm.session.agent
            agent.state = None  # never continue another conversation's state
            turn = agent.respond(question, history=lines, state=state, as_of=warm.session.as_of)
        after = conversation_key(model.id, cut, [*history, ("user", question), ("assistant", turn.reply)])
        with self._lock:
            self._states[after] = turn.state
            self._states.move_to_end(after)
            while len(self._states) > self.max_conversations:
                self._states.popitem(last=False)
        return turn

    def continued(self, model: ServedModel, cut: CutPoint, history: Sequence[tuple[str, str]]) -> bool:
        """Whether the state of this conversation so far is held (its next turn continues it)."""
        with self._lock:
            return conversation_key(model.id, cut, history) in self._states
