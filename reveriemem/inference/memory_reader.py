"""The memory reader: what the inference pipeline reads of one character's memory of one book.

No model is called here: every operation is a search over what `reveriemem build` stored.
`MemoryReader(book, character, embedder)`:

- `anchor(query)` (ANCHOR): the character's own first-person episodes (`episodes`, rows of
  this book and character only), nearest to the query, ending by `as_of` when given.
- `vis_retrieve(probes)` (VIS-RETRIEVE): facts (`facts`) nearest to each probe, bounded to the
  character's visibility set F_c. The bound is structural: dense search runs over the
  character's fact pool (`reveriemem.inference.fact_pool.FactPool`, F_c read once per reader
  with the bound inside the query), so a fact outside F_c is never among what is ranked,
  whatever the query; each row is checked again on the way out. With `as_of` (a source
  offset) a fact the book states later, or an account read out to the character later, is not
  yet theirs; facts of the `common` route appear from where the book states them, so an agent
  bounded to a point of the story reveals nothing the book has not yet told. Above
  `POOL_MAX_ROWS` facts, with `pool="lancedb"`, or when the memory cannot be had, dense search
  is the per-query LanceDB query instead, with the same filter inside
  (`reveriemem.inference.bounded_search`). Either way the search is exact and returns the same
  ids in the same order. With `hybrid=True` (default) dense search is fused by reciprocal rank
  with BM25 over `text` of the same bounded rows (`reveriemem.inference.lexical`): LanceDB's
  analyser and BM25, statistics of the character's bounded set F_c alone, so a ranking never
  depends on other books (or characters) in the store. The index is the pool's, or, without a
  pool, one of F_c's texts read once with the filter inside the query (the rows it ranks read
  again with the filter inside).
- `patterns(query)`: the character's behavioural patterns (`personality_patterns`) by
  description embedding; `emotion_record()`: the character's `emotion_transitions` in story
  order.
- `cut_offset(book, scene=..., chapter=...)`: the source offset where a scene or a chapter
  ends, for bounding an agent to a point of the story (`--as-of`).

Rows come back as dicts without their vectors. Scores: `score` is the cosine similarity for
episodes and patterns; for facts it is the reciprocal-rank fusion score when hybrid (the
cosine similarity otherwise), and `similarity` is always the cosine similarity. Tables are
read at the version current when the reader opens them. `Reader` is the part of this interface
the agent uses, so tests can stand in for stored memory.
"""

from __future__ import annotations

import bisect
import logging
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import polars as pl

from reveriemem.core.embeddings import Embedder
from reveriemem.core.errors import ReverieMemError, StorageError
from reveriemem.core.storage import LanceStore, MemoryStore, ParquetStore, PartitionRef
from reveriemem.inference.bounded_search import (
    VECTOR_INDEX_MIN_ROWS,
    dense_search,
    episode_filter,
    fact_filter,
    own_rows_filter,
    prepare_fact_indexes,
    rrf,
    source_offset,
    sql_literal,
)
from reveriemem.inference.fact_pool import FactPool
from reveriemem.inference.lexical import LexicalIndex

log = logging.getLogger(__name__)

POOL_MAX_ROWS = 500_000  # a larger bounded set is searched through LanceDB instead of held in memory
PoolMode = Literal["memory", "lancedb"]


class CutPointError(ReverieMemError):
    """A scene or chapter named as a cut point is not in the book."""


class Reader(Protocol):
    """What the agent needs of a `MemoryReader` (one book, one character)."""

    def anchor(self, query: str, k: int = 3, as_of: int | None = None) -> list[dict[str, Any]]: ...

    def vis_retrieve(self, probes: list[str], k: int = 8, as_of: int | None = None,
                     exclude: Iterable[str] = ...) -> list[dict[str, Any]]: ...

    def patterns(self, query: str, k: int = 3, as_of: int | None = None) -> list[dict[str, Any]]: ...

    def emotion_record(self, as_of: int | None = None) -> list[dict[str, Any]]: ...


class MemoryReader:
    """One character's memory of one book, for the inference pipeline."""

    def __init__(self, book: str, character: str, embedder: Embedder, uri: str | None = None, *,
                 hybrid: bool = True, parquet_root: str | Path | None = None, prepare_indexes: bool = True,
                 vector_index_min_rows: int = VECTOR_INDEX_MIN_ROWS, pool: PoolMode = "memory",
                 pool_max_rows: int = POOL_MAX_ROWS):
        if pool not in ("memory", "lancedb"):
            raise ValueError(f"pool must be 'memory' or 'lancedb', not {pool!r}.")
        self.book = book
        self.character = character
        self.embedder = embedder
        self.uri = uri or MemoryStore.for_home().uri
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
        if self._episodes.count_rows(own_rows_filter(book, character)) == 0 and not self._character_built():
            raise StorageError(
                f"No episodes are stored for {character!r} in {book!r}; run `reveriemem build {book}` first "
                f"({character!r} must be one of the book's focus characters)."
            )
        self._fact_columns = [n for n in self._facts.schema.names if n != "vector"]
        self._episode_columns = [n for n in self._episodes.schema.names if n != "vector"]
        self._patterns: Any = None
        self._lexical: tuple[tuple[str, str], LexicalIndex] | None = None  # the no-pool lexical index, per key
        self._lexical_ok = True  # False once lexical search failed: dense search alone from then on
        # The scalar indexes serve the bound's filter now; the vector index only serves dense search through
        # LanceDB, so a reader with its pool in memory builds it only if it ever searches that way (a library's
        # IVF_FLAT takes minutes to build and the pool never reads it).
        self._prepare_indexes, self._vector_index_min_rows = prepare_indexes, vector_index_min_rows
        self._ivf_flat: bool | None = None
        if prepare_indexes:
            if pool == "lancedb":
                self._ivf_flat = prepare_fact_indexes(self._facts, vector_index_min_rows)
            else:
                prepare_fact_indexes(self._facts, vector_min_rows=sys.maxsize)
        self.pool_mode: PoolMode = pool
        self.pool_max_rows = pool_max_rows
        self._pool: FactPool | None = None
        self._pool_for: tuple[str, str] | None = None  # (book, character) the pool (or its absence) was decided for
        self._pool_lock = threading.Lock()

    # -------------------------------------------------------- helpers

    def _character_built(self) -> bool:
        """Whether the character's partition was built, even with no scene lived (an empty memory is a memory)."""
        root = self._parquet_root or MemoryStore.for_home().parquet.root
        return ParquetStore(root).exists("character_scenes", PartitionRef(self.book, self.character))

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

    def _vector_index(self) -> bool:
        """Whether dense search through LanceDB probes the IVF_FLAT index (prepared on first use)."""
        if self._ivf_flat is None:
            self._ivf_flat = self._prepare_indexes and prepare_fact_indexes(self._facts, self._vector_index_min_rows)
        return self._ivf_flat

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
            dense = dense_search(self._facts, vector, where, limit, self._fact_columns, ivf_flat=self._vector_index())
        rows = {row["fact_id"]: row for row in dense}
        if self.hybrid:
            try:
                lexical = self._text_search(probe, vector, where, limit, as_of, pool) if self._lexical_ok else []
            except Exception as exc:  # the dense result stands alone; the bound is in both searches
                log.warning("Full-text search failed for the probe %r (%s); this reader searches densely only "
                            "from now on.", probe, exc)
                self._lexical_ok, lexical = False, []  # not retried (and its texts not read again) per probe
            for row in lexical:
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

    def _text_search(self, probe: str, vector: np.ndarray, where: str, limit: int, as_of: int | None,
                     pool: FactPool | None) -> list[dict[str, Any]]:
        """BM25 top-`limit` of the character's facts for `probe` (statistics of F_c alone), rows with `similarity`."""
        if pool is not None:
            return pool.text_search(probe, vector, limit, as_of)
        index = self._lexical_index()
        ids = index.fact_ids(index.search(probe, limit, as_of))
        if not ids:
            return []
        # the rows themselves, read with the bound inside the query again
        wanted = f"{where} AND fact_id IN ({', '.join(sql_literal(i) for i in ids)})"
        found = {row["fact_id"]: row for row in self._facts.search().where(wanted)
                 .select([*self._fact_columns, "vector"]).limit(None).to_arrow().to_pylist()}
        norm = float(np.linalg.norm(vector)) or 1.0
        out = []
        for row in (found[i] for i in ids if i in found):
            stored = np.asarray(row.pop("vector"), dtype=np.float32)
            row["similarity"] = float(np.dot(stored, vector) / (norm * (float(np.linalg.norm(stored)) or 1.0)))
            out.append(row)
        return out

    def _lexical_index(self) -> LexicalIndex:
        """The lexical index of the character's facts when there is no pool: text read once, the bound inside."""
        key = (self.book, self.character)
        with self._pool_lock:
            if self._lexical is None or self._lexical[0] != key:
                self._lexical = key, LexicalIndex.load(self._facts, self.book, self.character)
            return self._lexical[1]

    def follow(self, rows: Iterable[Mapping[str, Any]], gap: int,
               as_of: int | None = None) -> dict[str, list[dict[str, Any]]]:
        """For each fact row, the facts the character knows (by `as_of`) that the book tells within `gap`
        characters after it ends, in story order: a sentence read with what follows it. Keyed by the
        row's `fact_id`; rows with nothing close after them are left out. One query, the bound inside it."""
        ends = {str(r["fact_id"]): int(r["source_end"]) for r in rows
                if r.get("fact_id") is not None and r.get("source_end") is not None}
        if not ends:
            return {}
        ranges = " OR ".join(f"(source_start >= {e} AND source_start <= {e + gap})" for e in sorted(set(ends.values())))
        where = f"{fact_filter(self.book, self.character, as_of)} AND ({ranges})"
        found = self._facts.search().where(where).select(self._fact_columns).limit(None).to_arrow().to_pylist()
        found = [r for r in found if self._own(r, as_of) is not None]
        found.sort(key=lambda r: (int(r.get("source_start") or 0), str(r.get("fact_id"))))
        starts = [int(r.get("source_start") or 0) for r in found]
        out: dict[str, list[dict[str, Any]]] = {}
        for fact_id, end in ends.items():
            after = [r for r in found[bisect.bisect_left(starts, end):bisect.bisect_right(starts, end + gap)]
                     if str(r.get("fact_id")) != fact_id]
            if after:
                out[fact_id] = after
        return out

    # -------------------------------------------------------- personality track

    def patterns(self, query: str, k: int = 3, as_of: int | None = None) -> list[dict[str, Any]]:
        """The character's behavioural patterns whose description is nearest to `query`, best first.

        With `as_of` (a source offset), only patterns the character had shown by then, each with only
        its excerpts from before it (`cut_patterns`)."""
        if self._patterns is None:
            if "personality_patterns" not in self._store.table_names():
                raise StorageError(
                    f"The personality layer of {self.book!r} has not been built; "
                    f"run `reveriemem build {self.book}` first."
                )
            self._patterns = self._store.db.open_table("personality_patterns")
        columns = [n for n in self._patterns.schema.names if n != "vector"]
        rows = dense_search(self._patterns, self._embed([query])[0], own_rows_filter(self.book, self.character),
                            k if as_of is None else max(k, 64), columns)
        for row in rows:
            row["score"] = row.pop("similarity")
        return rows if as_of is None else cut_patterns(rows, source_offset(as_of))[:k]

    def emotion_record(self, as_of: int | None = None) -> list[dict[str, Any]]:
        """The character's emotion transitions in story order (utterances starting by `as_of` when given)."""
        root = self._parquet_root or MemoryStore.for_home().parquet.root
        frame = ParquetStore(root).read("emotion_transitions", PartitionRef(self.book, self.character))
        if as_of is not None:
            frame = frame.filter(pl.col("start") <= source_offset(as_of))
        return frame.sort("step").to_dicts()

    def cut_offset(self, scene: int | None = None, chapter: int | None = None) -> int:
        return cut_offset(self.book, scene=scene, chapter=chapter, uri=self.uri)


def cut_patterns(rows: list[dict[str, Any]], cut: int) -> list[dict[str, Any]]:
    """Pattern rows as known at source offset `cut`: those with an utterance or excerpt before it, their
    excerpts (and excerpt offsets) cut to those starting before it. Order is kept."""
    out = []
    for row in rows:
        starts = [int(s) for s in row.get("excerpt_starts") or []]
        kept = [i for i, start in enumerate(starts) if start < cut]
        shown = [int(s) for s in row.get("utterance_starts") or []]
        if not kept and not any(s < cut for s in shown):
            continue
        excerpts = list(row.get("excerpts") or [])
        out.append({**row, "excerpts": [excerpts[i] for i in kept if i < len(excerpts)],
                    "excerpt_starts": [starts[i] for i in kept]})
    return out


def cut_offset(book: str, scene: int | None = None, chapter: int | None = None, *, uri: str | None = None) -> int:
    """The source offset where scene `scene` (or chapter `chapter`) of `book` ends: a cut point for `as_of`."""
    if (scene is None) == (chapter is None):
        raise CutPointError("Name either a scene or a chapter as the cut point, not both or neither.")
    store = LanceStore(uri) if uri else MemoryStore.for_home().lance
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


def score_of(row: Mapping[str, Any]) -> float | None:
    """A returned row's ranking score (None when it has none)."""
    value = row.get("score")
    return None if value is None else float(value)


def similarity_of(row: Mapping[str, Any]) -> float | None:
    """A returned row's cosine similarity to its query (its score when it carries no separate similarity)."""
    value = row.get("similarity", row.get("score"))
    return None if value is None else float(value)
