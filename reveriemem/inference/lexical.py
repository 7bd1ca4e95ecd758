"""Lexical (BM25) ranking of one character's bounded fact set F_c, with statistics of F_c alone.

A full-text index on the shared `facts` table would score with statistics of every row of the
table (document frequencies, average length, document count): every book of the data home. A
prefilter bounds which rows come back, not the statistics, so a character's answers changed
when the user built another book (the project ranked that way until de671a4). `LexicalIndex`
holds F_c's texts in a private in-memory LanceDB table (`memory://`, never written to the data
home) with its own full-text index made by `create_text_index`: LanceDB's analyser (tokenizer,
stop words, stemming, folding) and BM25, statistics of F_c alone.

Statistics: the character's bounded set F_c, the rows of `fact_filter(book, character)` (read
with that filter inside the query by `FactPool.load`, or by `LexicalIndex.load` when there is no
pool). Not the whole book: a word's weight then depends on nothing outside the character's
visibility (not even on facts only others know), nor on other books or characters, and the texts
are already in memory with the pool. At a cut point (`as_of`) the statistics are those of the
facts known by then (`admitted <= as_of`, the rows `FactPool.search` ranks): what the character
learns later weighs no word at the cut (an index per cut, the last `CUT_INDEXES` kept). Ties in
score are broken by `source_start`, then `fact_id` (every row tied with the k-th is fetched
first), so the ranking is deterministic. Rows of F_c that dense search leaves out (a zero or
non-finite vector, which an embedder never gives a text with words) are left out here too when
the index is the pool's. Memory: the texts, ids and offsets of F_c plus their inverted index
(a few MB for a Dracula-sized book of ~20k facts; built in about half a second).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from reveriemem.inference.bounded_search import (
    FTS_COLUMN,
    admitted_offsets,
    create_text_index,
    fact_filter,
    source_offset,
    text_search,
)

CUT_INDEXES = 4  # indexes of earlier cut points kept per character (a chat or eval run uses one or a few)


def start_offsets(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """`source_start` as int64 (0 when missing), the tie-break of the lexical ranking."""
    return pc.fill_null(column.cast(pa.int64()), 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


class LexicalIndex:
    """BM25 over one character's bounded fact set, statistics of that set alone.

    Rows are numbered as given (`row`); `search` returns row numbers, best first. The index of the
    rows known at a cut point is made on the first search at that cut (thread-safe), the last
    `CUT_INDEXES` cuts' kept beside the whole set's, as long as their owner lives.
    """

    def __init__(self, fact_ids: Sequence[str], texts: Sequence[str | None], source_starts: np.ndarray,
                 admitted: np.ndarray):
        count = len(fact_ids)
        if not (len(texts) == len(source_starts) == len(admitted) == count):
            raise ValueError("A lexical index needs one id, text, source_start and admitted offset per row.")
        self._rows = pa.table({
            "row": pa.array(np.arange(count, dtype=np.int64)),
            "fact_id": pa.array(list(fact_ids), pa.string()),
            "source_start": pa.array(np.asarray(source_starts, dtype=np.int64)),
            "admitted": pa.array(np.asarray(admitted, dtype=np.int64)),
            FTS_COLUMN: pa.array([t or "" for t in texts], pa.string()),
        })
        self._tables: OrderedDict[int, Any] = OrderedDict()  # admitted row count -> its index, most recent last
        self._lock = threading.Lock()

    @classmethod
    def load(cls, table: Any, book: str, character: str) -> LexicalIndex:
        """The character's visible facts of `book` read from `table` (the bound inside the query),
        text and offsets only: the lexical side when dense search goes through LanceDB."""
        result = (table.search().where(fact_filter(book, character))
                  .select(["fact_id", FTS_COLUMN, "source_start", "visibility", "visible_from"])
                  .limit(None).to_arrow())
        position, admitted = admitted_offsets(result, character)
        keep = np.flatnonzero(position >= 0)  # the filter already holds; a row outside it is never indexed
        result = result.take(pa.array(keep))
        return cls(result.column("fact_id").to_pylist(), result.column(FTS_COLUMN).to_pylist(),
                   start_offsets(result.column("source_start")), admitted[keep])

    def __len__(self) -> int:
        return self._rows.num_rows

    def fact_ids(self, rows: Sequence[int]) -> list[str]:
        column = self._rows.column("fact_id")
        return [str(column[i].as_py()) for i in rows]

    def _index(self, as_of: int | None) -> Any:
        """The index of the rows admitted by `as_of` (all rows when None), made on first use."""
        admitted = self._rows.column("admitted").to_numpy()
        keep = np.ones(len(admitted), dtype=bool) if as_of is None else admitted <= source_offset(as_of)
        count = int(keep.sum())
        if count == 0:
            return None
        with self._lock:
            table = self._tables.get(count)
            if table is None:
                table = lancedb.connect("memory://").create_table("facts", self._rows.filter(pa.array(keep)))
                create_text_index(table)
                self._tables[count] = table
                while len(self._tables) > CUT_INDEXES + 1:  # the whole set's index and the latest cuts
                    oldest = next(k for k in self._tables if k != len(admitted))
                    del self._tables[oldest]
            self._tables.move_to_end(count)
            return table

    def search(self, query: str, limit: int, as_of: int | None = None) -> list[int]:
        """Row numbers of the BM25 top-`limit` for `query` (rows admitted by `as_of` when given), best first.

        Rows sharing no indexed word with the query are not returned."""
        if limit <= 0 or len(self) == 0 or not query.strip():
            return []
        table, fetch, where = self._index(as_of), limit + 1, "row >= 0"
        if table is None:  # nothing known yet at this cut
            return []
        while True:
            hits = text_search(table, query, where, fetch, ["row", "source_start", "fact_id"])
            if len(hits) < fetch or hits[limit - 1]["bm25"] > hits[-1]["bm25"]:
                break  # every row tied with the k-th is among the hits (one query unless a tie runs past them)
            fetch *= 2
        hits.sort(key=lambda h: (-h["bm25"], h["source_start"], h["fact_id"]))
        return [int(h["row"]) for h in hits[:limit]]
