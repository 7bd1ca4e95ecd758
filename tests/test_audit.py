"""`reveriemem export` and `reveriemem chapters`: what a user reads to check who knows what."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from reveriemem.core.demo import DEMO_SLUG, demo_book_path, demo_characters_path
from reveriemem.core.export import facts_seen_by, for_character, layer_rows
from reveriemem.core.storage import MemoryStore
from reveriemem.inference.memory_reader import cut_offset
from reveriemem_dagster.cli import main

MARA = "mara-quell"


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_facts_for_a_character_are_only_those_visible_to_them_with_their_route_and_offsets(built_demo):
    result = invoke("export", built_demo, "--layer", "facts", "--character", "Miss Quell")
    assert result.exit_code == 0, result.output
    rows = jsonl(result.stdout)
    stored = layer_rows(MemoryStore.for_home(), built_demo, "facts")
    visible = {r["fact_id"] for r in stored.to_dicts() if MARA in r["visibility"]}
    assert rows and {r["fact_id"] for r in rows} == visible
    assert len(visible) < stored.height  # some facts are kept from her, and the export leaves them out
    for row in rows:
        assert "vector" not in row
        assert row["visibility"] == [MARA]
        assert len(row["routes"]) == len(row["visible_from"]) == 1
        assert row["grants"] and {g["character"] for g in row["grants"]} == {MARA}
        assert row["routes"][0] in {g["route"] for g in row["grants"]}
        assert row["visible_from"][0] == min(g["offset"] for g in row["grants"])
        assert 0 <= row["source_start"] < row["source_end"]


def test_facts_seen_by_keeps_the_characters_entry_of_each_parallel_list():
    facts = pl.DataFrame({
        "fact_id": ["f1", "f2"],
        "visibility": [["a", "b"], ["b"]],
        "routes": [["direct", "observation"], ["told"]],
        "visible_from": [[10, 40], [5]],
        "grants": [[{"character": "a", "route": "direct", "offset": 10},
                    {"character": "b", "route": "observation", "offset": 40}],
                   [{"character": "b", "route": "told", "offset": 5}]],
    })
    cut = facts_seen_by(facts, "b").to_dicts()
    assert [(r["fact_id"], r["visibility"], r["routes"], r["visible_from"]) for r in cut] == [
        ("f1", ["b"], ["observation"], [40]), ("f2", ["b"], ["told"], [5])]
    assert cut[0]["grants"] == [{"character": "b", "route": "observation", "offset": 40}]
    assert facts_seen_by(facts, "c").is_empty()


def test_jsonl_and_parquet_exports_hold_the_same_rows(built_demo, tmp_path: Path):
    as_jsonl, as_parquet = tmp_path / "facts.jsonl", tmp_path / "out" / "facts.parquet"
    for fmt, out in (("jsonl", as_jsonl), ("parquet", as_parquet)):
        result = invoke("export", built_demo, "--layer", "facts", "--format", fmt, "--out", str(out))
        assert result.exit_code == 0, result.output
    from_parquet = pl.read_parquet(as_parquet)
    from_jsonl = pl.read_ndjson(as_jsonl, schema=from_parquet.schema)
    assert from_parquet.height == layer_rows(MemoryStore.for_home(), built_demo, "facts").height > 0
    assert from_jsonl.to_dicts() == from_parquet.to_dicts()
    assert "vector" not in from_parquet.columns
    assert {"visibility", "routes", "visible_from", "grants", "source_start", "source_end"} <= set(from_parquet.columns)
    assert invoke("export", built_demo, "--layer", "facts").stdout == as_jsonl.read_text(encoding="utf-8")


@pytest.mark.parametrize("layer", ["rosters", "episodes", "patterns"])
def test_character_layers_keep_only_that_characters_rows(built_demo, layer: str):
    result = invoke("export", built_demo, "--layer", layer, "--character", "Mara")
    assert result.exit_code == 0, result.output
    rows = jsonl(result.stdout)
    assert rows and {r["character"] for r in rows} == {MARA}
    everyone = jsonl(invoke("export", built_demo, "--layer", layer).stdout)
    assert len({r["character"] for r in everyone}) > 1


def test_scenes_for_a_character_are_those_their_roster_does_not_mark_absent(built_demo):
    store = MemoryStore.for_home()
    rosters = layer_rows(store, built_demo, "rosters")
    expected = set(rosters.filter((pl.col("character") == MARA) & (pl.col("status") != "absent"))["scene_id"])
    rows = jsonl(invoke("export", built_demo, "--layer", "scenes", "--character", "mara quell").stdout)
    assert {r["scene_id"] for r in rows} == expected
    assert all(r["status"] != "absent" and r["present_start"] is not None for r in rows)
    scenes = layer_rows(store, built_demo, "scenes")
    assert for_character("scenes", scenes, MARA, rosters).height == len(expected) < scenes.height


def test_an_unknown_character_is_one_sentence_naming_the_known_ones(built_demo):
    result = invoke("export", built_demo, "--layer", "facts", "--character", "Nobody")
    assert result.exit_code != 0
    assert result.output.strip().count("\n") == 0
    assert "Nobody" in result.output and "Mara Quell" in result.output and "Corwen Dask" in result.output


def test_a_book_not_built_is_one_sentence_saying_to_build_it():
    registered = invoke("add-book", str(demo_book_path()), "--characters", str(demo_characters_path()),
                        "--name", DEMO_SLUG)
    assert registered.exit_code == 0, registered.output
    result = invoke("export", DEMO_SLUG, "--layer", "facts")
    assert result.exit_code != 0
    assert result.output.strip().count("\n") == 0
    assert f"reveriemem build {DEMO_SLUG}" in result.output


def test_parquet_needs_a_file(built_demo):
    result = invoke("export", built_demo, "--layer", "facts", "--format", "parquet")
    assert result.exit_code != 0 and "--out" in result.output


def _chapter_lines(output: str) -> list[list[str]]:
    lines = [line.split("\t") for line in output.splitlines() if line.strip()]
    assert lines[0][0] == "chapter"
    return lines[1:]


def test_an_out_that_cannot_be_a_file_is_one_sentence(built_demo, tmp_path: Path):
    (tmp_path / "afile").write_text("")
    cases = {
        str(tmp_path): f"--out {tmp_path} is a directory; give a file path (such as {tmp_path / 'facts.jsonl'}).",
        "": "--out is empty; give a file path.",
        str(tmp_path / "missing" / "f.jsonl"):
            f"The folder {tmp_path / 'missing'} does not exist; create it or give --out another path.",
        str(tmp_path / "afile" / "f.jsonl"): f"{tmp_path / 'afile'} is a file, not a folder; give --out another path.",
    }
    for out, sentence in cases.items():
        result = invoke("export", built_demo, "--layer", "facts", "--format", "jsonl", "--out", out)
        assert result.exit_code == 1 and result.output.strip() == f"Error: {sentence}", (out, result.output)
    assert not (tmp_path / "missing").exists()


def test_chapters_lists_the_numbers_as_of_chapter_takes(built_demo):
    result = invoke("chapters", built_demo)
    assert result.exit_code == 0, result.output
    rows = _chapter_lines(result.stdout)
    assert [r[0] for r in rows] == ["1", "2", "3", "4", "5"]
    assert rows[0][5] == "CHAPTER I. THE GUILD HALL" and rows[4][5] == "CHAPTER V. QUARTER DAY"
    scenes = layer_rows(MemoryStore.for_home(), built_demo, "scenes")
    for number, start, end, cut, scene_ids, _heading in rows:
        assert int(cut) == cut_offset(built_demo, chapter=int(number)) == int(end)
        held = scenes.filter(pl.col("chapter") == int(number))
        assert int(start) == held["start"].min() and scene_ids.split("-")[0] == str(held["scene_id"].min())
    asked = invoke("ask", built_demo, "Mara", "Who keeps the ledger?", "--lm", "none", "--as-of-chapter", rows[1][0])
    assert asked.exit_code == 0, asked.output


def test_chapters_before_a_build_come_from_the_text_with_the_same_numbers(built_demo):
    built = _chapter_lines(invoke("chapters", built_demo).stdout)
    invoke("remove-book", built_demo)
    registered = invoke("add-book", str(demo_book_path()), "--characters", str(demo_characters_path()),
                        "--name", "unbuilt")
    assert registered.exit_code == 0, registered.output
    result = invoke("chapters", "unbuilt")
    assert result.exit_code == 0, result.output
    detected = _chapter_lines(result.stdout)
    assert [(r[0], r[1], r[5]) for r in detected] == [(r[0], r[1], r[5]) for r in built]
    assert all(r[3] == "-" and r[4] == "-" for r in detected)
    assert "reveriemem build unbuilt" in result.stderr


def test_the_export_command_offers_every_exported_layer():
    from reveriemem.core.export import LAYERS

    layer = next(p for p in main.commands["export"].params if p.name == "layer")
    assert list(layer.type.choices) == list(LAYERS)  # type: ignore[attr-defined]


def test_a_chapter_heading_stops_at_a_contents_page_or_a_sentence_of_prose():
    from reveriemem.core.demo import shipped_character_file
    from reveriemem.core.registry import prepare_book
    from reveriemem.source_to_memory.reading import BookReading
    from reveriemem_dagster.audit import _detected_chapters, _Headings

    path = Path(__file__).resolve().parents[2] / "shared" / "books" / "treasure-island.txt"
    if not path.exists():
        pytest.skip(f"{path} is not here")
    book, _ = prepare_book(path, shipped_character_file("treasure-island"))
    reading = BookReading(book)
    first = _detected_chapters(reading, _Headings(reading))[0]
    # the table of contents just before it is not part of chapter 1's heading; the title lines are
    assert first.heading == "TREASURE ISLAND PART ONE--The Old Buccaneer 1 The Old Sea-dog at the Admiral Benbow"
