"""What the six KBF-QA reference methods share.

- Chunks: the book's text cut into passages of at most about `CHUNK_WORDS` words
  along paragraph breaks (a longer paragraph is cut between sentences), so a
  chunk fits all-MiniLM-L6-v2's 256-token window;
  a chunk never crosses the end of the span it was cut from, so chunks of a
  scene stay inside the scene.
- Chunk vectors: embedded once with `ctx.embedder` and cached in `ctx.work_dir`
  as `<tag>-<embedder>-<key>.npz`, the key hashing the embedder's name, the
  book's text and the chunk offsets; a second `prepare` loads them.
- Dense top-k (`TOP_K` = 8) by cosine similarity of normalised vectors. A
  multiple-choice item is searched with four queries, the question followed by
  each option A-D in turn, and a chunk scores its best similarity over them
  (on the train part of the generated A Study in Scarlet items, with
  all-MiniLM-L6-v2, the evidence chunk is in the top 8 for 139 of 233 items,
  against 126 for one query of the question with all four options).
- Answering. With a model (`ctx.handle.lm` set): the method's context text goes
  to `dspy_programs.kbfqa.AnswerInCharacter` through `run_program`; the reply is
  returned as written (`Answer.choice` None, matched later by `eval.matching`)
  with the calls and tokens this item used (counted by a usage listener that
  keeps only this thread's calls, so preparation and other items never count).
  Without one: the offline option reader (`reveriemem.inference.offline_reader.read_options`)
  reads the options against the method's context passages (rarity from the
  whole book's chunks) and the best-supported option is chosen; the method
  refuses (E) only when that support is below `OFFLINE_FLOOR`. An unbounded
  reader commits whenever it finds support, which is the behaviour the paper
  reports for the retrieval baselines.

`Answer.detail["variant"]` is `model:<name>` or `heuristic:<method>-reader-v1`;
`detail["chunks"]` lists the ids of the chunks the method put in its context.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dspy_programs.kbfqa import answer_program
from eval.items import ANSWER_LETTERS, REFUSAL_LETTER, REFUSAL_OPTION, KBFItem, render_question
from eval.methods.base import Answer, MethodContext
from reveriemem.core.registry import Book
from reveriemem.core.text import normalise_space, sentences_of, split_paragraphs
from reveriemem.inference.offline_reader import OFFLINE_FLOOR, Rarity, read_options
from reveriemem.models import ModelCall, UsageTotals, run_program
from reveriemem.models.usage import add_listener, remove_listener

CHUNK_WORDS = 200  # most words per chunk (a single longer sentence stays whole)
TOP_K = 8  # passages a retrieval method puts in its context


@dataclass(frozen=True)
class Chunk:
    id: int  # index in the method's chunk list
    start: int  # book offsets
    end: int
    text: str  # whitespace normalised
    scene_id: int | None = None


# -- chunks --------------------------------------------------------------------


def chunk_spans(text: str, start: int, end: int, words: int = CHUNK_WORDS) -> list[tuple[int, int]]:
    """Offsets of chunks of at most ~`words` words of `text[start:end]`, cut at paragraph (else sentence) breaks.

    Paragraphs are gathered while the chunk stays within `words`; a paragraph longer than
    that is cut between sentences; a short tail joins the chunk before it.
    """
    pieces: list[tuple[int, int, int]] = []  # start, end, words
    for paragraph in split_paragraphs(text, start, end):
        if paragraph.words <= words:
            pieces.append((paragraph.start, paragraph.end, paragraph.words))
        else:
            pieces += [(s.start, s.end, len(s.text.split())) for s in sentences_of(paragraph)]
    groups: list[list[tuple[int, int, int]]] = []
    size = 0
    for piece in pieces:
        if not groups or size + piece[2] > words:
            groups.append([])
            size = 0
        groups[-1].append(piece)
        size += piece[2]
    if len(groups) > 1 and size < words // 4:
        groups[-2] += groups.pop()
    return [(group[0][0], group[-1][1]) for group in groups]


def book_chunks(book: Book, words: int = CHUNK_WORDS) -> list[Chunk]:
    """The whole story text (the body, without the edition's framing) in chunks."""
    return [Chunk(i, a, b, normalise_space(book.text[a:b]))
            for i, (a, b) in enumerate(chunk_spans(book.text, book.body_start, book.body_end, words))]


def book_rarity(chunks: Sequence[Chunk]) -> Rarity:
    return Rarity(c.text for c in chunks)


# -- vectors -------------------------------------------------------------------


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", name).strip("_") or "embedder"


def text_key(ctx: MethodContext, spans: Sequence[tuple[int, int]], *extra: str) -> str:
    """A digest of the embedder's name, the book's text, the chunk offsets and anything else given."""
    digest = hashlib.sha256()
    digest.update(ctx.embedder.name.encode())
    digest.update(hashlib.sha256(ctx.book.text.encode()).digest())
    digest.update(np.asarray(spans, dtype=np.int64).tobytes())
    for part in extra:
        digest.update(part.encode())
    return digest.hexdigest()[:16]


def vectors_path(ctx: MethodContext, tag: str, key: str) -> Path:
    return ctx.work_dir / f"{tag}-{_safe(ctx.embedder.name)}-{key}.npz"


def load_vectors(path: Path, rows: int) -> np.ndarray | None:
    """Vectors saved at `path`, or None when absent or not `rows` long."""
    if not path.is_file():
        return None
    with np.load(path) as data:
        vectors = data["vectors"]
    return vectors if vectors.shape[0] == rows else None


def save_vectors(path: Path, vectors: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, staging = tempfile.mkstemp(prefix=".vectors-", suffix=".npz", dir=path.parent)
    os.close(handle)
    try:
        np.savez(staging, vectors=vectors)
        os.replace(staging, path)
    except BaseException:
        os.unlink(staging)
        raise


def embed_texts(ctx: MethodContext, texts: Sequence[str]) -> np.ndarray:
    if not texts:
        return np.zeros((0, 1), dtype=np.float32)
    return np.asarray(ctx.embedder.embed(list(texts)), dtype=np.float32)


def cached_vectors(ctx: MethodContext, tag: str, texts: Sequence[str], key: str) -> np.ndarray:
    """Vectors of `texts`, from `work_dir/<tag>-<embedder>-<key>.npz` when present, else embedded and saved."""
    path = vectors_path(ctx, tag, key)
    vectors = load_vectors(path, len(texts))
    if vectors is None:
        vectors = embed_texts(ctx, texts)
        save_vectors(path, vectors)
    return vectors


def chunk_vectors(ctx: MethodContext, chunks: Sequence[Chunk], tag: str = "chunks") -> np.ndarray:
    spans = [(c.start, c.end) for c in chunks]
    return cached_vectors(ctx, tag, [c.text for c in chunks], text_key(ctx, spans, tag))


def query_texts(item: KBFItem) -> list[str]:
    """What a retriever searches with: the question paired with each answer option A-D in turn."""
    return [f"{item.question} {item.options[letter]}" for letter in ANSWER_LETTERS]


def embed_queries(ctx: MethodContext, texts: Sequence[str]) -> np.ndarray:
    return np.asarray(ctx.embedder.embed(list(texts)), dtype=np.float32)


def top_k(queries: np.ndarray, vectors: np.ndarray, k: int = TOP_K, among: Sequence[int] | None = None,
          exclude: set[int] | frozenset[int] = frozenset()) -> list[tuple[int, float]]:
    """The `k` rows of `vectors` nearest any of `queries` (one vector or a row per query), as (row, score).

    A row scores its best cosine similarity over the queries; ties go to the earlier row.
    """
    rows = np.arange(len(vectors)) if among is None else np.asarray(list(among), dtype=np.int64)
    if exclude:
        rows = rows[~np.isin(rows, np.fromiter(exclude, dtype=np.int64))]
    if rows.size == 0:
        return []
    scores = (vectors[rows] @ np.atleast_2d(queries).T).max(axis=1)
    order = np.argsort(-scores, kind="stable")[:k]
    return [(int(rows[i]), float(scores[i])) for i in order]


def dense_search(ctx: MethodContext, item: KBFItem, vectors: np.ndarray, k: int = TOP_K,
                 among: Sequence[int] | None = None) -> list[tuple[int, float]]:
    """Dense top-k for an item: its four question-with-option queries against `vectors`."""
    return top_k(embed_queries(ctx, query_texts(item)), vectors, k, among)


# -- the character -------------------------------------------------------------


def profile(book: Book, name: str) -> str:
    """The character's profile from the book's character file: names, descriptors, gender, book."""
    character = book.character(name)
    lines = [f"Name: {character.name}", f"Book: {book.title}"]
    aliases = [a for a in character.aliases if a != character.name]
    if aliases:
        lines.append(f"Also called: {', '.join(aliases)}")
    if character.descriptors:
        lines.append(f"Described as: {', '.join(character.descriptors)}")
    if character.gender and character.gender != "other":
        lines.append(f"Gender: {character.gender}")
    return "\n".join(lines)


def context_text(passages: Sequence[str], head: str | None = None) -> str:
    """A profile (or notes) followed by numbered passages."""
    body = "\n\n".join(f"[{n}] {p}" for n, p in enumerate(passages, start=1))
    return "\n\n".join(part for part in (head, body) if part)


# -- usage per item --------------------------------------------------------------


@contextmanager
def item_usage(ctx: MethodContext) -> Iterator[UsageTotals]:
    """Totals of the model calls made by this thread through `ctx.handle` while the block runs."""
    totals = UsageTotals()
    thread = threading.get_ident()
    model = ctx.handle.usage.model

    def listen(call: ModelCall) -> None:
        if threading.get_ident() == thread and call.model == model:
            totals.add(call)

    add_listener(listen)
    try:
        yield totals
    finally:
        remove_listener(listen)


# -- answering -------------------------------------------------------------------


def refusal() -> str:
    return f"{REFUSAL_OPTION} ({REFUSAL_LETTER})"


class BaselineMethod:
    """The shared shape of a reference method: prepare once, then answer item by item.

    A subclass sets `name` and implements `_prepare()` and `_respond(item)`;
    `answer` wraps `_respond` with preparation, timing, per-item model usage and
    the variant label.
    """

    name = ""

    def __init__(self, ctx: MethodContext):
        self.ctx = ctx
        self._ready = False
        self._rarity: Rarity | None = None

    @property
    def offline(self) -> bool:
        return self.ctx.handle.lm is None

    @property
    def variant(self) -> str:
        return f"heuristic:{self.name}-reader-v1" if self.offline else f"model:{self.ctx.handle.name}"

    @property
    def rarity(self) -> Rarity:
        if self._rarity is None:
            self._rarity = book_rarity(book_chunks(self.ctx.book))
        return self._rarity

    def prepare(self) -> None:
        if not self._ready:
            self._prepare()
            self._ready = True

    def _prepare(self) -> None:
        pass

    def answer(self, item: KBFItem) -> Answer:
        self.prepare()  # once per book; its time and model calls are not the item's
        started = time.perf_counter()
        with item_usage(self.ctx) as usage:
            answer = self._respond(item)
        answer.calls = usage.calls
        answer.prompt_tokens = usage.prompt_tokens
        answer.completion_tokens = usage.completion_tokens
        if usage.cached_calls:
            answer.detail["cached_calls"] = usage.cached_calls
        answer.detail = {"variant": self.variant, **answer.detail}
        answer.seconds = time.perf_counter() - started
        return answer

    def _respond(self, item: KBFItem) -> Answer:
        raise NotImplementedError

    def reply_from(self, item: KBFItem, passages: Sequence[str], head: str | None = None,
                   detail: dict[str, Any] | None = None, floor: float = OFFLINE_FLOOR) -> Answer:
        """Answer from a context: the model writes the reply, or the offline reader chooses."""
        detail = dict(detail or {})
        character = self.ctx.book.character(item.character)
        if not self.offline:
            prediction = run_program(self.ctx.handle, answer_program(), character=character.name,
                                     context=context_text(passages, head), question=render_question(item))
            return Answer(reply=str(prediction.reply), detail=detail)
        reading = read_options(item.question, answer_options(item), [*passages, *([head] if head else [])],
                               self.rarity, character.surface_forms, floor)
        detail.update(support=round(reading.support, 4), best=reading.best)
        return offline_answer(item, reading.choice or REFUSAL_LETTER, detail)


def answer_options(item: KBFItem) -> dict[str, str]:
    """The item's answer options A-D (the refusal option E is not read against evidence)."""
    return {letter: item.options[letter] for letter in ANSWER_LETTERS}


def offline_answer(item: KBFItem, letter: str, detail: dict[str, Any]) -> Answer:
    reply = refusal() if letter == REFUSAL_LETTER else f"({letter}) {item.options[letter]}"
    return Answer(reply=reply, choice=letter, detail=detail)
