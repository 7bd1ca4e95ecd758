"""`build_book` resumes: up-to-date partitions are skipped, failed scenes retried; the progress display."""

# No `from __future__ import annotations`: Dagster inspects the probe assets' annotations.

import io
from pathlib import Path
from typing import Any

import dagster as dg
import dspy
import pytest
from click.testing import CliRunner

from assets import scenes as scene_assets
from reveriemem.core import progress
from reveriemem.core.demo import demo_book_path
from reveriemem.core.errors import ModelOutputError
from reveriemem.core.registry import prepare_book, remove_book, write_book
from reveriemem.core.settings import data_home
from reveriemem.core.storage import ParquetStore, PartitionRef
from reveriemem.models import FakeModel, register_fake, run_program, unregister_fake
from reveriemem.models.usage import ModelCall
from reveriemem_dagster.build import BuildReport, PartitionStatus, build_book, plan_build
from reveriemem_dagster.instance import get_instance, register_partitions
from reveriemem_dagster.partitions import book_character_partitions, book_of_pair, book_partitions, partition_ref
from reveriemem_dagster.progress_display import ProgressDisplay
from reveriemem_dagster.resources import LanguageModel

SLUG = "ledger"
SCENE_BOOK = [scene_assets.scenes, scene_assets.utterances, scene_assets.scene_rosters]
SCENE_CHARACTER = [scene_assets.character_scenes]
TWO_CHARACTERS = """characters:
  - name: Mara Quell
    aliases: [Mara, Quell, Miss Quell]
    gender: female
  - name: Tobin Reddick
    aliases: [Tobin, Reddick, Wick]
    descriptors: [the apprentice]
    gender: male
"""


@pytest.fixture
def ledger(tmp_path: Path) -> str:
    """The demo story with two focus characters: a build is 1 book run + 2 character runs."""
    characters = tmp_path / "ledger.yaml"
    characters.write_text(TWO_CHARACTERS, encoding="utf-8")
    book, _ = prepare_book(demo_book_path(), characters, slug=SLUG)
    write_book(book)
    register_partitions(get_instance(), book)
    return SLUG


def _scene_build(slug: str, **kwargs: Any) -> BuildReport:
    return build_book(slug, book_assets=SCENE_BOOK, character_assets=SCENE_CHARACTER, **kwargs)


def _names(statuses: list[PartitionStatus]) -> list[tuple[str, str]]:
    return [(s.asset, s.partition) for s in statuses]


ALL_PARTITIONS = [("scenes", SLUG), ("utterances", SLUG), ("scene_rosters", SLUG),
                  ("character_scenes", f"{SLUG}|mara-quell"), ("character_scenes", f"{SLUG}|tobin-reddick")]


def test_a_rebuild_skips_what_is_done_and_force_redoes_it(ledger: str) -> None:
    first = _scene_build(ledger, lm="none")
    assert first.runs == 3 and _names(first.ran) == ALL_PARTITIONS and not first.skipped
    assert {s.reason for s in first.ran} == {"not materialised yet"}

    second = _scene_build(ledger, lm="none")
    assert second.runs == 0 and not second.ran and _names(second.skipped) == ALL_PARTITIONS
    assert second.metadata["scenes"]["scenes"] == first.metadata["scenes"]["scenes"]  # from the instance
    assert "character_scenes[tobin-reddick]" in second.metadata

    # a partition whose stored rows are gone is redone, alone
    ParquetStore(data_home() / "parquet").path("character_scenes", PartitionRef(SLUG, "tobin-reddick")).unlink()
    third = _scene_build(ledger, lm="none")
    assert third.runs == 1 and _names(third.ran) == [("character_scenes", f"{SLUG}|tobin-reddick")]
    assert third.ran[0].reason == "its stored rows are missing"

    forced = _scene_build(ledger, lm="none", force=True)
    assert forced.runs == 3 and _names(forced.ran) == ALL_PARTITIONS and {s.reason for s in forced.ran} == {"forced"}
    assert len(get_instance().get_runs()) == 3 + 0 + 1 + 3


def test_a_book_registered_again_with_other_text_is_stale_in_dagster(ledger: str, tmp_path: Path) -> None:
    _scene_build(ledger, lm="none")
    assert not plan_build(ledger, book_assets=SCENE_BOOK, character_assets=SCENE_CHARACTER).runs
    characters = tmp_path / "ledger.yaml"
    edited = tmp_path / "ledger.txt"
    edited.write_text(demo_book_path().read_text(encoding="utf-8").replace(" the ", " that ", 5), encoding="utf-8")
    remove_book(ledger)
    book, _ = prepare_book(edited, characters, slug=SLUG)
    write_book(book)
    register_partitions(get_instance(), book)  # observes book_text's new data version
    plan = plan_build(ledger, book_assets=SCENE_BOOK, character_assets=SCENE_CHARACTER)
    assert _names(plan.to_run) == ALL_PARTITIONS
    assert plan.to_run[0].reason == "book_text has a new data version"
    assert plan.to_run[1].reason == "scenes is rebuilt"


def test_another_model_or_embedder_rebuilds_what_the_first_one_made(ledger: str) -> None:
    _scene_build(ledger, lm="none", embedder="hash")
    register_fake("other", FakeModel())
    try:
        again = _scene_build(ledger, lm="fake:other", embedder="hash")
    finally:
        unregister_fake("other")
    assert _names(again.ran) == ALL_PARTITIONS
    assert again.ran[0].reason == "built with model none, not fake:other"
    embedder = _scene_build(ledger, lm="none", embedder="hash")  # back to none: built with fake:other now
    assert embedder.runs == 3
    same = _scene_build(ledger, lm="none", embedder="hash")
    assert same.runs == 0


def test_model_cache_and_skipping_leave_nothing_for_the_model(ledger: str) -> None:
    fake = FakeModel()  # placeholder answers for every step
    register_fake("resume", fake, cache=True)
    try:
        first = _scene_build(ledger, lm="fake:resume")
        calls = len(fake.calls)
        assert calls > 0 and first.usage["calls"] == calls and first.usage["cached_calls"] == 0
        assert first.metadata["scenes"]["method"].startswith("model:fake")

        again = _scene_build(ledger, lm="fake:resume")
        assert again.runs == 0 and len(fake.calls) == calls and again.usage["calls"] == 0

        forced = _scene_build(ledger, lm="fake:resume", force=True)  # every partition again, every answer cached
        # every partition again, in runs cut by what each model step reads (calls may overlap): the scenes with the
        # utterances, the rosters, and each character's
        assert forced.runs == 2 + 2 and len(fake.calls) == calls
        assert forced.usage["calls"] == 0 and forced.usage["cached_calls"] == calls
    finally:
        unregister_fake("resume")


# -- retrying failed scenes, with probe assets that record `failed_scenes` ---------------


class Probe(dspy.Signature):
    """Judge one scene."""

    scene: str = dspy.InputField()
    verdict: bool = dspy.OutputField()


@dg.asset(partitions_def=book_partitions)
def probe(context: dg.AssetExecutionContext, lm: LanguageModel) -> dg.MaterializeResult:
    handle = lm.handle()
    failed = 0
    for scene in ("scene 1", "scene 2", "scene 3"):
        try:
            run_program(handle, dspy.Predict(Probe), retries=1, scene=f"{context.partition_key}: {scene}")
        except ModelOutputError:
            failed += 1
    return dg.MaterializeResult(metadata={"failed_scenes": failed})


@dg.asset(partitions_def=book_character_partitions, deps=[dg.AssetDep(probe, partition_mapping=book_of_pair)])
def probe_character(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"character": partition_ref(context.partition_key).character or ""})


def test_retry_failed_reruns_only_failed_partitions_and_only_failed_scenes_call_the_model(ledger: str) -> None:
    broken = {"on": True}

    def handler(signature: Any, inputs: dict) -> Any:
        return "garbage" if broken["on"] and inputs["scene"].endswith("scene 2") else {"verdict": True}

    fake = FakeModel(handler)
    register_fake("flaky", fake, cache=True)

    def build(**kwargs: Any) -> BuildReport:
        return build_book(ledger, lm="fake:flaky", book_assets=[probe], character_assets=[probe_character], **kwargs)

    try:
        first = build()
        assert first.runs == 3 and first.metadata["probe"]["failed_scenes"] == 1
        before = len(fake.calls)  # scene 2 twice: ChatAdapter retries in JSON itself

        broken["on"] = False
        plain = build()  # resuming alone does not retry failures, but says so
        assert plain.runs == 0 and _names(plain.failed) == [("probe", SLUG)] and plain.failed[0].failed_scenes == 1

        retried = build(retry_failed=True)
        assert retried.ran[0].reason == "1 failed scenes"
        assert _names(retried.ran) == [("probe", SLUG), ("probe_character", f"{SLUG}|mara-quell"),
                                       ("probe_character", f"{SLUG}|tobin-reddick")]  # downstream follows
        assert [c.inputs["scene"] for c in fake.calls[before:]] == [f"{SLUG}: scene 2"]
        assert retried.usage["calls"] == 1 and retried.usage["cached_calls"] == 2
        assert retried.metadata["probe"]["failed_scenes"] == 0

        assert build(retry_failed=True).runs == 0
        assert not plan_build(ledger, retry_failed=True, book_assets=[probe], character_assets=[probe_character]).runs
    finally:
        unregister_fake("flaky")


def test_dagster_debug_log_stays_in_the_instance(ledger: str, capfd: pytest.CaptureFixture[str]) -> None:
    build_book(ledger, lm="fake", book_assets=[probe], character_assets=[probe_character])
    err = capfd.readouterr().err
    assert "STEP_START" not in err and "RUN_SUCCESS" not in err and " - DEBUG - " not in err
    instance = get_instance()
    run = instance.get_runs()[0]
    events = {entry.dagster_event.event_type_value for entry in instance.all_logs(run.run_id) if entry.dagster_event}
    assert {"STEP_START", "STEP_SUCCESS", "ASSET_MATERIALIZATION"} <= events


# -- the progress display --------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _call(tokens: int = 0, cached: bool = False) -> ModelCall:
    return ModelCall("m", tokens, 0, 0.1, ok=True, cached=cached)


def test_progress_line_shows_step_units_calls_tokens_elapsed_and_time_left() -> None:
    clock = Clock()
    display = ProgressDisplay(io.StringIO(), tty=False, clock=clock)
    display.on_progress(progress.ProgressEvent(SLUG, "episodes[mara-quell]", "started", 10, 0))
    clock.now += 20
    display.on_progress(progress.ProgressEvent(SLUG, "episodes[mara-quell]", "done", 0, 4))
    for tokens in (1500, 1500):
        display.on_call(_call(tokens))
    display.on_call(_call(cached=True))
    line = display.line()
    assert line == "episodes[mara-quell]: 4/10 scenes | 2 model calls (+1 cached), 3.0k tokens | 20s elapsed | ~30s left in step"


def test_progress_without_a_terminal_prints_a_line_at_most_every_ten_seconds() -> None:
    clock, out = Clock(), io.StringIO()
    display = ProgressDisplay(out, tty=False, clock=clock)
    display.message("ledger: scenes")
    display.render()
    display.on_call(_call(10))
    clock.now += 3
    display.render()  # changed, but too soon
    clock.now += 8
    display.render()
    display.render()  # nothing changed
    lines = out.getvalue().splitlines()
    assert lines[0] == "... ledger: scenes" and len(lines) == 3
    assert lines[1].startswith("ledger: scenes | 0 model calls") and lines[2].startswith("ledger: scenes | 1 model calls")


def test_progress_on_a_terminal_rewrites_one_line() -> None:
    clock, out = Clock(), io.StringIO()
    display = ProgressDisplay(out, tty=True, clock=clock)
    assert display.interval == 0.25
    display.on_progress(progress.ProgressEvent(SLUG, "scene_rosters", "started", 2, 0))
    display.render()
    display.render()  # the same line: not written again
    display.on_progress(progress.ProgressEvent(SLUG, "scene_rosters", "done", 0, 1))
    display.render()
    text = out.getvalue()
    assert "\n" not in text and text.count("\r\033[K") == 2 and "scene_rosters: 1/2 scenes" in text


def test_progress_display_listens_while_started() -> None:
    out = io.StringIO()
    with ProgressDisplay(out, tty=False, interval=60):
        progress.step_started(SLUG, "probe", 2)
        progress.unit_done(SLUG, "probe")
        run_program(FakeModel(lambda s, i: {"verdict": True}).handle(), dspy.Predict(Probe), scene="x")
    progress.unit_done(SLUG, "probe")  # stopped: no longer listening
    assert out.getvalue().startswith("probe: 1/2 scenes | 1 model calls, ")


def test_cli_build_passes_its_flags_and_quiet_hides_progress(ledger: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from reveriemem_dagster import build as build_module
    from reveriemem_dagster.cli import main

    seen: list[dict[str, Any]] = []

    def fake_build(slug: str, **kwargs: Any) -> BuildReport:
        seen.append(kwargs)
        kwargs.get("progress", lambda m: None)(f"{slug}: scenes")
        return BuildReport(book=slug, skipped=[PartitionStatus("probe", slug, False, "up to date", 2)],
                           usage={"calls": 3, "cached_calls": 5})

    monkeypatch.setattr(build_module, "build_book", fake_build)
    loud = CliRunner().invoke(main, ["build", ledger, "--force", "--retry-failed"])
    assert loud.exit_code == 0, loud.output
    assert seen[-1]["force"] and seen[-1]["retry_failed"]
    assert "... ledger: scenes" in loud.stderr
    assert "model calls 3 (+5 cached)" in loud.stdout and "skipped: probe" in loud.stdout
    assert "--retry-failed" in loud.stdout  # 2 failed scenes recorded
    quiet = CliRunner().invoke(main, ["build", ledger, "--quiet"])
    assert quiet.exit_code == 0 and quiet.stderr == "" and not seen[-1]["force"]
