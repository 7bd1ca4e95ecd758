"""Bounded search inside LanceDB: the filter every search of a character's memory carries,
exact dense search, full-text search, reciprocal-rank fusion, and the indexes that keep them fast.

The bound is in the query, never applied afterwards: `fact_filter(book, character, as_of)` is
`book = ... AND array_has_any(visibility, [slug])`, and with `as_of` (a source offset) also
`source_start <= as_of` and the character's own `visible_from` entry (aligned with `visibility`)
`<= as_of`, so a fact the book states later, or an account read out to the character later, is
not yet theirs. `episode_filter` bounds episodes to the character's own, ended by `as_of`.
Every value put into a filter goes through `sql_literal` or is checked to be an integer offset.

`dense_search` is exact: a flat scan (`bypass_vector_index()`), or an IVF_FLAT index probed in
every partition, which compares every row with full vectors (the same top k as the scan; it
breaks exact ties by partition). `text_search` matches a probe's words plainly (no query
syntax). `prepare_fact_indexes` makes the scalar indexes that serve the bound (LABEL_LIST on
`visibility`, BITMAP on `book`, BTREE on `source_start`) and, from `VECTOR_INDEX_MIN_ROWS` rows,
the IVF_FLAT index. Index creation is safe from several processes at once; a failure only costs
speed. `create_text_index` makes the full-text (BM25) index with LanceDB's analyser; the reader's
lexical ranking builds it over one character's bounded facts (`reveriemem.inference.lexical`),
never over the shared table, whose statistics would span every book of the data home.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from lancedb.query import MatchQuery

log = logging.getLogger(__name__)

RRF_K = 60  # reciprocal-rank fusion constant (Cormack et al.)
FTS_COLUMN = "text"
VECTOR_INDEX_MIN_ROWS = 5_000  # below this a flat scan is as fast as an index
ALL_PARTITIONS = 1 << 20  # nprobes that reaches every IVF partition (LanceDB caps it at the partition count)


# ---------------------------------------------------------------- SQL filters


def sql_literal(value: str) -> str:
    """`value` as a quoted SQL string literal (single quotes doubled)."""
    if not isinstance(value, str):
        raise TypeError(f"Expected a string for a SQL filter, got {type(value).__name__}.")
    if "\x00" in value:
        raise ValueError("A SQL filter value may not contain a NUL character.")
    return "'" + value.replace("'", "''") + "'"


def source_offset(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"A source offset must be an integer, got {value!r}.")
    return int(value)


def known_from_expr(character: str) -> str:
    """SQL for the character's own `visible_from` entry (aligned with `visibility`)."""
    slug = sql_literal(character)
    return f"array_element(visible_from, CAST(array_position(visibility, {slug}) AS BIGINT))"


def fact_filter(book: str, character: str, as_of: int | None = None) -> str:
    """The filter every fact search carries: the book, the character's visibility, and the cut point."""
    where = f"book = {sql_literal(book)} AND array_has_any(visibility, [{sql_literal(character)}])"
    if as_of is not None:
        cut = source_offset(as_of)
        where += f" AND source_start <= {cut} AND {known_from_expr(character)} <= {cut}"
    return where


def own_rows_filter(book: str, character: str) -> str:
    return f"book = {sql_literal(book)} AND character = {sql_literal(character)}"


def episode_filter(book: str, character: str, as_of: int | None = None) -> str:
    where = own_rows_filter(book, character)
    if as_of is not None:
        where += f" AND scene_end <= {source_offset(as_of)}"
    return where


# ---------------------------------------------------------------- the bound in memory


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


def admitted_offsets(rows: pa.Table, character: str) -> tuple[np.ndarray, np.ndarray]:
    """The `as_of` part of `fact_filter` in memory, per row of `rows` (with `visibility`,
    `visible_from` and `source_start`): the character's position in `visibility` (-1 when absent)
    and the offset from which they may know the fact, `max(source_start, own visible_from entry)`
    (NEVER for a missing entry, which a cut point never admits, as in SQL)."""
    position = _first_position(rows.column("visibility").combine_chunks(), character)
    known = _entry_at(rows.column("visible_from").combine_chunks(), position)
    return position, np.maximum(_offsets(rows.column("source_start").combine_chunks()), known)


# ---------------------------------------------------------------- searches


def dense_search(table: Any, vector: np.ndarray, where: str, limit: int, columns: Sequence[str], *,
                 ivf_flat: bool = False) -> list[dict[str, Any]]:
    """Exact cosine top-`limit` among the rows matching `where` (prefiltered inside LanceDB).

    A flat scan (`bypass_vector_index()`), or with `ivf_flat` the table's IVF_FLAT index probed
    in every partition, which compares every row too (see `prepare_fact_indexes`).
    """
    if limit <= 0 or not np.any(vector):
        return []
    query = (table.search(np.asarray(vector, dtype=np.float32), vector_column_name="vector")
             .where(where, prefilter=True).distance_type("cosine"))
    query = query.nprobes(ALL_PARTITIONS) if ivf_flat else query.bypass_vector_index()
    result = query.select([*columns, "_distance"]).limit(limit).to_arrow()
    rows = result.to_pylist()
    for row in rows:
        row["similarity"] = 1.0 - float(row.pop("_distance"))
    return rows


def text_search(table: Any, query: str, where: str, limit: int, columns: Sequence[str]) -> list[dict[str, Any]]:
    """BM25 top-`limit` over `text` among the rows matching `where` (prefiltered inside LanceDB), with
    the BM25 score as `bm25`. Its statistics are those of `table`'s full-text index (every row of it).

    The query is a plain match of its words (`MatchQuery`): quotes and operators in a probe
    are not query syntax.
    """
    if limit <= 0 or not query.strip():
        return []
    match = MatchQuery(query, FTS_COLUMN)  # type: ignore[call-arg]  # a pydantic dataclass with defaults
    result = (table.search(match, query_type="fts").where(where, prefilter=True)
              .select([*columns, "_score"]).limit(limit).to_arrow())
    rows = result.to_pylist()
    for row in rows:
        row["bm25"] = float(row.pop("_score"))
    return rows


def create_text_index(table: Any) -> None:
    """The native full-text (BM25) index on `text`, with LanceDB's default analyser: the `simple`
    tokenizer, tokens of 40 bytes or more dropped, lower case, English stop words removed,
    English (Snowball) stemming, ASCII folding."""
    table.create_fts_index(FTS_COLUMN)


def rrf(*ranked: Sequence[str], k: int = RRF_K) -> dict[str, float]:
    """Reciprocal-rank fusion of ranked id lists: sum of 1 / (k + rank)."""
    scores: dict[str, float] = {}
    for ids in ranked:
        for rank, key in enumerate(ids, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return scores


def _kind(name: str) -> str:
    return name.replace("_", "").upper()


def index_of(table: Any, column: str, *kinds: str) -> str | None:
    """The name of an index on `column` of one of `kinds` (LABEL_LIST, BITMAP, BTREE, FTS, IVF_FLAT...)."""
    wanted = {_kind(k) for k in kinds}
    for index in table.list_indices():
        if column in list(getattr(index, "columns", [])) and _kind(str(getattr(index, "index_type", ""))) in wanted:
            return str(index.name)
    return None


def _ensure(table: Any, column: str, kinds: Sequence[str], create: Any) -> bool:
    """Create an index unless one exists; tolerate another process creating it meanwhile."""
    if index_of(table, column, *kinds):
        return True
    try:
        create()
    except Exception as exc:  # a concurrent creation (commit conflict), or a read-only store
        _refresh(table)
        if index_of(table, column, *kinds):
            return True
        log.warning("Could not create the %s index on %s (%s); searching without it.", kinds[0], column, exc)
        return False
    return True


def _refresh(table: Any) -> None:
    checkout = getattr(table, "checkout_latest", None)
    if checkout is not None:
        with contextlib.suppress(Exception):  # keep the version we have
            checkout()


def prepare_fact_indexes(table: Any, vector_min_rows: int = VECTOR_INDEX_MIN_ROWS) -> bool:
    """Indexes that keep bounded fact search fast; True when the table is searched through IVF_FLAT.

    Scalar indexes serve the bound's filter inside LanceDB: LABEL_LIST on `visibility`
    (`array_has_any`), BITMAP on `book`, BTREE on `source_start` (`as_of`). A table of at least
    `vector_min_rows` rows also gets an IVF_FLAT cosine index, which `dense_search` probes in
    every partition: the same exact result as a flat scan (full vectors, every row compared,
    rows added since the index was built scanned too), but read from LanceDB's in-memory index
    cache instead of the data files. The index is rebuilt when more than a fifth of the rows
    are not in it. Safe to call from several processes; a failure only costs speed.
    """
    _ensure(table, "visibility", ["LABEL_LIST"],
            lambda: table.create_scalar_index("visibility", index_type="LABEL_LIST", replace=False))
    _ensure(table, "book", ["BITMAP", "BTREE"],
            lambda: table.create_scalar_index("book", index_type="BITMAP", replace=False))
    _ensure(table, "source_start", ["BTREE"],
            lambda: table.create_scalar_index("source_start", index_type="BTREE", replace=False))
    rows = table.count_rows()
    if rows < vector_min_rows:
        return False
    if index_of(table, "vector") is not None and index_of(table, "vector", "IVF_FLAT") is None:
        return False  # someone else's approximate index (IVF_PQ, HNSW...): keep the flat scan, which is exact
    partitions = max(1, min(256, round(rows ** 0.5)))

    def build() -> None:
        table.create_index(metric="cosine", vector_column_name="vector", index_type="IVF_FLAT",
                           num_partitions=partitions, replace=True)

    name = index_of(table, "vector", "IVF_FLAT")
    if name is not None:
        stats = table.index_stats(name)
        if str(getattr(stats, "distance_type", None) or "cosine").lower() != "cosine":
            return False  # built for another metric: the flat scan answers in cosine
        if stats is not None and stats.num_unindexed_rows > rows // 5:
            log.info("Rebuilding the IVF_FLAT index on facts.vector (%d of %d rows not indexed).",
                     stats.num_unindexed_rows, rows)
            try:
                build()
            except Exception as exc:
                log.warning("Could not rebuild the IVF_FLAT index on facts.vector (%s).", exc)
        return True
    log.info("Building an IVF_FLAT index on facts.vector (%d rows, %d partitions), once.", rows, partitions)
    return _ensure(table, "vector", ["IVF_FLAT"], build)

