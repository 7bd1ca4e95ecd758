"""A build killed midway resumes with identical outputs and no repeated model call; concurrent writers;
the cost estimate; a one-megabyte chapter and a one-line scene built offline."""

import hashlib
import json
import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from reveriemem.core.demo import DEMO_SLUG, demo_book_path, demo_characters_path

TABLES = {"parquet": ["utterances", "scene_rosters", "scene_graphs", "entities", "memberships", "dialogue_records"],
          "lancedb": ["scenes", "facts"]}
PAIR_TABLES = {"parquet": ["character_scenes", "emotion_transitions"], "lancedb": ["episodes", "personality_patterns"]}


def _build_child(home: str, log: str, block_at: int) -> None:
    """In a fresh process: build the demo with a caching stand-in model that logs every answer.

    With `block_at` > 0 the stand-in hangs on that call and every later one, so the parent can kill
    the build there. Calls run four at a time (`REVERIEMEM_MAX_CONCURRENCY`), so a kill lands on a
    pool with calls in flight.
    """
    os.environ.update({"REVERIEMEM_HOME": home, "REVERIEMEM_LM": "none", "REVERIEMEM_EMBEDDER": "hash",
                       "REVERIEMEM_MAX_CONCURRENCY": "4"})
    os.environ.pop("DAGSTER_HOME", None)
    from reveriemem.core.registry import list_books, prepare_book, write_book
    from reveriemem.models import FakeModel, register_fake
    from reveriemem.source_to_memory.estimate import plausible_answer
    from reveriemem_dagster.build import build_book

    if DEMO_SLUG not in list_books():
        book, _ = prepare_book(demo_book_path(), demo_characters_path(), slug=DEMO_SLUG)
        write_book(book)
    answered = [0]
    lock = threading.Lock()

    def handler(signature, inputs):
        name = signature.__name__  # one log line per call (a signature class prints over several lines)
        key = hashlib.sha256(json.dumps([name, inputs], sort_keys=True, default=str).encode()).hexdigest()
        with lock:
            answered[0] += 1
            number = answered[0]
        if block_at and number >= block_at:
            with lock, open(log, "a") as out:
                out.write("BLOCKED\n")
            time.sleep(600)
        with lock, open(log, "a") as out:
            out.write(f"{name} {key}\n")
        return plausible_answer(signature, inputs)

    register_fake("stand-in", FakeModel(handler, name="stand-in"), cache=True)
    build_book(DEMO_SLUG, lm="fake:stand-in", embedder="hash")


def _run(home: Path, log: Path, block_at: int = 0) -> multiprocessing.Process:
    process = multiprocessing.get_context("spawn").Process(target=_build_child, args=(str(home), str(log), block_at))
    process.start()
    return process


def _calls(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if line != "BLOCKED"] if log.exists() else []


def _snapshot(home: Path) -> dict[str, pl.DataFrame]:
    os.environ["REVERIEMEM_HOME"] = str(home)
    from reveriemem.core.registry import load_book
    from reveriemem.core.settings import lancedb_uri
    from reveriemem.core.storage import LanceStore, ParquetStore, PartitionRef

    parquet, lance = ParquetStore(home / "parquet"), LanceStore(lancedb_uri())
    parts = [(PartitionRef(DEMO_SLUG), TABLES)]
    parts += [(PartitionRef(DEMO_SLUG, c.slug), PAIR_TABLES) for c in load_book(DEMO_SLUG).characters]
    out = {}
    for part, tables in parts:
        for backend, names in tables.items():
            for name in names:
                frame = parquet.read(name, part) if backend == "parquet" else lance.read(name, part)
                out[f"{name}[{part.character}]"] = frame.sort(frame.columns[:4]) if frame.height else frame
    return out


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_build_killed_midway_resumes_with_identical_outputs_and_no_repeated_model_call(tmp_path):
    clean_home, clean_log = tmp_path / "clean", tmp_path / "clean.log"
    clean = _run(clean_home, clean_log)
    clean.join(600)
    assert clean.exitcode == 0
    total = _calls(clean_log)
    assert len(total) > 20

    home, first_log, second_log = tmp_path / "killed", tmp_path / "first.log", tmp_path / "second.log"
    block_at = len(total) // 2
    first = _run(home, first_log, block_at=block_at)
    deadline = time.monotonic() + 600
    while "BLOCKED" not in (first_log.read_text() if first_log.exists() else ""):
        assert time.monotonic() < deadline and first.is_alive()
        time.sleep(0.2)
    time.sleep(3)  # the calls in flight before the block finish and reach the cache; every later one hangs
    os.kill(first.pid, signal.SIGKILL)
    first.join()
    done_before_kill = _calls(first_log)
    assert 0 < len(done_before_kill) <= block_at - 1

    second = _run(home, second_log)
    second.join(600)
    assert second.exitcode == 0
    resumed = _calls(second_log)
    assert not set(resumed) & set(done_before_kill)  # no model call repeated
    assert len(done_before_kill) + len(resumed) == len(total)

    expected, got = _snapshot(clean_home), _snapshot(home)
    assert expected.keys() == got.keys()
    for name, frame in expected.items():
        assert got[name].equals(frame), name


def _write_partition(uri: str, character: str, rounds: int) -> None:
    from reveriemem.core.schemas import FACTS
    from reveriemem.core.storage import LanceStore, PartitionRef

    store = LanceStore(uri)
    for round_ in range(rounds):
        rows = [{"book": "b", "character": character, "fact_id": f"{character}:{round_}:{i}", "scene_id": 1,
                 "subject": "", "predicate": "", "object": "", "cause": "", "subject_entity": None,
                 "object_entity": None, "text": "t", "evidence": "e", "source_start": i, "source_end": i + 1,
                 "statements": [], "visibility": [character], "routes": ["direct"], "visible_from": [0],
                 "grants": [], "organisations": [], "common": False, "method": "m", "error": None,
                 "vector": [0.0] * 384} for i in range(50)]
        store.write("facts", PartitionRef("b", character), rows, FACTS)


@pytest.mark.slow
def test_partitions_written_at_the_same_time_never_corrupt_a_table(tmp_path):
    from reveriemem.core.storage import LanceStore, PartitionRef

    uri = str(tmp_path / "lancedb")
    _write_partition(uri, "seed", 1)
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_write_partition, args=(uri, f"c{n}", 5)) for n in range(4)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(300)
        assert writer.exitcode == 0
    store = LanceStore(uri)
    for n in range(4):
        rows = store.read("facts", PartitionRef("b", f"c{n}"))
        assert rows.height == 50 and set(rows["fact_id"].str.split(":").list.get(1)) == {"4"}
    assert store.read("facts", PartitionRef("b", "seed")).height == 50


@pytest.mark.slow
def test_estimate_prints_calls_and_tokens_without_touching_the_users_data(demo_book):
    from reveriemem.core.registry import write_book
    from reveriemem_dagster.cli import main
    from reveriemem_dagster.instance import get_instance

    write_book(demo_book)
    result = CliRunner().invoke(main, ["estimate", DEMO_SLUG, "--lm", "none"])
    assert result.exit_code == 0, result.output
    assert "ExtractSceneGraph" in result.output and "SummariseSceneAsCharacter" in result.output
    assert "prompt tokens per book token" in result.output and "no call to none was made" in result.output
    assert not get_instance().get_runs()  # the dry run used a scratch home


@pytest.mark.slow
def test_a_one_megabyte_chapter_and_a_one_line_scene_build_offline(tmp_path):
    from reveriemem.core.settings import lancedb_uri
    from reveriemem.core.storage import LanceStore, PartitionRef
    from reveriemem_dagster.cli import main
    from tests.conftest import write_book

    sentence = "Ada walked along the quay and Ben watched the boats come in before the rain. "
    body = ("CHAPTER I.\n\n" + "\n\n".join(sentence * 40 for _ in range(340)) + "\n\nCHAPTER II.\n\n"
            + '"Enough," said Ada.\n')
    assert len(body) > 1_000_000
    path = write_book(tmp_path, body, name="long.txt")
    characters = tmp_path / "long.yaml"
    characters.write_text("characters:\n  - name: Ada\n  - name: Ben\n  - name: Cyril Nobody\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["add-book", str(path), "--characters", str(characters)])
    if result.exit_code != 0:  # a character none of whose names occur is refused at registration
        characters.write_text("characters:\n  - name: Ada\n  - name: Ben\n", encoding="utf-8")
        result = CliRunner().invoke(main, ["add-book", str(path), "--characters", str(characters)])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["build", "long", "--lm", "none", "--embedder", "hash", "--quiet"])
    assert result.exit_code == 0, result.output
    facts = LanceStore(lancedb_uri()).read("facts", PartitionRef("long"))
    assert facts.height > 1000 and (facts["visibility"].list.len() > 0).all()
    episodes = LanceStore(lancedb_uri()).read("episodes", PartitionRef("long", "ada"))
    assert episodes.height >= 2  # the long chapter and the one-line scene
