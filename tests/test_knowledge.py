"""The Semantic layer: locating quotations, passages, entities, facts, offline evidence units, assets."""

import json

import dagster as dg
import polars as pl
import pytest

from reveriemem.core.demo import DEMO_SLUG, demo_gold
from reveriemem.core.registry import prepare_book
from reveriemem.models import FakeModel
from reveriemem.source_to_memory.entities import canonical_entities, normal_key, offline_entities, offline_entity_type
from reveriemem.source_to_memory.facts import EVIDENCE_METHOD, evidence_units, relation_facts
from reveriemem.source_to_memory.reading import BookReading
from reveriemem.source_to_memory.semantic import SceneGraph, extract_scene_graphs, locate, scene_passages


def test_locate_finds_exact_normalised_and_paraphrased_quotes():
    text = "He said: “I locked it myself last night.”\n\nThe  ledger\nwas gone before the gulls were up."
    exact = locate(text, "I locked it myself", 0, len(text))
    assert exact is not None and text[exact[0]:exact[1]] == "I locked it myself"
    spread = locate(text, "the ledger was gone", 0, len(text))
    assert spread is not None and text[spread[0]:spread[1]] == "The  ledger\nwas gone"
    near = locate(text, "The ledger was gone before the gulls came up", 0, len(text))
    assert near is not None and "gulls" in text[near[0]:near[1]]
    assert locate(text, "a sentence that is nowhere in this text at all", 0, len(text)) is None
    assert locate(text, "", 0, len(text)) is None


def test_passages_cover_the_scene_within_the_word_limit_even_for_a_one_megabyte_chapter():
    sentence = "The lamp burned on its iron post above the rocks. "
    chapter = sentence * (1_000_000 // len(sentence))
    passages = scene_passages(chapter, 1, 0, len(chapter), limit=1500)
    assert passages[0].start == 0 and passages[-1].end == len(chapter.rstrip())
    assert all(a.end <= b.start for a, b in zip(passages, passages[1:]))
    assert max(len(chapter[p.start:p.end].split()) for p in passages) <= 3000
    one_line = "Quiet."
    assert [(p.start, p.end) for p in scene_passages(one_line, 1, 0, len(one_line))] == [(0, 6)]


def test_entity_keys_and_offline_types():
    assert normal_key("The Lamplighters' Guild") == normal_key("the lamplighters' guild")
    assert normal_key("Dask's") == "dask"
    assert offline_entity_type("Rope Walk") == "location"
    assert offline_entity_type("Lamplighters' Guild") == "organisation"
    assert offline_entity_type("Quarter Day") == "time"
    assert offline_entity_type("Mr. Greaves") == "person"


def test_offline_entity_names_read_as_a_reader_writes_them(tmp_path):
    """An offline entity is named on one line and without a possessive, a focus character called by a title
    that fits ("Master Silver", broken over two lines) is that character, not a new person, and a title alone
    ("Mrs" of "Mrs. Hawkins") is no entity."""
    story = ("CHAPTER I.\r\n\r\nWe sailed for Captain Kidd's anchorage at dawn. The men spoke of Master\r\n"
             "Silver and of the old days. Silver laughed at them.\r\n\r\nAt noon we saw Captain Kidd's hill, "
             "and later the hut where Captain Kidd had hidden. Master\r\nSilver said nothing of Mrs. Hawkins or of "
             "Mrs. Hawkins's inn. Jim kept watch.\r\n")
    (tmp_path / "tale.txt").write_bytes(story.encode())
    (tmp_path / "cast.yaml").write_text("characters:\n  - name: Long John Silver\n    gender: male\n"
                                        "    aliases: [Silver]\n  - name: Jim Hawkins\n    gender: male\n"
                                        "    aliases: [Jim]\n", encoding="utf-8")
    book, _ = prepare_book(tmp_path / "tale.txt", tmp_path / "cast.yaml", slug="tale")
    names = {e.entity_id: e.name for e in offline_entities(book, [(1, 0, len(book.text))]).entities.values()}
    assert names["person:captain-kidd"] == "Captain Kidd"
    assert not [n for n in names.values() if "\n" in n or n.endswith("'s")]
    assert "person:master-silver" not in names
    assert "person:mrs" not in names  # a title alone names no one


def _graph(scene_id, entities=(), relations=()):
    return SceneGraph(scene_id, 0, 0, 0, method="model:fake", entities=list(entities), relations=list(relations))


def test_aliases_unify_across_scenes_and_facts_deduplicate(demo_book):
    graphs = [
        _graph(1, [{"name": "the Ledger of Lights", "type": "object", "aliases": ["the ledger"]},
                   {"name": "Old Pen", "type": "person"}]),
        _graph(4, [{"name": "Ledger of Lights", "type": "object"},
                   {"name": "Osric Penhallow", "type": "person", "affiliations": ["the Guild"]}]),
    ]
    table = canonical_entities(demo_book, graphs)
    ledger = table.lookup("the ledger")
    assert ledger == table.lookup("Ledger of Lights") and ledger.startswith("object:")
    assert table.entities[ledger].scenes == {1, 4}
    assert table.lookup("Old Pen") == table.lookup("Penhallow") == "person:osric-penhallow"
    assert table.entities[table.lookup("the Guild")].type == "organisation"

    relation = {"subject": "Osric Penhallow", "predicate": "hid", "object": "the Ledger of Lights", "cause": "",
                "evidence": "x", "evidence_start": 10, "evidence_end": 20, "participants": [], "witnesses": []}
    again = dict(relation, subject="Penhallow", object="the ledger", evidence_start=500, evidence_end=510,
                 cause="he feared the council")
    graphs.append(_graph(8, relations=[relation, again]))
    facts = relation_facts(demo_book, table, graphs)
    assert len(facts) == 1
    fact = facts[0]
    assert [s.start for s in fact.evidence_facts.statements] == [10, 500]
    assert fact.cause == "he feared the council"
    assert fact.evidence_facts.participants == {"osric-penhallow"}  # the subject lived it
    assert fact.subject_entity == "person:osric-penhallow" and fact.object_entity == ledger


def test_offline_evidence_units_credit_speakers_and_actors(demo_book):
    reading = BookReading(demo_book)
    spans = reading.heuristic_scenes()
    speakers = {u.start: u.speaker for u in reading.utterances(spans) if u.speaker}
    first = spans[0]
    scene = (1, reading.paragraphs[first.first].start, reading.paragraphs[first.last].end)
    units = evidence_units(demo_book, [scene], speakers)
    assert units and all(u.method == EVIDENCE_METHOD for u in units)
    locked = next(u for u in units if "I locked it myself" in u.evidence)
    assert locked.evidence_facts.participants == {"tobin-reddick"} and locked.evidence_facts.statements[0].spoken
    lit = next(u for u in units if u.evidence.startswith("Ansel Harrow had unlocked"))
    assert "ansel-harrow" in lit.evidence_facts.participants
    assert all(demo_book.text[u.evidence_start:u.evidence_end] == u.evidence for u in units)


def test_a_malformed_scene_is_recorded_as_failed_and_the_rest_completes(demo_book):
    def handler(signature, inputs):
        if "harbour office stood at the root" in inputs["passage"]:
            return "this is not JSON at all {"
        return {"entities": [], "relations": [
            {"subject": "Mara Quell", "predicate": "stood", "object": "by the hearth", "evidence": "Mara Quell stood"}],
            "accounts": []}

    reading = BookReading(demo_book)
    spans = reading.heuristic_scenes()
    scenes = [(i, reading.paragraphs[s.first].start, reading.paragraphs[s.last].end) for i, s in enumerate(spans, 1)]
    fake = FakeModel(handler)
    graphs = extract_scene_graphs(demo_book, scenes, fake.handle())
    failed = [g for g in graphs if g.failed]
    assert len({g.scene_id for g in failed}) == 1 and "could not be parsed" in failed[0].error
    assert all(not g.failed for g in graphs if g.scene_id != failed[0].scene_id)
    assert len({g.scene_id for g in graphs}) == len(scenes)


def _materialise(lm: str = "none") -> dict:
    from click.testing import CliRunner

    from reveriemem_dagster.build import build_book
    from reveriemem_dagster.cli import main

    result = CliRunner().invoke(main, ["demo", "--lm", "none"]) if lm == "none" else None
    if result is not None:
        assert result.exit_code == 0, result.output
        return {}
    report = build_book(DEMO_SLUG, lm=lm, embedder="hash")
    return report.metadata


def _stored(asset: str) -> pl.DataFrame:
    from reveriemem.core.settings import data_home, lancedb_uri
    from reveriemem.core.storage import LanceStore, ParquetStore, PartitionRef

    part = PartitionRef(DEMO_SLUG)
    if asset == "facts":
        return LanceStore(lancedb_uri()).read("facts", part)
    return ParquetStore(data_home() / "parquet").read(asset, part)


def test_offline_build_gives_bounded_evidence_units_filterable_inside_lancedb():
    _materialise("none")
    facts = _stored("facts")
    assert facts.height > 100
    assert (facts["method"] == EVIDENCE_METHOD).all()
    # most facts are known to someone; the rest (known to nobody) are kept with an empty visibility set
    assert (facts["visibility"].list.len() > 0).sum() > 0.9 * facts.height
    entities = _stored("entities")
    assert {"person:mara-quell", "person:corwen-dask"} <= set(entities["entity_id"].to_list())
    # retrieval is bounded inside LanceDB: Elspeth's filtered search never returns a fact outside her set
    import lancedb

    from reveriemem.core.embeddings import open_embedder
    from reveriemem.core.settings import lancedb_uri

    table = lancedb.connect(lancedb_uri()).open_table("facts")
    query = open_embedder("hash").embed(["the heron pressed into the pitch of the bung"])[0]
    hits = (table.search(query).where("array_has_any(visibility, ['elspeth-vane'])", prefilter=True)
            .bypass_vector_index().limit(20).to_list())
    assert hits and all("elspeth-vane" in h["visibility"] for h in hits)
    journal = facts.filter(pl.col("evidence").str.contains("beads of water standing"))
    assert journal["visibility"].to_list() == [["mara-quell"]]  # her private journal, alone in the store
    # a first-person narrator knows what she tells, private reflections included
    for words in ("cask nearest the door", "I know now who bought those casks"):
        told = facts.filter(pl.col("evidence").str.contains(words, literal=True))
        assert told["visibility"].to_list() == [["mara-quell"]], words
    from reveriemem_dagster.instance import get_instance

    checks = get_instance().get_latest_materialization_event(dg.AssetKey("facts"))
    assert checks is not None


@pytest.mark.slow
def test_model_build_with_gold_extraction_stores_gold_visibility():
    from eval.gold_extraction import gold_graph_handler
    from reveriemem.core.registry import load_book
    from reveriemem.models.backends import register_fake, unregister_fake

    _materialise("none")  # registers the demo story
    book = load_book(DEMO_SLUG)
    gold = demo_gold()
    register_fake("gold", FakeModel(gold_graph_handler(book, gold), name="gold"))
    try:
        metadata = _materialise("fake:gold")
    finally:
        unregister_fake("gold")
    facts = _stored("facts")
    model_facts = facts.filter(pl.col("method").str.starts_with("model:"))
    assert model_facts.height >= 45  # gold facts found in the scenes the pipeline drew
    notice = model_facts.filter(pl.col("subject") == "the Master's notice")
    assert notice.height == 4
    for row in notice.iter_rows(named=True):
        routes = dict(zip(row["visibility"], row["routes"]))
        assert routes["mara-quell"] == routes["tobin-reddick"] == "organisation"
        assert "corwen-dask" not in routes and "elspeth-vane" not in routes
        assert row["organisations"] == ["the Lamplighters' Guild"]
    members = _stored("memberships")
    assert not members.filter((pl.col("character") == "corwen-dask") & pl.col("member")).height
    graphs = _stored("scene_graphs")
    assert graphs["method"].str.starts_with("model:").all()
    assert json.loads(graphs["payload"][0])["relations"] is not None
    assert metadata["facts"]["failed_scenes"] == 0
