"""The one interface every KBF-QA method implements.

A method is made once per book with a `MethodContext` (the book, the model
handle shared by every method of a batch, the embedder, the data home's
LanceDB and a work folder for its own indexes), is `prepare`d once (build a
tree, a graph, an index: cached in `work_dir`, reused on a second run), and then
answers items one at a time. `answer` returns the method's free-form reply;
`eval.matching` maps it to a letter, unless the method chose a letter itself
(`Answer.choice`, e.g. the evidence answerer, which writes no prose).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from eval.items import KBFItem
from reveriemem.core.embeddings import Embedder
from reveriemem.core.registry import Book
from reveriemem.models import ModelHandle


@dataclass
class MethodContext:
    book: Book
    handle: ModelHandle  # handle.lm is None: no model; take the deterministic path
    embedder: Embedder
    work_dir: Path  # per method and book: indexes a method builds for itself
    uri: str | None = None  # LanceDB of the data home (None: the default)


@dataclass
class Answer:
    reply: str  # what the method said, free-form
    choice: str | None = None  # a letter the method chose itself; None: match the reply
    calls: int = 0  # model calls made for this item
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)  # JSON-able: retrieved ids, scores, ...


class Method(Protocol):
    name: str  # e.g. "naive-rag"; also the report's row label

    def prepare(self) -> None:
        """Build whatever the method needs for the whole book (idempotent)."""

    def answer(self, item: KBFItem) -> Answer:
        """Answer one item as the item's character."""
