"""Retrieval for inference: ANCHOR, VIS-RETRIEVE, patterns, the emotion record, cut points.

No model is called here: every operation is a search over what `reveriemem build`
stored. `MemoryReader(book, character, embedder)` reads one character's memory:

- `anchor(query)`: the character's own first-person episodes (`episodes`, rows of
  this book and character only), nearest to the query.
- `vis_retrieve(probes)`: facts (`facts`) nearest to each probe, bounded to the
  character's visibility set F_c. The bound is structural. Dense search runs over the
  character's fact pool (`FactPool`): F_c read ONCE per reader from LanceDB with the bound
  inside the query, `book = ... AND array_has_any(visibility, [slug])` (`fact_filter`), as
  ids, unit-normalised float32 vectors and the row fields; every probe is then an exact
  search of that matrix (one matrix-vector product and an argpartition), so a fact outside
  F_c is never in what is ranked, whatever the query; each row is checked again on the way
  out. With `as_of` (a source offset), `source_start <= as_of` and the character's own
  `visible_from` entry (aligned with `visibility`) `<= as_of` bound it further: a fact the
  book states later, or an account read out to the character later, is not yet theirs. The
  pool is sorted by `max(source_start, visible_from entry)`, so a cut point searches a
  prefix (the same condition as the SQL `as_of` filter, `fact_filter(..., as_of)`). Facts of
  the `common` route (known from the start) appear from where the book states them, so an
  agent bounded to a point of the story reveals nothing the book has not yet told.
- The search is exact and returns what LanceDB's exact bounded query returns: the same ids
  in the same order, the same cosine (float32 `_distance`, so the same values) to float
  rounding; ties are ranked in table order, as LanceDB's flat scan ranks them (tested against
  it on random tables and on the demo story; only facts whose cosines are equal in arithmetic,
  as the hashing embedder's bags of words often are, may be ordered differently by the last
  bit of each sum). Measured (`benchmarks/retrieval_latency.py`, 2-core Xeon shared with other
  jobs, load average 4.3 at start, 3.8 at end; each character sees 15% of the facts; k = 8),
  p50 / p95 of `vis_retrieve` for one dense probe with the pool loaded, timed in turn with the
  per-query LanceDB path: 10k facts 1.7 / 5.2 ms (LanceDB 17.7); 100k facts 5.2 / 6.1 ms,
  target 10 (LanceDB 30.4); 1M facts 34.0 / 38.0 ms, target 50 (LanceDB 147.4). The pool
  search alone: 0.9, 1.6 and 34.7 ms. The one-time read: 0.04 s, 0.24 s (25 MB), 4.0 s (150k
  facts, 252 MB). Each probe reads the whole matrix, so it is bound by memory bandwidth and
  by the share of a core it gets: in an earlier run at load average 6-7, 8.1 / 10.4 ms at 100k
  and 54.0 / 64.2 ms at 1M (target missed), timed back to back; ~26 ms per 150k-row product
  on an idle core.
- Memory: the pool holds rows x dim x 4 bytes of vectors plus the row fields (~1.7 KB per
  fact at 384-d: ~250 MB for the 150k facts a character sees of 1M); it belongs to the reader
  and is freed with it (`MemoryReader.fact_pool()` loads it early). Above `POOL_MAX_ROWS`
  (500k facts, ~850 MB), with `pool="lancedb"`, or if the memory cannot be had, dense search
  is the per-query LanceDB query instead, with the same filter inside (`dense_search`): small
  tables are scanned (`bypass_vector_index()`); from `VECTOR_INDEX_MIN_ROWS` rows an IVF_FLAT
  index is built once and probed in every partition, which compares every row with full
  vectors (the same top k as the scan; it breaks exact ties by partition) from LanceDB's
  in-memory index cache; LanceDB has a per-query floor of ~17 ms here. Scalar indexes
  (LABEL_LIST on `visibility`, BITMAP on `book`, BTREE on `source_start`) serve the filter of
  both the pool's read and these queries. `prepare_fact_indexes` makes them all (lazily, on
  opening a reader).
- Dense search is fused with LanceDB's native full-text search over `text` (the
  same filter inside the query; the probe's words matched plainly, no query
  syntax) by reciprocal rank (`hybrid=True`, default). On the demo story built
  offline with all-MiniLM-L6-v2, for the gold facts' "subject predicate object"
  as probes (122: each fact, for each character who knows it), the evidence unit
  holding the gold quotation was among the top 8 for 80% of probes with dense
  search and for all of them with the fusion (hit@3 0.67 -> 0.81); on the 8 gold
  questions whose fact the offline build makes visible both found the same 4
  (`python benchmarks/retrieval_latency.py --demo-recall all-MiniLM-L6-v2`). The
  FTS index is created lazily on first use; rows added later are still searched. The
  full-text branch stays a LanceDB query, so hybrid retrieval keeps LanceDB's per-query floor.
- `patterns(query)`: the character's behavioural patterns (`personality_patterns`)
  by description embedding; `emotion_record()`: the character's
  `emotion_transitions` in story order.
- `cut_offset(book, scene=..., chapter=...)`: the source offset where a scene or a
  chapter ends, for bounding an agent to a point of the story (`--as-of`).

Rows come back as dicts without their vectors. Scores: `score` is the cosine
similarity for episodes and patterns; for facts it is the reciprocal-rank fusion
score when hybrid (the cosine similarity otherwise), and `similarity` is always
the cosine similarity. Tables are read at the version current when the reader
opens them.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from lancedb.query import MatchQuery

from reveriemem.core.embeddings import Embedder
from reveriemem.core.errors import ReverieMemError, StorageError
from reveriemem.core.settings import data_home, lancedb_uri
from reveriemem.core.storage import LanceStore, ParquetStore, PartitionRef

log = logging.getLogger(__name__)

RRF_K = 60  # reciprocal-rank fusion constant (Cormack et al.)
FTS_COLUMN = "text"
VECTOR_INDEX_MIN_ROWS = 5_000  # below this a flat scan is as fast as an index
ALL_PARTITIONS = 1 << 20  # nprobes that reaches every IVF partition (LanceDB caps it at the partition count)
POOL_MAX_ROWS = 500_000  # a larger bounded set is searched through LanceDB (~850 MB at 384-d, row fields included)
NEVER = np.iinfo(np.int64).max  # the offset of a fact with no cut point admits (missing `visible_from` entry)
PoolMode = Literal["memory", "lancedb"]


class CutPointError(ReverieMemError):
    """A scene or chapter named as a cut point is not in the book."""


# ---------------------------------------------------------------- SQL filters


def sql_literal(value: str) -> str:
    """`value` as a quoted SQL string literal (single quotes doubled)."""
    if not isinstance(value, str):
        raise TypeError(f"Expected a string for a SQL filter, got {type(value).__name__}.")
    if "\x00" in value:
        raise ValueError("A SQL filter value may not contain a NUL character.")
    return "'" + value.replace("'", "''") + "'"


def _offset(value: Any) -> int:
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
        cut = _offset(as_of)
        where += f" AND source_start <= {cut} AND {known_from_expr(character)} <= {cut}"
    return where


def own_rows_filter(book: str, character: str) -> str:
    return f"book = {sql_literal(book)} AND character = {sql_literal(character)}"


def episode_filter(book: str, character: str, as_of: int | None = None) -> str:
    where = own_rows_filter(book, character)
    if as_of is not None:
        where += f" AND scene_end <= {_offset(as_of)}"
    return where


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
    """BM25 top-`limit` over `text` among the rows matching `where` (prefiltered inside LanceDB).

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
        row.pop("_score", None)
    return rows


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


def ensure_fts_index(table: Any) -> bool:
    """A native full-text index on `text`; False (with a warning) if it could not be made."""
    return _ensure(table, FTS_COLUMN, ["FTS", "INVERTED"], lambda: table.create_fts_index(FTS_COLUMN, replace=False))


# ---------------------------------------------------------------- the bounded set in memory


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
    argpartition. Memory: rows x dim x 4 bytes of vectors (~230 MB for 150k 384-d facts; ~250 MB with
    the row fields); the pool lives as long as its reader.
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
        return int(np.searchsorted(self._admitted, _offset(as_of), side="right"))

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


# ---------------------------------------------------------------- the reader


class MemoryReader:
    """One character's memory of one book, for the inference pipeline."""

    def __init__(self, book: str, character: str, embedder: Embedder, uri: str | None = None, *,
                 hybrid: bool = True, parquet_root: Path | None = None, prepare_indexes: bool = True,
                 vector_index_min_rows: int = VECTOR_INDEX_MIN_ROWS, pool: PoolMode = "memory",
                 pool_max_rows: int = POOL_MAX_ROWS):
        if pool not in ("memory", "lancedb"):
            raise ValueError(f"pool must be 'memory' or 'lancedb', not {pool!r}.")
        self.book = book
        self.character = character
        self.embedder = embedder
        self.uri = uri or lancedb_uri()
        self.hybrid = hybrid
        self._parquet_root = parquet_root
        self._store = LanceStore(self.uri)
        names = set(self._store.table_names())
        missing = [name for name in ("facts", "episodes") if name not in names]
        if missing:
            raise StorageError(
                f"The memory of {book!r} has not been built (no {' or '.join(missing)} table in {self.uri}); "
                f"run `reveriemem build {book}` first."
            )
        self._facts = self._store.db.open_table("facts")
        self._episodes = self._store.db.open_table("episodes")
        if self._facts.count_rows(f"book = {sql_literal(book)}") == 0:
            raise StorageError(f"No facts are stored for {book!r}; run `reveriemem build {book}` first.")
        if self._episodes.count_rows(own_rows_filter(book, character)) == 0:
            raise StorageError(
                f"No episodes are stored for {character!r} in {book!r}; run `reveriemem build {book}` first "
                f"({character!r} must be one of the book's focus characters)."
            )
        self._fact_columns = [n for n in self._facts.schema.names if n != "vector"]
        self._episode_columns = [n for n in self._episodes.schema.names if n != "vector"]
        self._patterns: Any = None
        self._fts: bool | None = None
        self._ivf_flat = prepare_indexes and prepare_fact_indexes(self._facts, vector_index_min_rows)
        self.pool_mode: PoolMode = pool
        self.pool_max_rows = pool_max_rows
        self._pool: FactPool | None = None
        self._pool_for: tuple[str, str] | None = None  # (book, character) the pool (or its absence) was decided for
        self._pool_lock = threading.Lock()

    # -------------------------------------------------------- helpers

    def _embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.embedder.embed(texts), dtype=np.float32)

    def fact_pool(self) -> FactPool | None:
        """The character's bounded fact set in memory, read once (on first use) and kept with the reader.

        None when dense search goes through LanceDB instead: `pool="lancedb"`, or a bounded set of
        more than `pool_max_rows` facts (counted with the same filter before reading).
        """
        key = (self.book, self.character)
        with self._pool_lock:
            if self._pool_for != key:
                self._pool, self._pool_for = None, key
                if self.pool_mode == "memory":
                    self._pool = self._load_pool()
            return self._pool

    def _load_pool(self) -> FactPool | None:
        count = self._facts.count_rows(fact_filter(self.book, self.character))
        if count > self.pool_max_rows:
            log.info("%s sees %d facts of %s (more than %d): dense search goes through LanceDB.",
                     self.character, count, self.book, self.pool_max_rows)
            return None
        try:
            return FactPool.load(self._facts, self.book, self.character, self._fact_columns)
        except MemoryError:
            log.warning("No memory for %s's %d facts: dense search goes through LanceDB.", self.character, count)
            return None

    def _fts_ready(self) -> bool:
        if self._fts is None:
            self._fts = self.hybrid and ensure_fts_index(self._facts)
        return self._fts

    def _own(self, row: dict[str, Any], as_of: int | None) -> tuple[str, int] | None:
        """The character's (route, visible_from) for a fact row, or None if the row is not theirs (yet)."""
        visibility = list(row.get("visibility") or [])
        if self.character not in visibility:
            log.error("A fact outside %s's visibility reached retrieval: %s", self.character, row.get("fact_id"))
            return None
        at = visibility.index(self.character)
        routes, since = list(row.get("routes") or []), list(row.get("visible_from") or [])
        known = int(since[at]) if at < len(since) and since[at] is not None else int(row.get("source_start") or 0)
        if as_of is not None and (known > as_of or int(row.get("source_start") or 0) > as_of):
            return None
        return (routes[at] if at < len(routes) else ""), known

    # -------------------------------------------------------- ANCHOR

    def anchor(self, query: str, k: int = 3, as_of: int | None = None) -> list[dict[str, Any]]:
        """The character's own episodes nearest to `query` (ending by `as_of` when given), best first."""
        vector = self._embed([query])[0]
        rows = dense_search(self._episodes, vector, episode_filter(self.book, self.character, as_of), k,
                            self._episode_columns)
        for row in rows:
            row["score"] = row.pop("similarity")
        return rows

    # -------------------------------------------------------- VIS-RETRIEVE

    def vis_retrieve(self, probes: list[str], k: int = 8, as_of: int | None = None,
                     exclude: Iterable[str] = frozenset()) -> list[dict[str, Any]]:
        """Facts visible to the character nearest to each probe, merged (best score per fact), best first.

        Each probe contributes its top `k` facts not in `exclude`. Every row carries `score`,
        `similarity`, `route` (the character's route to the fact), `known_from` (the offset from
        which the character knows it) and `probe` (the probe that scored it best).
        """
        cleaned = list(dict.fromkeys(p.strip() for p in probes if p and p.strip()))
        if not cleaned or k <= 0:
            return []
        excluded = set(exclude)
        where = fact_filter(self.book, self.character, as_of)
        limit = k + len(excluded)
        vectors = self._embed(cleaned)
        pool = self.fact_pool()
        merged: dict[str, dict[str, Any]] = {}
        for probe, vector in zip(cleaned, vectors):
            for row in self._probe(probe, vector, where, limit, k, excluded, as_of, pool):
                held = merged.get(row["fact_id"])
                if held is None or row["score"] > held["score"]:
                    merged[row["fact_id"]] = row
        return sorted(merged.values(), key=lambda r: (-r["score"], r.get("source_start") or 0, r["fact_id"]))

    def _probe(self, probe: str, vector: np.ndarray, where: str, limit: int, k: int, excluded: set[str],
               as_of: int | None, pool: FactPool | None) -> list[dict[str, Any]]:
        if pool is not None:
            dense = pool.search(vector, limit, as_of)
        else:
            dense = dense_search(self._facts, vector, where, limit, self._fact_columns, ivf_flat=self._ivf_flat)
        rows = {row["fact_id"]: row for row in dense}
        if self._fts_ready():
            try:
                lexical = text_search(self._facts, probe, where, limit, [*self._fact_columns, "vector"])
            except Exception as exc:  # the dense result stands alone; the bound is in both queries
                log.warning("Full-text search failed for the probe %r (%s); dense search only.", probe, exc)
                lexical = []
            norm = float(np.linalg.norm(vector)) or 1.0
            for row in lexical:
                stored = np.asarray(row.pop("vector"), dtype=np.float32)
                denom = norm * (float(np.linalg.norm(stored)) or 1.0)
                row["similarity"] = float(np.dot(stored, vector) / denom)
                rows.setdefault(row["fact_id"], row)
            fused = rrf([r["fact_id"] for r in dense if r["fact_id"] not in excluded],
                        [r["fact_id"] for r in lexical if r["fact_id"] not in excluded])
            for key, row in rows.items():
                row["score"] = fused.get(key, 0.0)
        else:
            for row in rows.values():
                row["score"] = row["similarity"]
        out = []
        for row in sorted(rows.values(), key=lambda r: -r["score"]):
            if row["fact_id"] in excluded:
                continue
            own = self._own(row, as_of)
            if own is None:
                continue
            row["route"], row["known_from"] = own
            row["probe"] = probe
            out.append(row)
            if len(out) == k:
                break
        return out

    # -------------------------------------------------------- personality track

    def patterns(self, query: str, k: int = 3) -> list[dict[str, Any]]:
        """The character's behavioural patterns whose description is nearest to `query`, best first."""
        if self._patterns is None:
            if "personality_patterns" not in self._store.table_names():
                raise StorageError(
                    f"The personality layer of {self.book!r} has not been built; "
                    f"run `reveriemem build {self.book}` first."
                )
            self._patterns = self._store.db.open_table("personality_patterns")
        columns = [n for n in self._patterns.schema.names if n != "vector"]
        rows = dense_search(self._patterns, self._embed([query])[0], own_rows_filter(self.book, self.character),
                            k, columns)
        for row in rows:
            row["score"] = row.pop("similarity")
        return rows

    def emotion_record(self, as_of: int | None = None) -> list[dict[str, Any]]:
        """The character's emotion transitions in story order (utterances starting by `as_of` when given)."""
        root = self._parquet_root or data_home() / "parquet"
        frame = ParquetStore(root).read("emotion_transitions", PartitionRef(self.book, self.character))
        if as_of is not None:
            frame = frame.filter(pl.col("start") <= _offset(as_of))
        return frame.sort("step").to_dicts()

    def cut_offset(self, scene: int | None = None, chapter: int | None = None) -> int:
        return cut_offset(self.book, scene=scene, chapter=chapter, uri=self.uri)


def cut_offset(book: str, scene: int | None = None, chapter: int | None = None, *, uri: str | None = None) -> int:
    """The source offset where scene `scene` (or chapter `chapter`) of `book` ends: a cut point for `as_of`."""
    if (scene is None) == (chapter is None):
        raise CutPointError("Name either a scene or a chapter as the cut point, not both or neither.")
    store = LanceStore(uri or lancedb_uri())
    if "scenes" not in store.table_names():
        raise StorageError(f"The scenes of {book!r} have not been built; run `reveriemem build {book}` first.")
    rows = (store.db.open_table("scenes").search().where(f"book = {sql_literal(book)}")
            .select(["scene_id", "chapter", "end"]).limit(None).to_arrow().to_pylist())
    if not rows:
        raise StorageError(f"The scenes of {book!r} have not been built; run `reveriemem build {book}` first.")
    if scene is not None:
        ends = {int(r["scene_id"]): int(r["end"]) for r in rows}
        if scene not in ends:
            raise CutPointError(f"{book!r} has no scene {scene}; its scenes are {_span(ends)}.")
        return ends[scene]
    chapters: dict[int, int] = {}
    for r in rows:
        number = int(r["chapter"])
        chapters[number] = max(chapters.get(number, 0), int(r["end"]))
    if chapter not in chapters:
        raise CutPointError(f"{book!r} has no chapter {chapter}; its chapters are {_span(chapters)}.")
    return chapters[chapter]


def _span(numbers: Iterable[int]) -> str:
    ordered = sorted(numbers)
    contiguous = ordered == list(range(ordered[0], ordered[-1] + 1))
    if contiguous:
        return f"{ordered[0]}-{ordered[-1]}" if len(ordered) > 1 else str(ordered[0])
    return ", ".join(str(n) for n in ordered)
