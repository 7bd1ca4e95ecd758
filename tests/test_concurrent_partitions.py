"""A build runs its characters' partitions at once: calls overlap, rows and output stay as in a serial build."""

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from assets import episodic, scenes
from reveriemem.core import progress
from reveriemem.core.demo import demo_book_path
from reveriemem.core.registry import prepare_book, write_book
from reveriemem.core.storage import MemoryStore, PartitionRef
from reveriemem.models import FakeModel, register_fake, unregister_fake
from reveriemem.source_to_memory.estimate import plausible_answer
from reveriemem_dagster.build import build_book
from tests.test_build_resume import TWO_CHARACTERS

SLUG = "ledger"
CHARACTERS = ["mara-quell", "tobin-reddick"]
BOOK_ASSETS = [scenes.scenes, scenes.utterances, scenes.scene_rosters]
CHARACTER_ASSETS = [scenes.character_scenes, episodic.episodes]


def _build(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, concurrency: int) -> dict[str, Any]:
    """Scenes, rosters and both characters' episodes in a fresh home, with a stand-in of 0.2 s per episode."""
    monkeypatch.setenv("REVERIEMEM_HOME", str(home))
    monkeypatch.setenv("REVERIEMEM_MAX_CONCURRENCY", str(concurrency))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    characters = tmp_path / "ledger.yaml"
    characters.write_text(TWO_CHARACTERS, encoding="utf-8")
    book, _ = prepare_book(demo_book_path(), characters, slug=SLUG)
    write_book(book)
    spans: list[tuple[str, float, float]] = []
    lock = threading.Lock()

    def answer(signature: Any, inputs: dict[str, Any]) -> dict[str, Any]:
        start = time.monotonic()
        if signature.__name__ == "SummariseSceneAsCharacter":
            time.sleep(0.2)
        with lock:
            spans.append((str(inputs.get("character", "")), start, time.monotonic()))
        return plausible_answer(signature, inputs)

    most = [0]

    def watch(event: progress.ProgressEvent) -> None:
        if event.kind == "in_flight":
            most[0] = max(most[0], event.done)

    register_fake("slow-stand-in", FakeModel(answer, name="slow-stand-in"))
    progress.add_listener(watch)
    try:
        report = build_book(SLUG, lm="fake:slow-stand-in", embedder="hash",
                            book_assets=BOOK_ASSETS, character_assets=CHARACTER_ASSETS)
    finally:
        progress.remove_listener(watch)
        unregister_fake("slow-stand-in")
    store = MemoryStore.for_home(str(home))
    tables = {f"{asset}[{c}]": store.read(asset, PartitionRef(SLUG, c)) for asset in ("character_scenes", "episodes")
              for c in CHARACTERS}
    return {"report": report, "spans": spans, "tables": tables, "most": most[0]}


def _overlap(spans: list[tuple[str, float, float]], first: str, second: str) -> bool:
    return any(a[1] < b[2] and b[1] < a[2] for a in spans if a[0].startswith(first)
               for b in spans if b[0].startswith(second))


@pytest.mark.slow
def test_characters_build_at_once_with_the_rows_of_a_serial_build(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = os.fstat(1)
    serial = _build(tmp_path / "serial", tmp_path, monkeypatch, 1)
    pooled = _build(tmp_path / "pooled", tmp_path, monkeypatch, 4)

    # the characters' calls overlap (and no note waits for another's answer)
    assert not _overlap(serial["spans"], "Mara", "Tobin") and serial["most"] == 1
    assert _overlap(pooled["spans"], "Mara", "Tobin") and 1 < pooled["most"] <= 4
    # same rows, and the report lists the runs in plan order whatever order they finished in
    for key, frame in serial["tables"].items():
        assert frame.height > 0
        assert pooled["tables"][key].equals(frame), key
    assert list(pooled["report"].metadata) == list(serial["report"].metadata)
    # one run for the book's assets and one per character; at once, the runs are cut by what each model step
    # reads: the scenes with the utterances, the rosters, and each character's scenes with its episodes
    assert serial["report"].runs == 3 and pooled["report"].runs == 2 + 2
    # the runs did not leave the process writing its output into a Dagster log file
    now = os.fstat(1)
    assert (now.st_dev, now.st_ino) == (terminal.st_dev, terminal.st_ino)

    # a rebuild at concurrency 4 repeats no finished partition
    register_fake("slow-stand-in", FakeModel(lambda signature, inputs: pytest.fail("a model call"), name="slow-stand-in"))
    try:
        again = build_book(SLUG, lm="fake:slow-stand-in", embedder="hash",
                           book_assets=BOOK_ASSETS, character_assets=CHARACTER_ASSETS)
    finally:
        unregister_fake("slow-stand-in")
    assert again.runs == 0 and not again.ran


def test_runs_go_one_by_one_for_a_model_that_answers_one_call_at_a_time() -> None:
    from reveriemem_dagster.parallel_runs import partitions_at_once

    register_fake("queue", FakeModel(responses=[{"said": "a"}], name="queue"))
    try:
        assert partitions_at_once("fake:queue") == 1
        assert partitions_at_once("none") == 1
    finally:
        unregister_fake("queue")

