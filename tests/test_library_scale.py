"""A facts table holding several books: one character's bounded set is opened through the book filter."""

from __future__ import annotations

from pathlib import Path

import lancedb
import pytest

from benchmarks.retrieval_library import CHARACTERS, book_slug, build_library
from reveriemem.core.embeddings import HashEmbedder
from reveriemem.inference.bounded_search import fact_filter, index_of
from reveriemem.inference.memory_reader import MemoryReader

BOOK = book_slug(1)
WHO = CHARACTERS[0]


@pytest.fixture
def library(tmp_path: Path) -> str:
    uri = str(tmp_path / "lancedb")
    build_library(uri, books=3, per_book=400, book=BOOK)
    return uri


def test_a_pooled_reader_opens_one_book_through_scalar_indexes_and_builds_no_vector_index(library: str) -> None:
    reader = MemoryReader(BOOK, WHO, HashEmbedder(), uri=library, hybrid=False, vector_index_min_rows=0)
    pool = reader.fact_pool()
    table = lancedb.connect(library).open_table("facts")
    assert index_of(table, "vector") is None  # the pool never reads a vector index: none is built for it
    assert index_of(table, "book", "BITMAP") and index_of(table, "visibility", "LABEL_LIST")
    plan = table.search().where(fact_filter(BOOK, WHO)).select(["fact_id"]).limit(None).explain_plan(verbose=True)
    assert "ScalarIndexQuery" in plan and "Bitmap" in plan  # the book filter prunes before any row is read
    assert pool is not None and len(pool) == table.count_rows(fact_filter(BOOK, WHO)) > 0
    rows = reader.vis_retrieve(["a question about the evening"], k=len(pool) + 10)
    assert len(rows) == len(pool)
    assert all(r["fact_id"].startswith(f"{BOOK}:") and WHO in r["visibility"] for r in rows)


def test_a_reader_searching_through_lancedb_builds_the_vector_index_and_finds_the_same(library: str) -> None:
    embedder = HashEmbedder()
    pooled = MemoryReader(BOOK, WHO, embedder, uri=library, hybrid=False, vector_index_min_rows=0)
    through = MemoryReader(BOOK, WHO, embedder, uri=library, hybrid=False, vector_index_min_rows=0, pool="lancedb")
    assert index_of(lancedb.connect(library).open_table("facts"), "vector", "IVF_FLAT")
    for probe in ("who came to the house", "the ledger and the cask", "fact 17"):
        expected = [r["fact_id"] for r in through.vis_retrieve([probe], k=8)]
        assert [r["fact_id"] for r in pooled.vis_retrieve([probe], k=8)] == expected
