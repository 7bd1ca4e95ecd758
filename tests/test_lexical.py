"""The lexical side of VIS-RETRIEVE: BM25 with the statistics of the character's bounded set alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa
import pytest

from reveriemem.core.schemas import EPISODES, FACTS
from reveriemem.core.storage import LanceStore, PartitionRef
from reveriemem.inference.bounded_search import NEVER, create_text_index, fact_filter, text_search
from reveriemem.inference.lexical import LexicalIndex
from reveriemem.inference.memory_reader import MemoryReader
from tests.test_retrieval import BOOK, EMBEDDER, EPISODE_ROWS, FACTS_ROWS, episode_row, fact_row

# Ada's facts: 'heron' is her rarer word (2 facts), 'lantern' her commoner one (4 facts)
ADA_ROWS = [
    ("tale:h1", "A grey heron stood in the marsh.", 100),
    ("tale:h2", "The heron flew over the mill pond.", 200),
    ("tale:l1", "A lantern hung at the mill gate.", 300),
    ("tale:l2", "The lantern burned low by the door.", 400),
    ("tale:l3", "She lit the lantern at the quay.", 500),
    ("tale:l4", "The lantern swung from the mast.", 600),
    ("tale:x1", "Bread and cheese were laid on the table.", 700),
]
# another book where 'heron' is everywhere: under one table-wide index it would weigh less than 'lantern'
OTHER_ROWS = [(f"fen:h{n:02d}", f"Heron number {n} waded through the reeds of the fen.", n) for n in range(80)]


def _store(path: Path, other: bool) -> str:
    store = LanceStore(str(path))
    if other:
        rows = [{**fact_row(i, t, {"ada": ("direct", s)}, s), "book": "fen"} for i, t, s in OTHER_ROWS]
        store.write("facts", PartitionRef("fen"), rows, FACTS)
    store.write("facts", PartitionRef(BOOK), [fact_row(i, t, {"ada": ("direct", s)}, s) for i, t, s in ADA_ROWS]
                + [fact_row(*r) for r in FACTS_ROWS], FACTS)
    for character in sorted({e[0] for e in EPISODE_ROWS}):
        store.write("episodes", PartitionRef(BOOK, character),
                    [episode_row(*e) for e in EPISODE_ROWS if e[0] == character], EPISODES)
    return store.uri


def _ranked(reader: MemoryReader, probes: list[str], as_of: int | None = None) -> list[list[tuple[str, float]]]:
    return [[(r["fact_id"], round(r["score"], 9)) for r in reader.vis_retrieve([p], k=6, as_of=as_of)]
            for p in probes]


@pytest.mark.parametrize("pool", ["memory", "lancedb"])
def test_another_book_in_the_store_does_not_change_a_characters_ranking(tmp_path, pool):
    alone = MemoryReader(BOOK, "ada", EMBEDDER, uri=_store(tmp_path / "alone", other=False), pool=pool)
    shared = MemoryReader(BOOK, "ada", EMBEDDER, uri=_store(tmp_path / "shared", other=True), pool=pool)
    probes = ["heron lantern", "the heron by the lantern", "lantern at the mill", "herons and lanterns"]
    for as_of in (None, 450):
        assert _ranked(alone, probes, as_of) == _ranked(shared, probes, as_of)
    # the rarer word of her own facts leads the lexical ranking, whatever the other book says of herons
    assert _lexical(shared, "heron lantern")[:2] == ["tale:h1", "tale:h2"]
    assert _lexical(alone, "heron lantern") == _lexical(shared, "heron lantern")


def _lexical(reader: MemoryReader, probe: str, as_of: int | None = None) -> list[str]:
    vector = EMBEDDER.embed([probe])[0]
    where = fact_filter(BOOK, "ada", as_of)
    return [r["fact_id"] for r in reader._text_search(probe, vector, where, 8, as_of, reader.fact_pool())]


def _index(texts: list[str], admitted: list[int] | None = None) -> LexicalIndex:
    count = len(texts)
    offsets = np.asarray(admitted if admitted is not None else range(count), dtype=np.int64)
    return LexicalIndex([f"f{n}" for n in range(count)], texts, np.arange(count, dtype=np.int64), offsets)


TEXTS = ["The lamp was lit at dusk.", "A lamp stood on the sill.", "The lamps of the quay were trimmed.",
         "He hid the compass in the lamp.", "The compass pointed north.", "Bread on the table."]


def test_a_word_absent_from_the_set_or_a_stop_word_ranks_nothing():
    index = _index(TEXTS)
    assert index.search("harpoon", 5) == []
    assert index.search("the of on", 5) == []  # stop words are not indexed
    assert index.search("   ", 5) == [] and index.search("lamp", 0) == []
    assert _index([]).search("lamp", 5) == []


def test_a_rarer_word_outranks_a_common_one_and_stems_match():
    index = _index(TEXTS)
    ranked = index.search("lamp compass", 6)
    assert ranked[0] == 3  # both words
    assert ranked[1] == 4  # 'compass' (2 facts) weighs more than 'lamp' (4 facts)
    assert set(ranked) == {0, 1, 2, 3, 4}  # 'lamps' is stemmed to 'lamp'; the bread is never matched


def test_ranking_mirrors_lancedb_full_text_search_on_the_same_rows():
    """The analyser and BM25 are LanceDB's own: on a table holding only these rows the order is the same."""
    table = lancedb.connect("memory://").create_table("facts", pa.table({"fact_id": [f"f{n}" for n in range(6)],
                                                                          "text": TEXTS}))
    create_text_index(table)
    index = _index(TEXTS)
    for query in ("lamp compass", "lamps", "the compass pointed", "table bread lit"):
        native = text_search(table, query, "fact_id != ''", 6, ["fact_id"])
        assert native
        # ties in score go by source_start (here the row number)
        assert index.search(query, 6) == [n for _, n in sorted((-r["bm25"], int(r["fact_id"][1:])) for r in native)]


def test_ties_are_broken_by_source_start_then_fact_id_and_reach_past_the_limit():
    texts = ["The bell rang."] * 7
    index = LexicalIndex([f"f{n}" for n in (6, 5, 4, 3, 2, 1, 0)], texts, np.asarray([9, 9, 9, 1, 1, 2, 2]),
                         np.zeros(7, dtype=np.int64))
    assert index.fact_ids(index.search("bell", 4)) == ["f2", "f3", "f0", "f1"]


def test_as_of_admits_only_rows_known_by_then():
    index = _index(TEXTS, admitted=[10, 20, 30, 40, 50, int(NEVER)])
    assert index.search("compass", 5, as_of=45) == [3]
    assert index.search("compass", 5, as_of=39) == []
    assert set(index.search("lamp", 5, as_of=20)) == {0, 1}
    assert index.search("bread table", 5, as_of=10**15) == []  # a missing visible_from entry is never admitted
    assert index.search("bread table", 5) == [5]  # ...except without a cut point, as in SQL


@pytest.mark.parametrize("pool", ["memory", "lancedb"])
def test_lexical_search_reads_only_the_characters_facts(tmp_path, pool):
    reader = MemoryReader(BOOK, "ada", EMBEDDER, uri=_store(tmp_path / "s", other=True), pool=pool)
    found: list[str] = []
    for probe in ["Ben buried the silver compass under the old quay steps at midnight.", "compass rose O'Neil",
                  "Heron number 3 waded through the reeds of the fen.", "Cy sold the spring lamp oil"]:
        found += _lexical(reader, probe)
        found += _lexical(reader, probe, as_of=1000)
    assert found and all(i.startswith("tale:") for i in found)
    assert not {"tale:f02", "tale:f06", "tale:f07"} & set(found)  # Ben's, O'Neil's, Cy's
    assert "tale:f04" in _lexical(reader, "Cy sold the spring lamp oil")  # read out to Ada at 5000...
    assert "tale:f04" not in _lexical(reader, "Cy sold the spring lamp oil", as_of=1000)  # ...not yet at 1000
    index = LexicalIndex.load(LanceStore(reader.uri).open("facts"), BOOK, "ada")
    assert all(i.startswith("tale:") for i in index.fact_ids(range(len(index))))
    assert not {"tale:f02", "tale:f06", "tale:f07"} & set(index.fact_ids(range(len(index))))


def test_the_pool_and_the_lancedb_path_rank_alike(tmp_path):
    uri = _store(tmp_path / "s", other=True)
    readers = [MemoryReader(BOOK, "ada", EMBEDDER, uri=uri, pool=pool) for pool in ("memory", "lancedb")]
    probes = ["heron lantern", "lamp oil harbour steps", "the key behind the chandler's door"]
    for as_of in (None, 450, 5000):
        ranked: list[Any] = [_ranked(r, probes, as_of) for r in readers]
        assert [[i for i, _ in p] for p in ranked[0]] == [[i for i, _ in p] for p in ranked[1]]


def test_what_is_learnt_after_a_cut_weighs_no_word_at_the_cut():
    early = ["The heron stood by the lantern.", "A heron flew over the lantern hill.", "The lantern was lit at dusk."]
    later = ["The heron came back."] * 20  # learnt after the cut: common "heron" must not lower its weight at the cut
    alone = _index(early, admitted=[10, 20, 30])
    with_later = _index(early + later, admitted=[10, 20, 30] + [100] * 20)
    assert with_later.search("heron lantern", 3, as_of=30) == alone.search("heron lantern", 3, as_of=30)
    assert with_later.search("heron lantern", 3, as_of=30) == alone.search("heron lantern", 3)
    assert with_later.search("heron", 3, as_of=5) == []  # nothing known yet
