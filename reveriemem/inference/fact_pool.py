"""The fact pool: one character's bounded fact set F_c, held in memory for exact dense search.

`FactPool.load` reads F_c ONCE from LanceDB with the visibility filter inside the query
(`fact_filter(book, character)`, the filter of every LanceDB fact search), so nothing outside
F_c is ever read into the pool; a row whose `visibility` does not name the character all the
same is dropped (and logged) before it can be ranked. Rows are sorted by the offset from which
the character may know the fact, so a cut point (`as_of`) searches a prefix. `FactPool.search`
returns what LanceDB's exact bounded query (`dense_search` with `fact_filter(book, character,
as_of)`) returns: the same ids in the same order and the same float32 cosine, to float rounding.
`FactPool.text_search` ranks the pool's rows by BM25 with statistics of the pool alone
(`reveriemem.inference.lexical`), for the same cut point.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from reveriemem.inference.bounded_search import admitted_offsets, fact_filter, source_offset
from reveriemem.inference.lexical import LexicalIndex, start_offsets

log = logging.getLogger(__name__)


class FactPool:
    """One character's bounded fact set F_c, held in memory for exact dense search.

    `FactPool.load` reads it ONCE from LanceDB with the visibility filter inside the query
    (`fact_filter(book, character)`, the filter of every LanceDB fact search), so nothing
    outside F_c is ever read into the pool; a row whose `visibility` does not name the character
    all the same is dropped (and logged) before it can be ranked. Held per row: the non-vector
    columns (Arrow), the unit-normalised float32 vector, and the offset from which the character
    may know the fact, `max(source_start, own visible_from entry)` (the `as_of` part of
    `fact_filter`; a missing entry admits the row only without `as_of`, as in SQL). Rows are
    sorted by that offset, so a cut point is a prefix of the matrix; ties in score are ranked
    in table order, as LanceDB's flat scan ranks them. Rows with a zero or non-finite vector
    (which LanceDB's cosine search never returns) are left out. `search` is an exact cosine
    top-k over the prefix: one matrix-vector product (`np.vecdot`, single-threaded) and an
    argpartition. Memory: rows x dim x 4 bytes of vectors plus the row fields; the pool lives as
    long as its reader.
    """

    def __init__(self, book: str, character: str, rows: pa.Table, vectors: np.ndarray, admitted: np.ndarray,
                 position: np.ndarray):
        self.book = book
        self.character = character
        self._rows = rows
        self._vectors = vectors
        self._admitted = admitted
        self._position = position
        self._lexical: LexicalIndex | None = None
        self._lock = threading.Lock()

    @classmethod
    def load(cls, table: Any, book: str, character: str, columns: Sequence[str]) -> FactPool:
        """Read the character's visible facts of `book` from `table` (the bound inside the query)."""
        columns = [c for c in columns if c != "vector"]
        needed = [c for c in ("visibility", "visible_from", "source_start") if c not in columns]
        result = (table.search().where(fact_filter(book, character))
                  .select([*columns, *needed, "vector"]).limit(None).to_arrow())
        position, admitted = admitted_offsets(result, character)
        outside = position < 0
        if outside.any():
            log.error("%d facts outside %s's visibility reached the fact pool; dropped.", int(outside.sum()), character)
        vectors = result.column("vector").combine_chunks()
        dim = vectors.type.list_size
        values = vectors.values.slice(vectors.offset * dim, len(vectors) * dim)
        raw = values.to_numpy(zero_copy_only=False).reshape(len(vectors), dim)
        with np.errstate(invalid="ignore", over="ignore"):
            norms = np.linalg.norm(raw, axis=1)
        keep = ~outside & np.isfinite(norms) & (norms > 0)
        if vectors.null_count:
            keep &= vectors.is_valid().to_numpy(zero_copy_only=False)
        order = np.flatnonzero(keep)
        order = order[np.argsort(admitted[order], kind="stable")]
        matrix = np.ascontiguousarray(raw[order], dtype=np.float32)
        matrix /= norms[order, None].astype(np.float32)
        rows = result.select(columns).take(pa.array(order)).combine_chunks()
        return cls(book, character, rows, matrix, admitted[order], order.astype(np.int64))

    def __len__(self) -> int:
        return len(self._admitted)

    @property
    def nbytes(self) -> int:
        """Bytes held: vectors, offsets and row fields."""
        return int(self._vectors.nbytes + self._admitted.nbytes + self._position.nbytes + self._rows.nbytes)

    def admitted(self, as_of: int | None = None) -> int:
        """How many rows the character may know by `as_of` (all without it): the searched prefix."""
        if as_of is None:
            return len(self)
        return int(np.searchsorted(self._admitted, source_offset(as_of), side="right"))

    def search(self, vector: np.ndarray, limit: int, as_of: int | None = None) -> list[dict[str, Any]]:
        """Exact cosine top-`limit` of the pool (known by `as_of` when given): rows with `similarity`, best first.

        The same rows, order and scores (up to float rounding) as `dense_search` with
        `fact_filter(book, character, as_of)`.
        """
        size = self.admitted(as_of)
        query = np.asarray(vector, dtype=np.float32).ravel()
        norm = float(np.linalg.norm(query))
        if limit <= 0 or size == 0 or not np.isfinite(norm) or norm == 0:
            return []
        # cosine distance in float32, as LanceDB reports it (`_distance`): the same grid of values, the same ties
        distances = np.float32(1.0) - np.vecdot(self._vectors[:size], query / np.float32(norm))
        if limit < size:
            top = np.argpartition(distances, limit - 1)[:limit]
            candidates = np.flatnonzero(distances <= distances[top].max())  # every row tied with the k-th
        else:
            candidates = np.arange(size)
        best = candidates[np.lexsort((self._position[candidates], distances[candidates]))][:limit]
        rows = self._rows.take(pa.array(best)).to_pylist()
        for row, distance in zip(rows, distances[best]):
            row["similarity"] = 1.0 - float(distance)
        return rows

    def lexical(self) -> LexicalIndex:
        """The pool's BM25 index (`reveriemem.inference.lexical`): statistics of these rows alone, made once."""
        with self._lock:
            if self._lexical is None:
                self._lexical = LexicalIndex(self._rows.column("fact_id").to_pylist(),
                                             self._rows.column("text").to_pylist(),
                                             start_offsets(self._rows.column("source_start")), self._admitted)
            return self._lexical

    def text_search(self, query: str, vector: np.ndarray, limit: int, as_of: int | None = None) -> list[dict[str, Any]]:
        """BM25 top-`limit` of the pool for `query` (known by `as_of` when given), best first: rows with
        `similarity`, the cosine of each row's vector to `vector` (the score dense search gives it)."""
        best = np.asarray(self.lexical().search(query, limit, as_of), dtype=np.int64)
        if len(best) == 0:
            return []
        query_vector = np.asarray(vector, dtype=np.float32).ravel()
        norm = float(np.linalg.norm(query_vector))
        similarity = (np.vecdot(self._vectors[best], query_vector / np.float32(norm)) if np.isfinite(norm) and norm
                      else np.zeros(len(best), dtype=np.float32))
        rows = self._rows.take(pa.array(best)).to_pylist()
        for row, value in zip(rows, similarity):
            row["similarity"] = float(value)
        return rows
