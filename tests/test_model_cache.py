"""The persistent model cache: hits skip the model, misses and failures do not."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path
from typing import Any, Literal

import dspy
import pydantic
import pytest

from reveriemem.core.errors import ModelOutputError
from reveriemem.models import FakeModel, open_model, register_fake, run_program, unregister_fake
from reveriemem.models.cache import ModelCache, cache_key, cache_path, model_cache
from reveriemem.models.usage import tracking


class Fact(pydantic.BaseModel):
    subject: str
    weight: int = 1


class Describe(dspy.Signature):
    """Describe the passage."""

    passage: str = dspy.InputField()
    names: list[str] = dspy.InputField()
    visible: bool = dspy.OutputField()
    mood: Literal["calm", "tense"] = dspy.OutputField()
    facts: list[Fact] = dspy.OutputField()
    note: str = dspy.OutputField()


class Judge(dspy.Signature):
    """Judge the passage."""

    passage: str = dspy.InputField()
    verdict: bool = dspy.OutputField()


INPUTS: dict[str, Any] = {"passage": "Holmes looked at Watson.", "names": ["Holmes", "Watson"]}
ANSWER = {"visible": True, "mood": "tense", "facts": [Fact(subject="Holmes", weight=3), Fact(subject="Watson")],
          "note": "42"}  # a str that looks like a number stays a str


def _fake(name: str = "fake") -> FakeModel:
    return FakeModel(lambda signature, inputs: {"verdict": True} if signature is Judge else ANSWER, name=name)


@pytest.mark.parametrize("module", [dspy.Predict, dspy.ChainOfThought])
def test_a_second_run_is_served_from_the_cache_with_typed_outputs(module) -> None:
    fake = _fake()
    handle = fake.handle(cache=True)
    first = run_program(handle, module(Describe), **INPUTS)
    assert len(fake.calls) == 1
    second = run_program(handle, module(Describe), **INPUTS)
    assert len(fake.calls) == 1  # no model call
    assert dict(second.items()) == dict(first.items())
    assert list(second.keys()) == list(first.keys())
    assert second.visible is True and second.mood == "tense" and second.note == "42"
    assert second.facts == [Fact(subject="Holmes", weight=3), Fact(subject="Watson")]
    assert all(isinstance(f, Fact) for f in second.facts)
    summary = handle.usage.summary()
    assert (summary["calls"], summary["cached_calls"]) == (1, 1)
    assert summary["total_tokens"] == handle.usage.summary()["total_tokens"] > 0


def test_the_cache_persists_on_disk_for_new_handles_and_processes() -> None:
    run_program(_fake().handle(cache=True), dspy.Predict(Describe), **INPUTS)
    model_cache().close()  # as a new process would, open the file again
    fresh = _fake()
    pred = run_program(fresh.handle(cache=True), dspy.Predict(Describe), **INPUTS)
    assert fresh.calls == [] and pred.facts[0] == Fact(subject="Holmes", weight=3)
    assert cache_path().name == "model_cache.sqlite" and cache_path().is_file()
    assert len(ModelCache(cache_path())) == 1


def test_other_models_inputs_programs_and_settings_miss() -> None:
    fake = _fake()
    run_program(fake.handle(cache=True), dspy.Predict(Describe), **INPUTS)
    other = _fake(name="other-model")
    run_program(other.handle(cache=True), dspy.Predict(Describe), **INPUTS)
    assert len(other.calls) == 1  # another model name
    run_program(fake.handle(cache=True), dspy.Predict(Describe), passage="Someone else.", names=["Holmes"])
    run_program(fake.handle(cache=True), dspy.Predict(Describe), passage=INPUTS["passage"], names=["Holmes"])
    run_program(fake.handle(cache=True, temperature=0.5), dspy.Predict(Describe), **INPUTS)
    run_program(fake.handle(cache=True), dspy.Predict(Describe.with_instructions("Describe it again.")), **INPUTS)
    assert len(fake.calls) == 5
    run_program(fake.handle(cache=True), dspy.Predict(Describe), **INPUTS)
    assert len(fake.calls) == 5  # the first one again: a hit


def test_key_covers_model_program_state_and_inputs() -> None:
    handle = _fake().handle(cache=True)
    program = dspy.Predict(Describe)
    key = cache_key(handle, program, INPUTS)
    assert len(key) == 64 and key == cache_key(_fake().handle(cache=True), dspy.Predict(Describe), dict(INPUTS))
    assert key == cache_key(handle, program, {"names": INPUTS["names"], "passage": INPUTS["passage"]})
    assert key != cache_key(_fake("x").handle(cache=True), program, INPUTS)
    assert key != cache_key(handle, dspy.ChainOfThought(Describe), INPUTS)
    with dspy.context(adapter=dspy.JSONAdapter()):
        assert key != cache_key(handle, program, INPUTS)  # another prompt format
    demonstrated = dspy.Predict(Describe)
    demonstrated.demos = [dspy.Example(passage="p", names=["n"], visible=False, mood="calm", facts=[], note="n")]
    assert key != cache_key(handle, demonstrated, INPUTS)  # compiled state (demos)

    class Changed(dspy.Signature):
        """Describe the passage."""

        passage: str = dspy.InputField()
        names: list[str] = dspy.InputField()
        visible: bool = dspy.OutputField()
        mood: Literal["calm", "tense", "gloomy"] = dspy.OutputField()  # another output type
        facts: list[Fact] = dspy.OutputField()
        note: str = dspy.OutputField()

    assert key != cache_key(handle, dspy.Predict(Changed), INPUTS)
    assert key != cache_key(handle, program, {**INPUTS, "extra": Fact(subject="x")})


def test_unparseable_output_is_never_cached_so_a_rerun_retries_it() -> None:
    broken = {"on": True}

    def handler(signature: Any, inputs: dict) -> Any:
        return "garbage, no fields" if broken["on"] else {"verdict": True}

    fake = FakeModel(handler)
    with pytest.raises(ModelOutputError):
        run_program(fake.handle(cache=True), dspy.Predict(Judge), retries=2, backoff=0.0, passage="p")
    assert len(model_cache()) == 0
    broken["on"] = False
    calls = len(fake.calls)
    assert run_program(fake.handle(cache=True), dspy.Predict(Judge), backoff=0.0, passage="p").verdict is True
    assert len(fake.calls) == calls + 1 and len(model_cache()) == 1


def test_a_rerun_calls_the_model_only_for_what_failed() -> None:
    first_pass = {"on": True}

    def handler(signature: Any, inputs: dict) -> Any:
        if first_pass["on"] and inputs["passage"] == "scene 2":
            return "garbage"
        return {"verdict": inputs["passage"] != "scene 3"}

    fake = FakeModel(handler)

    def run_book() -> tuple[list[bool | None], int]:
        handle = fake.handle(cache=True)
        verdicts: list[bool | None] = []
        for scene in ("scene 1", "scene 2", "scene 3"):
            try:
                verdicts.append(run_program(handle, dspy.Predict(Judge), retries=1, passage=scene).verdict)
            except ModelOutputError:
                verdicts.append(None)
        return verdicts, int(handle.usage.summary()["cached_calls"])

    assert run_book() == ([True, None, False], 0)
    first_pass["on"] = False
    before = len(fake.calls)
    assert run_book() == ([True, True, False], 2)
    assert [c.inputs["passage"] for c in fake.calls[before:]] == ["scene 2"]


def test_handles_say_whether_they_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    assert FakeModel().handle().cache is False
    assert open_model("fake").cache is False
    assert open_model("openai/x").cache is True
    assert open_model("openai/x", model_cache=False).cache is False
    monkeypatch.setenv("REVERIEMEM_MODEL_CACHE", "0")
    assert open_model("openai/x").cache is False
    fake = _fake()
    handle = fake.handle()  # not caching: every run calls the model
    for _ in range(2):
        run_program(handle, dspy.Predict(Judge), passage="p")
    assert len(fake.calls) == 2 and not cache_path().exists()


def test_registered_fakes_open_by_name() -> None:
    fake = _fake()
    register_fake("scripted", fake, cache=True)
    try:
        handle = open_model("fake:scripted")
        assert handle.cache and handle.is_fake and handle.name == "fake"
        for _ in range(2):
            assert run_program(open_model("fake:scripted"), dspy.Predict(Judge), passage="p").verdict is True
        assert len(fake.calls) == 1
    finally:
        unregister_fake("scripted")
    with pytest.raises(Exception, match="No fake model named 'scripted'"):
        open_model("fake:scripted")


def test_process_wide_tracking_counts_calls_and_hits() -> None:
    with tracking() as totals:
        for _ in range(3):
            run_program(_fake().handle(cache=True), dspy.Predict(Judge), passage="p")
    summary = totals.summary()
    assert (summary["calls"], summary["cached_calls"]) == (1, 2) and summary["total_tokens"] > 0
    run_program(_fake().handle(cache=True), dspy.Predict(Judge), passage="q")
    assert totals.summary()["calls"] == 1  # no longer listening


def test_a_damaged_cache_file_is_bypassed_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    cache_path().write_bytes(b"this is not a database" * 100)
    fake = _fake()
    for _ in range(2):
        assert run_program(fake.handle(cache=True), dspy.Predict(Judge), passage="p").verdict is True
    assert len(fake.calls) == 2
    assert "model cache could not be read" in caplog.text


def _write_entries(path: str, worker: int, count: int) -> None:
    cache = ModelCache(path)
    for i in range(count):
        cache.put(f"{worker}-{i}", f'{{"worker": {worker}, "i": {i}, "text": "{"x" * 200}"}}', model="m")
        assert cache.get(f"{worker}-{i}") is not None
    cache.close()


def test_several_processes_write_the_cache_at_once(tmp_path: Path) -> None:
    path = str(tmp_path / "shared" / "model_cache.sqlite")
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_write_entries, args=(path, w, 150)) for w in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [w.exitcode for w in workers] == [0, 0, 0]
    cache = ModelCache(path)
    assert len(cache) == 450
    for w in range(3):
        for i in (0, 77, 149):
            assert cache.get(f"{w}-{i}") == f'{{"worker": {w}, "i": {i}, "text": "{"x" * 200}"}}'
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _run_programs(worker: int, count: int) -> None:
    handle = _fake().handle(cache=True)
    for i in range(count):
        assert run_program(handle, dspy.Predict(Judge), passage=f"{worker}-{i}").verdict is True


def test_processes_running_programs_at_once_share_one_cache() -> None:
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_run_programs, args=(w, 40)) for w in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [w.exitcode for w in workers] == [0, 0]
    fake = _fake()
    handle = fake.handle(cache=True)
    for w in range(2):
        for i in range(40):
            assert run_program(handle, dspy.Predict(Judge), passage=f"{w}-{i}").verdict is True
    assert fake.calls == [] and handle.usage.summary()["cached_calls"] == 80
