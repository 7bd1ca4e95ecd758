"""The Dagster wiring: definitions load, the demo materialises, partitions behave."""

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from click.testing import CliRunner

from reveriemem.core.demo import DEMO_SLUG, demo_gold
from reveriemem.core.settings import data_home
from reveriemem.core.storage import ParquetStore, PartitionRef
from reveriemem_dagster.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_definitions_load_with_both_jobs_and_checks():
    from reveriemem_dagster.definitions import defs

    repo = defs.get_repository_def()
    assert {"book_memory", "character_memory"} <= {job.name for job in repo.get_all_jobs()}
    keys = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {"scenes", "utterances", "scene_rosters", "character_scenes"} <= keys
    checks = {key.name for key in defs.resolve_asset_graph().asset_check_keys}
    assert {"scenes_are_ordered", "rosters_are_complete"} <= checks


def _register_demo() -> None:
    from reveriemem.core.demo import demo_book_path, demo_characters_path

    result = CliRunner().invoke(main, ["add-book", str(demo_book_path()), "--characters",
                                       str(demo_characters_path()), "--name", DEMO_SLUG])
    assert result.exit_code == 0, result.output


def test_demo_builds_scenes_rosters_and_character_partitions():
    result = CliRunner().invoke(main, ["demo", "--lm", "none"])
    assert result.exit_code == 0, result.output
    assert "scenes (heuristic:" in result.output
    store = ParquetStore(data_home() / "parquet")
    rosters = store.read("scene_rosters", PartitionRef(DEMO_SLUG))
    gold = demo_gold()
    assert rosters["character"].n_unique() == len(gold["scenes"][0]["roster"])
    assert rosters["method"].str.starts_with("heuristic:").all()
    mara = store.read("character_scenes", PartitionRef(DEMO_SLUG, "mara-quell"))
    assert mara.height > 0 and (mara["status"] != "absent").all()
    # the instance under the data home knows the partitions and the runs
    from reveriemem_dagster.instance import get_instance

    instance = get_instance()
    assert DEMO_SLUG in instance.get_dynamic_partitions("book")
    assert "mara-quell" in instance.get_dynamic_partitions("character")
    records = instance.fetch_materializations(dg.AssetKey("scene_rosters"), limit=10).records
    assert len(records) == 1


def test_rebuild_replaces_only_that_books_rows(tmp_path):
    runner = CliRunner()
    assert runner.invoke(main, ["demo", "--lm", "none"]).exit_code == 0
    from reveriemem.core.demo import demo_book_path, demo_characters_path

    assert runner.invoke(main, ["add-book", str(demo_book_path()), "--characters", str(demo_characters_path()),
                                "--name", "copy"]).exit_code == 0
    assert runner.invoke(main, ["build", "copy", "--lm", "none"]).exit_code == 0
    store = ParquetStore(data_home() / "parquet")
    before = store.read("scene_rosters", PartitionRef(DEMO_SLUG))
    assert runner.invoke(main, ["build", "copy", "--lm", "none"]).exit_code == 0
    assert store.read("scene_rosters", PartitionRef(DEMO_SLUG)).equals(before)
    from reveriemem.core.settings import lancedb_uri
    from reveriemem.core.storage import LanceStore

    scenes = LanceStore(lancedb_uri())
    assert scenes.read("scenes", PartitionRef("copy")).height == scenes.read("scenes", PartitionRef(DEMO_SLUG)).height


def test_a_pair_outside_its_book_stores_no_rows():
    from reveriemem_dagster.build import build_book
    from reveriemem_dagster.definitions import ALL_ASSETS, CHARACTER_ASSETS
    from reveriemem_dagster.instance import get_instance
    from reveriemem_dagster.io_managers import MemoryIOManager
    from reveriemem_dagster.partitions import pair_key
    from reveriemem_dagster.resources import EmbeddingModel, LanguageModel

    _register_demo()
    build_book(DEMO_SLUG)
    instance = get_instance()
    instance.add_dynamic_partitions("character", ["sherlock-holmes"])
    result = dg.materialize(ALL_ASSETS, selection=CHARACTER_ASSETS, partition_key=pair_key(DEMO_SLUG, "sherlock-holmes"),
                            instance=instance, resources={"lm": LanguageModel(), "embedder": EmbeddingModel(),
                                                          "memory_io": MemoryIOManager()})
    assert result.success
    events = result.get_asset_materialization_events()
    assert len(events) == len(CHARACTER_ASSETS)
    for event in events:  # every per-character layer says so, and stores nothing
        assert event.event_specific_data.materialization.metadata["in_book"].value is False
    assert ParquetStore(data_home() / "parquet").read("character_scenes", PartitionRef(DEMO_SLUG, "sherlock-holmes")).height == 0


def test_unknown_book_says_what_to_run():
    result = CliRunner().invoke(main, ["build", "nope"])
    assert result.exit_code == 1 and "reveriemem add-book" in result.output


@pytest.mark.slow
def test_dagster_job_execute_materialises_the_demo(isolated_home):
    """The real CLI path: `dagster job execute` of the book job, then a character partition."""
    _register_demo()
    env = {**os.environ, "DAGSTER_HOME": str(isolated_home / "dagster")}
    tags = json.dumps({"dagster/partition": DEMO_SLUG})
    run = subprocess.run([sys.executable, "-m", "dagster", "job", "execute", "-m", "reveriemem_dagster.definitions",
                          "-j", "book_memory", "--tags", tags], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    rosters = ParquetStore(isolated_home / "parquet").read("scene_rosters", PartitionRef(DEMO_SLUG))
    assert rosters.height == len(demo_gold()["scenes"][0]["roster"]) * rosters["scene_id"].n_unique()
    tags = json.dumps({"dagster/partition": f"{DEMO_SLUG}|tobin-reddick", "dagster/partition/book": DEMO_SLUG,
                       "dagster/partition/character": "tobin-reddick"})
    run = subprocess.run([sys.executable, "-m", "dagster", "job", "execute", "-m", "reveriemem_dagster.definitions",
                          "-j", "character_memory", "--tags", tags], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    tobin = ParquetStore(isolated_home / "parquet").read("character_scenes", PartitionRef(DEMO_SLUG, "tobin-reddick"))
    assert tobin.height > 0
    assert pl.Series(tobin["status"]).str.starts_with("present").any()


@pytest.mark.slow
def test_workspace_validates():
    run = subprocess.run([sys.executable, "-m", "dagster", "definitions", "validate", "-w", "workspace.yaml"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]


@pytest.mark.slow
def test_a_whole_book_builds_every_layer_from_the_command_line(isolated_home):
    """Done-when of the Source-to-Memory issue: the demo's whole memory from one command, as Dagster runs.

    `reveriemem build` launches one run of the book-level assets and then one run per focus character
    through the instance (no run inside a run); CI runs the same command.
    """
    from reveriemem.core.settings import lancedb_uri
    from reveriemem.core.storage import LanceStore

    _register_demo()
    env = {**os.environ, "DAGSTER_HOME": str(isolated_home / "dagster")}
    run = subprocess.run([sys.executable, "-m", "reveriemem_dagster.cli", "build", DEMO_SLUG, "--lm", "none",
                          "--quiet"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    parquet, lance = ParquetStore(isolated_home / "parquet"), LanceStore(lancedb_uri())
    book = PartitionRef(DEMO_SLUG)
    assert lance.read("facts", book).height > 0 and parquet.read("entities", book).height > 0
    assert parquet.read("dialogue_records", book).height > 0
    mara = PartitionRef(DEMO_SLUG, "mara-quell")
    for asset in ("episodes", "personality_patterns"):
        assert lance.read(asset, mara).height > 0, asset
    assert parquet.read("emotion_transitions", mara).height > 0
    from reveriemem_dagster.instance import get_instance

    instance = get_instance()
    for key in ("facts", "episodes", "personality_patterns"):
        assert instance.get_latest_materialization_event(dg.AssetKey(key)) is not None, key
    assert len(instance.get_runs()) == 1 + len(demo_gold()["scenes"][0]["roster"])  # the book, then each character
