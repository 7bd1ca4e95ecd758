"""Retrieval for inference: the visibility bound lives inside every LanceDB query, `as_of` cuts the story."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from reveriemem.core.embeddings import HashEmbedder
from reveriemem.core.errors import StorageError
from reveriemem.core.schemas import EMOTION_TRANSITIONS, EPISODES, FACTS, PERSONALITY_PATTERNS, SCENES
from reveriemem.core.storage import LanceStore, ParquetStore, PartitionRef
from reveriemem.inference.bounded_search import dense_search, fact_filter, index_of, sql_literal
from reveriemem.inference.memory_reader import CutPointError, MemoryReader, cut_offset

BOOK = "tale"
EMBEDDER = HashEmbedder()

# (fact_id, text, {character: (route, visible_from)}, source_start)
SECRET = "Ben buried the silver compass under the old quay steps at midnight."
ACCOUNT = "Cy sold the spring lamp oil to the smugglers of Gull Roads."
LATER = "The council voted to put out the harbour lamps for good."
FACTS_ROWS: list[tuple[str, str, dict[str, tuple[str, int]], int]] = [
    ("tale:f01", "The lighthouse key hangs behind the chandler's door.", {"ada": ("observation", 100)}, 100),
    ("tale:f02", SECRET, {"ben": ("direct", 200)}, 200),
    ("tale:f03", "The harbourmaster rowed out to the lamp at dawn.", {"ada": ("observation", 300),
                                                                     "ben": ("observation", 300)}, 300),
    # an account: Cy lived it at 400, Ada hears it read out at 5000
    ("tale:f04", ACCOUNT, {"ada": ("observation", 5000), "cy": ("direct", 400)}, 400),
    ("tale:f05", LATER, {"ada": ("organisation", 6000), "ben": ("organisation", 6000)}, 6000),
    ("tale:f06", "O'Neil keeps the compass rose painted on the quay.", {"o'neil": ("direct", 700)}, 700),
    ("tale:f07", "The silver compass of the old quay was Ben's.", {"cy": ("observation", 800)}, 800),
] + [
    (f"tale:f{n:02d}", f"Ada trimmed wick number {n} on the harbour steps and filled lamp {n} with oil.",
     {"ada": ("direct", 1000 + n)}, 1000 + n)
    for n in range(10, 40)
]

EPISODE_ROWS = [
    ("ada", 1, 0, 1000, "Scene 1. I lit the lamps along the quay and found the key behind the door."),
    ("ada", 2, 1000, 5500, "Scene 2. I heard Osric read the journal out: Cy sold the oil to the smugglers."),
    ("ada", 3, 5500, 9000, "Scene 3. The council put out the harbour lamps and I walked home."),
    ("ben", 1, 0, 1000, "Scene 1. I buried the silver compass under the old quay steps at midnight."),
    ("cy", 2, 1000, 5500, "Scene 2. I watched the smugglers row the oil out past the Teeth."),
]


def _vector(text: str) -> list[float]:
    return [float(x) for x in EMBEDDER.embed([text])[0]]


def fact_row(fact_id: str, text: str, grants: dict[str, tuple[str, int]], start: int) -> dict[str, Any]:
    characters = sorted(grants, key=lambda c: (grants[c][1], c))
    row: dict[str, Any] = {name: None for name in FACTS.names}
    row.update(book=BOOK, character="", fact_id=fact_id, scene_id=1, text=text, evidence=text,
               source_start=start, source_end=start + len(text), visibility=characters,
               routes=[grants[c][0] for c in characters], visible_from=[grants[c][1] for c in characters],
               common=False, method="test", vector=_vector(text))
    return row


def episode_row(character: str, scene_id: int, start: int, end: int, text: str) -> dict[str, Any]:
    row: dict[str, Any] = {name: None for name in EPISODES.names}
    row.update(book=BOOK, character=character, scene_id=scene_id, status="present_active", scene_start=start,
               scene_end=end, source_start=start, source_end=end, text=text, method="test", vector=_vector(text))
    return row


@pytest.fixture
def uri(tmp_path: Path) -> str:
    store = LanceStore(str(tmp_path / "lancedb"))
    store.write("facts", PartitionRef(BOOK), [fact_row(*r) for r in FACTS_ROWS], FACTS)
    for character in sorted({e[0] for e in EPISODE_ROWS}):
        store.write("episodes", PartitionRef(BOOK, character),
                    [episode_row(*e) for e in EPISODE_ROWS if e[0] == character], EPISODES)
    # another book's facts, visible to a character of the same name, never leak across books
    other = fact_row("other:f01", SECRET.replace("Ben", "Ada"), {"ada": ("direct", 0)}, 0)
    store.write("facts", PartitionRef("other"), [{**other, "book": "other"}], FACTS)
    return store.uri


def _unfiltered_top(uri: str, text: str) -> str:
    table = LanceStore(uri).open("facts")
    hits = (table.search(np.asarray(_vector(text), dtype=np.float32)).bypass_vector_index()
            .distance_type("cosine").select(["fact_id"]).limit(1).to_arrow())
    return str(hits["fact_id"][0])


def _ids(rows: list[dict[str, Any]]) -> list[str]:
    return [str(r["fact_id"]) for r in rows]


@pytest.mark.parametrize("hybrid", [True, False])
@pytest.mark.parametrize("vector_index_min_rows", [5000, 0])  # flat scan, and IVF_FLAT probed everywhere
def test_an_invisible_fact_never_comes_back_even_for_its_own_words(uri, hybrid, vector_index_min_rows):
    assert _unfiltered_top(uri, SECRET) == "tale:f02"  # unbounded search ranks it first
    reader = MemoryReader(BOOK, "ada", EMBEDDER, uri=uri, hybrid=hybrid, vector_index_min_rows=vector_index_min_rows)
    rows = reader.vis_retrieve([SECRET, "silver compass quay steps", "Ben buried", ACCOUNT], k=50)
    assert rows and "tale:f02" not in _ids(rows) and "tale:f07" not in _ids(rows)
    assert all("ada" in r["visibility"] for r in rows)
    assert all(r["book"] == BOOK for r in rows) and "other:f01" not in _ids(rows)
    assert all("vector" not in r and {"score", "similarity", "route", "probe", "known_from"} <= r.keys() for r in rows)
    # Ben does get it, first, with his own route
    ben = MemoryReader(BOOK, "ben", EMBEDDER, uri=uri, hybrid=hybrid, vector_index_min_rows=vector_index_min_rows)
    top = ben.vis_retrieve([SECRET], k=3)[0]
    assert top["fact_id"] == "tale:f02" and top["route"] == "direct" and top["similarity"] == pytest.approx(1.0)


def test_a_rebuilt_book_is_searched_exactly_through_a_stale_ivf_index(uri):
    # a reader that searches through LanceDB builds IVF_FLAT over the old rows
    MemoryReader(BOOK, "ada", EMBEDDER, uri=uri, vector_index_min_rows=0, pool="lancedb")
    swapped = [fact_row(*r) for r in FACTS_ROWS if r[0] != "tale:f01"]
    swapped.append(fact_row("tale:f99", "The lighthouse key now hangs in the harbour office.", {"ben": ("direct", 50)},
                            50))
    LanceStore(uri).write("facts", PartitionRef(BOOK), swapped, FACTS)  # delete + add: new rows not in the index
    table = LanceStore(uri).open("facts")
    index = index_of(table, "vector", "IVF_FLAT")
    assert index and table.index_stats(index).num_unindexed_rows == len(swapped)
    columns = [n for n in table.schema.names if n != "vector"]

    def search(text: str, character: str, ivf_flat: bool) -> list[str]:
        vector = np.asarray(_vector(text), dtype=np.float32)
        return _ids(dense_search(table, vector, fact_filter(BOOK, character), 40, columns, ivf_flat=ivf_flat))

    key = "The lighthouse key hangs behind the chandler's door."
    stale = search(key, "ada", ivf_flat=True)
    assert stale == search(key, "ada", ivf_flat=False)  # exact: the same as the flat scan
    assert "tale:f01" not in stale and "tale:f99" not in stale and "tale:f03" in stale
    assert search("lighthouse key harbour office", "ben", ivf_flat=True)[0] == "tale:f99"
    # a reader rebuilds an index most rows have left
    MemoryReader(BOOK, "ada", EMBEDDER, uri=uri, vector_index_min_rows=0, pool="lancedb")
    assert LanceStore(uri).open("facts").index_stats(index).num_unindexed_rows == 0


def test_as_of_excludes_facts_stated_later_and_accounts_read_out_later(uri):
    reader = MemoryReader(BOOK, "ada", EMBEDDER, uri=uri)
    probes = [ACCOUNT, LATER, "lighthouse key"]
    everything = _ids(reader.vis_retrieve(probes, k=5))
    assert {"tale:f01", "tale:f04", "tale:f05"} <= set(everything)
    early = _ids(reader.vis_retrieve(probes, k=5, as_of=1000))
    assert "tale:f01" in early
    assert "tale:f04" not in early  # stated at 400, but Ada only hears it read out at 5000
    assert "tale:f05" not in early  # stated at 6000
    middle = reader.vis_retrieve(probes, k=5, as_of=5500)
    account = next(r for r in middle if r["fact_id"] == "tale:f04")
    assert account["known_from"] == 5000 and account["route"] == "observation"
    assert "tale:f05" not in _ids(middle)
    # Cy lived the account at 400: hers from then on
    cy = MemoryReader(BOOK, "cy", EMBEDDER, uri=uri)
    assert _ids(cy.vis_retrieve([ACCOUNT], k=1, as_of=1000)) == ["tale:f04"]


def test_probes_merge_by_fact_keeping_the_best_score_and_exclude_drops_ids(uri):
    reader = MemoryReader(BOOK, "ada", EMBEDDER, uri=uri, hybrid=False)
    rows = reader.vis_retrieve(["The lighthouse key hangs behind the chandler's door.", "lighthouse key", "  "], k=3)
    ids = _ids(rows)
    assert len(ids) == len(set(ids)) and ids[0] == "tale:f01"
    assert rows[0]["probe"] == "The lighthouse key hangs behind the chandler's door."
    assert [r["score"] for r in rows] == sorted((r["score"] for r in rows), reverse=True)
    assert len(reader.vis_retrieve(["lamp oil wick"], k=4)) == 4
    again = reader.vis_retrieve(["The lighthouse key hangs behind the chandler's door."], k=3, exclude={"tale:f01"})
    assert "tale:f01" not in _ids(again) and len(again) == 3
    assert reader.vis_retrieve([], k=3) == [] and reader.vis_retrieve(["   "], k=3) == []


def test_anchor_returns_only_the_characters_own_episodes_and_respects_as_of(uri):
    reader = MemoryReader(BOOK, "ada", EMBEDDER, uri=uri)
    ben_words = EPISODE_ROWS[3][4]
    rows = reader.anchor(ben_words, k=10)
    assert {r["character"] for r in rows} == {"ada"} and len(rows) == 3
    assert all("vector" not in r and isinstance(r["score"], float) for r in rows)
    assert reader.anchor("council put out the harbour lamps", k=1)[0]["scene_id"] == 3
    bounded = reader.anchor("council put out the harbour lamps", k=10, as_of=5500)
    assert sorted(r["scene_id"] for r in bounded) == [1, 2]
    assert reader.anchor("anything", k=10, as_of=10) == []


def test_missing_tables_or_rows_name_the_command_to_run(tmp_path, uri):
    empty = str(tmp_path / "empty")
    with pytest.raises(StorageError, match=r"run `reveriemem build tale`") as missing:
        MemoryReader(BOOK, "ada", EMBEDDER, uri=empty)
    assert str(missing.value).count(". ") == 0 and str(missing.value).endswith(".")
    with pytest.raises(StorageError, match=r"run `reveriemem build tale`.*focus characters"):
        MemoryReader(BOOK, "dora", EMBEDDER, uri=uri)
    with pytest.raises(StorageError, match=r"run `reveriemem build nowhere`"):
        MemoryReader("nowhere", "ada", EMBEDDER, uri=uri)
    only_facts = LanceStore(str(tmp_path / "half"))
    only_facts.write("facts", PartitionRef(BOOK), [fact_row(*FACTS_ROWS[0])], FACTS)
    with pytest.raises(StorageError, match=r"no episodes table.*run `reveriemem build tale`"):
        MemoryReader(BOOK, "ada", EMBEDDER, uri=only_facts.uri)
    reader = MemoryReader(BOOK, "ada", EMBEDDER, uri=uri, parquet_root=tmp_path / "parquet")
    with pytest.raises(StorageError, match=r"run `reveriemem build tale`"):
        reader.patterns("calm")
    with pytest.raises(StorageError, match=r"run `reveriemem build tale`"):
        reader.emotion_record()
    with pytest.raises(StorageError, match=r"run `reveriemem build tale`"):
        cut_offset(BOOK, scene=1, uri=uri)


def test_filter_values_are_quoted(uri):
    assert sql_literal("o'neil") == "'o''neil'"
    assert "array_has_any(visibility, ['o''neil'])" in fact_filter("tale", "o'neil")
    with pytest.raises(TypeError):
        fact_filter("tale", "ada", as_of="1 OR 1=1")  # type: ignore[arg-type]
    store = LanceStore(uri)
    store.write("episodes", PartitionRef(BOOK, "o'neil"), [episode_row("o'neil", 1, 0, 1000, "I painted it.")],
                EPISODES)
    reader = MemoryReader(BOOK, "o'neil", EMBEDDER, uri=uri)
    assert _ids(reader.vis_retrieve(["compass rose painted on the quay"], k=5)) == ["tale:f06"]
    injected = MemoryReader(BOOK, "ada", EMBEDDER, uri=uri)
    for attempt in ("ada'] ) OR true OR array_has_any(visibility, ['ben", "ada\\'] ) OR true --"):
        injected.character = attempt
        assert injected.vis_retrieve([SECRET], k=50) == []  # the whole string is one slug, matching nobody


def test_patterns_and_emotion_record_are_the_characters_own(tmp_path, uri):
    store = LanceStore(uri)
    for character, description in (("ada", "Calm orders about lamps and oil."), ("ben", "Frightened denials.")):
        row: dict[str, Any] = {name: None for name in PERSONALITY_PATTERNS.names}
        row.update(book=BOOK, character=character, pattern_id=1, description=description, excerpts=["x"],
                   method="test", vector=_vector(description))
        store.write("personality_patterns", PartitionRef(BOOK, character), [row], PERSONALITY_PATTERNS)
    parquet = ParquetStore(tmp_path / "parquet")
    steps = []
    for step, start in ((2, 3000), (1, 100), (3, 7000)):
        row = {name: None for name in EMOTION_TRANSITIONS.names}
        row.update(book=BOOK, character="ada", step=step, start=start, end=start + 20, to_emotion="joy")
        steps.append(row)
    parquet.write("emotion_transitions", PartitionRef(BOOK, "ada"), steps, EMOTION_TRANSITIONS)
    reader = MemoryReader(BOOK, "ada", EMBEDDER, uri=uri, parquet_root=tmp_path / "parquet")
    found = reader.patterns("frightened denials", k=5)
    assert [p["character"] for p in found] == ["ada"] and "vector" not in found[0]
    assert [r["step"] for r in reader.emotion_record()] == [1, 2, 3]
    assert [r["step"] for r in reader.emotion_record(as_of=5000)] == [1, 2]


def test_cut_offset_resolves_scenes_and_chapters_and_lists_the_valid_range(uri):
    store = LanceStore(uri)
    rows = []
    for scene_id, chapter, start, end in ((1, 1, 0, 1000), (2, 1, 1000, 5500), (3, 2, 5500, 9000)):
        row: dict[str, Any] = {name: None for name in SCENES.names}
        row.update(book=BOOK, character="", scene_id=scene_id, chapter=chapter, start=start, end=end)
        rows.append(row)
    store.write("scenes", PartitionRef(BOOK), rows, SCENES)
    assert cut_offset(BOOK, scene=2, uri=uri) == 5500
    assert cut_offset(BOOK, chapter=1, uri=uri) == 5500 and cut_offset(BOOK, chapter=2, uri=uri) == 9000
    assert MemoryReader(BOOK, "ada", EMBEDDER, uri=uri).cut_offset(scene=1) == 1000
    with pytest.raises(CutPointError, match=r"no scene 7; its scenes are 1-3"):
        cut_offset(BOOK, scene=7, uri=uri)
    with pytest.raises(CutPointError, match=r"no chapter 0; its chapters are 1-2"):
        cut_offset(BOOK, chapter=0, uri=uri)
    with pytest.raises(CutPointError, match="either a scene or a chapter"):
        cut_offset(BOOK, scene=1, chapter=1, uri=uri)


@pytest.mark.slow
def test_demo_story_retrieval_for_elspeth_vane_stays_in_her_visibility():
    from click.testing import CliRunner

    from reveriemem.core.demo import DEMO_SLUG
    from reveriemem.core.settings import lancedb_uri
    from reveriemem_dagster.cli import main

    result = CliRunner().invoke(main, ["demo", "--lm", "none"])
    assert result.exit_code == 0, result.output
    facts = LanceStore(lancedb_uri()).read("facts", PartitionRef(DEMO_SLUG))
    hidden = [r for r in facts.drop("vector").to_dicts() if "elspeth-vane" not in r["visibility"]]
    assert hidden, "the demo has facts Elspeth Vane cannot know"
    reader = MemoryReader(DEMO_SLUG, "elspeth-vane", EMBEDDER)
    probes = [r["text"] for r in hidden[:40]] + ["Who took the Ledger of Lights?", "the Grey Heron's oil",
                                                   "Osric's confession", "the Horn Lamp on the fourteenth"]
    rows = reader.vis_retrieve(probes, k=8)
    assert rows
    assert all("elspeth-vane" in r["visibility"] for r in rows)
    assert not {r["fact_id"] for r in hidden} & set(_ids(rows))
    cut = cut_offset(DEMO_SLUG, chapter=2)
    assert all(r["known_from"] <= cut for r in reader.vis_retrieve(probes, k=8, as_of=cut))
    assert {r["character"] for r in reader.anchor("the harbour register", k=5)} == {"elspeth-vane"}


# ---------------------------------------------------------------- the in-memory pool against LanceDB

POOL_CHARACTERS = ["ada", "ben", "cy", "o'neil", "dora"]


class TableEmbedder:
    """Probe text -> a stored vector: random probes for random tables."""

    name = "table"
    dim = 384

    def __init__(self, vectors: dict[str, np.ndarray]):
        self.vectors = vectors

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts]).astype(np.float32)


def _random_table(uri: str, seed: int, ties: bool, rows: int = 400) -> tuple[list[dict[str, Any]],
                                                                             dict[str, np.ndarray]]:
    """Random unnormalised vectors (one zero; with `ties` some duplicated), random visibility lists of one to
    three characters in any order, `visible_from` entries sometimes null or missing, another book's rows too."""
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((rows, 384)).astype(np.float32) * rng.uniform(0.5, 3.0, (rows, 1)).astype(np.float32)
    for n in range(0, rows, 37 if ties else rows):
        vectors[n + 1] = vectors[n]  # exact ties: the flat scan and the pool both rank them in table order
    vectors[5] = 0.0  # LanceDB's cosine search never returns a zero vector
    facts = []
    for n in range(rows):
        seen = list(rng.choice(POOL_CHARACTERS, size=int(rng.integers(1, 4)), replace=False))
        start = int(rng.integers(0, 10_000))
        since: list[int | None] = [start + int(rng.choice([0, 0, 500, 3000])) for _ in seen]
        if rng.random() < 0.05:
            since[int(rng.integers(len(seen)))] = None
        if rng.random() < 0.05:
            since = since[:-1]
        row: dict[str, Any] = {name: None for name in FACTS.names}
        row.update(book=BOOK if n % 10 else "other", character="", fact_id=f"f{n:04d}", scene_id=n // 20,
                   text=f"fact {n}", evidence=f"evidence {n}", source_start=start, source_end=start + 40,
                   visibility=seen, routes=["observation"] * len(seen), visible_from=since, common=False,
                   method="test", vector=[float(x) for x in vectors[n]])
        facts.append(row)
    store = LanceStore(uri)
    for book in (BOOK, "other"):
        store.write("facts", PartitionRef(book), [f for f in facts if f["book"] == book], FACTS)
    for character in POOL_CHARACTERS:
        store.write("episodes", PartitionRef(BOOK, character), [episode_row(character, 1, 0, 100, "scene")], EPISODES)
    probes = {f"probe {n}": rng.standard_normal(384).astype(np.float32) for n in range(6)}
    probes.update({f"copy of f{n:04d}": vectors[n] * 2 for n in (0, 37, 74, 5)})
    return facts, probes


def _assert_same(memory: list[dict[str, Any]], lancedb: list[dict[str, Any]]) -> None:
    assert _ids(memory) == _ids(lancedb)
    for a, b in zip(memory, lancedb):
        assert a["score"] == pytest.approx(b["score"], abs=1e-5)
        assert a["similarity"] == pytest.approx(b["similarity"], abs=1e-5)
        assert {k: v for k, v in a.items() if k not in ("score", "similarity")} == \
               {k: v for k, v in b.items() if k not in ("score", "similarity")}


@pytest.mark.parametrize(("seed", "vector_index_min_rows", "ties"), [
    (0, 5000, True), (1, 5000, True),  # flat scan: exact ties ranked in table order, as the pool ranks them
    (2, 0, False),  # IVF_FLAT probed everywhere: exact, but it ranks exact ties in partition order
])
def test_the_in_memory_pool_returns_what_the_lancedb_query_returns(tmp_path, seed, vector_index_min_rows, ties):
    uri = str(tmp_path / "lancedb")
    facts, probes = _random_table(uri, seed, ties)
    embedder = TableEmbedder(probes)
    rng = np.random.default_rng(seed)
    options: dict[str, Any] = dict(uri=uri, hybrid=False, vector_index_min_rows=vector_index_min_rows)
    for character in POOL_CHARACTERS:
        memory = MemoryReader(BOOK, character, embedder, **options)
        lancedb = MemoryReader(BOOK, character, embedder, pool="lancedb", **options)
        pool = memory.fact_pool()
        assert pool is not None and lancedb.fact_pool() is None
        visible = {f["fact_id"] for f in facts if f["book"] == BOOK and character in f["visibility"]}
        assert len(pool) == len(visible) - ("f0005" in visible)  # the zero vector is left out
        for as_of in (None, 0, 3000, 20_000):
            for text in probes:
                expected = lancedb.vis_retrieve([text], k=5, as_of=as_of)
                assert set(_ids(expected)) <= visible
                _assert_same(memory.vis_retrieve([text], k=5, as_of=as_of), expected)
            for k in (1, 40):
                excluded = set(rng.choice(sorted(visible), size=8, replace=False)) | set(_ids(expected)[:3])
                several = list(probes)[:3] + list(probes)[-2:]
                _assert_same(memory.vis_retrieve(several, k=k, as_of=as_of, exclude=excluded),
                             lancedb.vis_retrieve(several, k=k, as_of=as_of, exclude=excluded))


def test_the_pool_is_read_once_per_character_and_capped(uri):
    reader = MemoryReader(BOOK, "ada", EMBEDDER, uri=uri, hybrid=False)
    pool = reader.fact_pool()
    assert pool is not None and reader.fact_pool() is pool and pool.character == "ada"
    assert len(pool) == 34 and pool.nbytes >= 34 * 384 * 4
    # by 1000 the key and the harbourmaster; by 5000 the wicks and the account read out at 5000; then the vote
    assert (pool.admitted(1000), pool.admitted(4999), pool.admitted(5000), pool.admitted()) == (2, 32, 33, 34)
    reader.character = "ben"  # a reader re-pointed at another character reads that character's set
    ben = reader.fact_pool()
    assert ben is not None and ben.character == "ben" and len(ben) == 3
    capped = MemoryReader(BOOK, "ada", EMBEDDER, uri=uri, hybrid=False, pool_max_rows=10)
    assert capped.fact_pool() is None  # 34 facts > 10: LanceDB answers, with the same results
    probes = ["lighthouse key", ACCOUNT, "lamp oil wick"]
    fresh = MemoryReader(BOOK, "ada", EMBEDDER, uri=uri, hybrid=False)
    _assert_same(fresh.vis_retrieve(probes, k=5, as_of=5500), capped.vis_retrieve(probes, k=5, as_of=5500))
    with pytest.raises(ValueError, match="pool"):
        MemoryReader(BOOK, "ada", EMBEDDER, uri=uri, pool="faiss")  # type: ignore[arg-type]


def _assert_same_up_to_ties(memory: list[dict[str, Any]], lancedb: list[dict[str, Any]], tie: float = 1e-6) -> None:
    """The same scores rank by rank; the same ids in the same order, except among facts whose cosines are equal
    up to float rounding (the hashing embedder's bags of words tie exactly in arithmetic, and each path breaks
    such a tie by the last bit of its own sum): those may come in another order, or swap at the k-th place."""
    assert len(memory) == len(lancedb)
    assert [r["score"] for r in memory] == pytest.approx([r["score"] for r in lancedb], abs=tie)
    groups: list[list[int]] = []
    for n, row in enumerate(lancedb):
        if groups and abs(row["score"] - lancedb[groups[-1][-1]]["score"]) <= tie:
            groups[-1].append(n)
        else:
            groups.append([n])
    for group in groups:
        if group[-1] < len(lancedb) - 1:  # the last run may be cut at k differently
            assert {memory[n]["fact_id"] for n in group} == {lancedb[n]["fact_id"] for n in group}
    held = {r["fact_id"]: r for r in lancedb}
    for row in memory:
        if row["fact_id"] in held:
            _assert_same([row], [held[row["fact_id"]]])


class CachedEmbedder:
    def __init__(self, embedder: Any):
        self.embedder, self.name, self.dim = embedder, embedder.name, embedder.dim
        self.cache: dict[str, np.ndarray] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in texts if t not in self.cache]
        if missing:
            self.cache.update(zip(missing, self.embedder.embed(missing)))
        return np.stack([self.cache[t] for t in texts])


@pytest.mark.slow
@pytest.mark.parametrize("embedder_name", ["all-MiniLM-L6-v2", "hash"])
def test_demo_story_pool_and_lancedb_query_agree_for_every_character(monkeypatch, embedder_name):
    """The demo story built offline: dense and hybrid VIS-RETRIEVE through the pool and through LanceDB.

    With all-MiniLM-L6-v2 the results are identical (ids, order, scores to 1e-6). With the hashing
    embedder, facts sharing as many words with a probe tie in arithmetic, so dense results are the same
    up to those ties, and hybrid results are identical wherever the dense rankings fused are.
    """
    from click.testing import CliRunner

    from reveriemem.core.demo import DEMO_SLUG
    from reveriemem.core.embeddings import open_embedder
    from reveriemem.core.settings import lancedb_uri
    from reveriemem_dagster.cli import main

    monkeypatch.setenv("REVERIEMEM_EMBEDDER", embedder_name)
    result = CliRunner().invoke(main, ["demo", "--lm", "none"])
    assert result.exit_code == 0, result.output
    store = LanceStore(lancedb_uri())
    facts = store.read("facts", PartitionRef(DEMO_SLUG)).drop("vector").to_dicts()
    focus = set(store.read("episodes", PartitionRef(DEMO_SLUG)).drop("vector")["character"])
    characters = sorted({c for f in facts for c in f["visibility"]} & focus)
    assert len(characters) >= 4
    cuts = [None, cut_offset(DEMO_SLUG, chapter=2)]
    probes = [f["text"] for f in facts[::40]] + ["Who took the Ledger of Lights?", "the Grey Heron's oil",
                                                  "Osric's confession", "the Horn Lamp on the fourteenth"]
    embedder = CachedEmbedder(open_embedder(embedder_name))
    strict = embedder_name != "hash"
    identical = 0
    for character in characters:
        readers = {(hybrid, pool): MemoryReader(DEMO_SLUG, character, embedder, hybrid=hybrid, pool=pool)
                   for hybrid in (False, True) for pool in ("memory", "lancedb")}

        def both(hybrid: bool, probe: str, as_of: int | None, exclude: set[str], k: int = 8,
                 readers: dict = readers) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            memory, lancedb = (readers[hybrid, pool].vis_retrieve([probe], k=k, as_of=as_of, exclude=exclude)
                               for pool in ("memory", "lancedb"))
            return memory, lancedb

        for as_of in cuts:
            for probe in probes:
                first = readers[False, "lancedb"].vis_retrieve([probe], k=8, as_of=as_of)
                for excluded in (set(), set(_ids(first)[:3])):
                    dense = both(False, probe, as_of, excluded)
                    assert all(character in r["visibility"] for r in dense[0])
                    if strict:
                        _assert_same(*dense)
                        _assert_same(*both(True, probe, as_of, excluded))
                        continue
                    _assert_same_up_to_ties(*dense)
                    fused = both(False, probe, as_of, set(), k=8 + len(excluded))  # the dense ranking fused
                    if _ids(fused[0]) == _ids(fused[1]):
                        _assert_same(*both(True, probe, as_of, excluded))
                        identical += 1
    assert strict or identical > 0


def test_what_follows_a_fact_is_read_only_from_what_the_character_knows(uri):
    """`follow` gives each fact the facts told closely after it: never one outside the character's
    visibility (Ben's secret sits between Ada's two facts), nor one she learns after `as_of`."""
    reader = MemoryReader(BOOK, "ada", EMBEDDER, uri=uri)
    first, third = reader.vis_retrieve(["lighthouse key chandler"], k=1), reader.vis_retrieve(["harbourmaster dawn"], k=1)
    assert _ids(first) == ["tale:f01"] and _ids(third) == ["tale:f03"]
    after = reader.follow(first + third, gap=200)
    assert _ids(after["tale:f01"]) == ["tale:f03"]  # f02, told in between, is Ben's alone
    assert _ids(after["tale:f03"]) == ["tale:f04"]  # the account Ada hears read out later
    assert "tale:f03" not in reader.follow(third, gap=200, as_of=1000)  # ...not yet hers at 1000
    assert reader.follow(first, gap=10) == {}  # nothing that close
    ben = MemoryReader(BOOK, "ben", EMBEDDER, uri=uri)
    assert _ids(ben.follow(ben.vis_retrieve([SECRET], k=1), gap=200)["tale:f02"]) == ["tale:f03"]


def test_the_order_books_were_built_in_does_not_change_what_a_probe_finds(tmp_path):
    later = [{**fact_row(f"late:f{n:02d}", f"The lamp oil of wick {n} burned blue on the harbour steps at midnight.",
                         {"ada": ("direct", n)}, n), "book": "late"} for n in range(60)]

    def store(name: str, late_first: bool | None) -> str:  # None: no late book at all
        lance = LanceStore(str(tmp_path / name))
        if late_first:
            lance.write("facts", PartitionRef("late"), later, FACTS)
        lance.write("facts", PartitionRef(BOOK), [fact_row(*r) for r in FACTS_ROWS], FACTS)
        for character in sorted({e[0] for e in EPISODE_ROWS}):
            lance.write("episodes", PartitionRef(BOOK, character),
                        [episode_row(*e) for e in EPISODE_ROWS if e[0] == character], EPISODES)
        MemoryReader(BOOK, "ada", EMBEDDER, uri=lance.uri).vis_retrieve(["lamp oil"])
        if late_first is False:
            lance.write("facts", PartitionRef("late"), later, FACTS)  # written after a reader searched
        return lance.uri

    probes = ["Who filled lamp 12 with oil on the harbour steps?", "lamp oil midnight", "the old quay steps"]
    found = {}
    for name, late_first in (("late-first", True), ("late-after", False), ("no-late", None)):
        reader = MemoryReader(BOOK, "ada", EMBEDDER, uri=store(name, late_first))
        found[name] = [[(r["fact_id"], round(r["score"], 6)) for r in reader.vis_retrieve([p], k=8)] for p in probes]
    assert found["late-first"] == found["late-after"] == found["no-late"]
