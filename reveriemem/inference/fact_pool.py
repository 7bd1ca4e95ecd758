"""The fact pool: one character's bounded fact set F_c, held in memory for exact dense search.

`FactPool.load` reads F_c ONCE from LanceDB with the visibility filter inside the query
(`fact_filter(book, character)`, the filter of every LanceDB fact search), so nothing outside
F_c is ever read into the pool; a row whose `visibility` does not name the character all the
same is dropped (and logged) before it can be ranked. Rows are sorted by the offset from which
the character may know the fact, so a cut point (`as_of`) searches a prefix. `FactPool.search`
returns what LanceDB's exact bounded query (`dense_search` with `fact_filter(book, character,
as_of)`) returns: the same ids in the same order and the same float32 cosine, to float rounding.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from reveriemem.inference.bounded_search import fact_filter, source_offset

log = logging.getLogger(__name__)

NEVER = np.iinfo(np.int64).max  # the offset of a fact with no cut point admits (missing `visible_from` entry)


def _first_position(visibility: pa.Array, character: str) -> np.ndarray:
    """Per row: the 0-based position of `character` in the row's `visibility` list, -1 when absent."""
    out = np.full(len(visibility), -1, dtype=np.int64)
    flat = pc.list_flatten(visibility)
    if len(flat) == 0:
        return out
    parents = pc.list_parent_indices(visibility).to_numpy()
    hits = np.flatnonzero(pc.fill_null(pc.equal(flat, character), False).to_numpy(zero_copy_only=False))
    rows, first = np.unique(parents[hits], return_index=True)
    out[rows] = hits[first] - np.searchsorted(parents, rows, side="left")
    return out


def _entry_at(lists: pa.Array, position: np.ndarray) -> np.ndarray:
    """Per row: the int64 element at `position` of the row's list; NEVER when absent, null or position < 0."""
    out = np.full(len(lists), NEVER, dtype=np.int64)
    flat = pc.list_flatten(lists)
    if len(flat) == 0:
        return out
    parents = pc.list_parent_indices(lists).to_numpy()
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    rows = np.flatnonzero((position >= 0) & (position < lengths))
    at = np.searchsorted(parents, rows, side="left") + position[rows]
    valid = np.asarray(flat.is_valid().to_numpy(zero_copy_only=False))[at]
    values = pc.fill_null(flat, 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)[at]
    out[rows[valid]] = values[valid]
    return out


def _offsets(column: pa.Array) -> np.ndarray:
    return pc.fill_null(column.cast(pa.int64()), NEVER).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


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

    @classmethod
    def load(cls, table: Any, book: str, character: str, columns: Sequence[str]) -> FactPool:
        """Read the character's visible facts of `book` from `table` (the bound inside the query)."""
        columns = [c for c in columns if c != "vector"]
        needed = [c for c in ("visibility", "visible_from", "source_start") if c not in columns]
        result = (table.search().where(fact_filter(book, character))
                  .select([*columns, *needed, "vector"]).limit(None).to_arrow())
        position = _first_position(result.column("visibility").combine_chunks(), character)
        outside = position < 0
        if outside.any():
            log.error("%d facts outside %s's visibility reached the fact pool; dropped.", int(outside.sum()), character)
        known = _entry_at(result.column("visible_from").combine_chunks(), position)
        admitted = np.maximum(_offsets(result.column("source_start").combine_chunks()), known)
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
