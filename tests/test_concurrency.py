"""The pool of concurrent model calls: order, backoff, rate limits, the shared cache and resume."""

from __future__ import annotations

import io
import signal
import threading
import time
from typing import Any

import dspy
import pytest
from dspy import lm15

from reveriemem.core import progress
from reveriemem.core.errors import ModelOutputError, ModelUnavailableError, ReverieMemError
from reveriemem.models import FakeModel, map_calls, run_program
from reveriemem.models.cache import model_cache
from reveriemem.models.concurrency import RateLimiter, concurrency_for, rate_limiter, run_at_once
from reveriemem.models.llama_engine import LlamaCppEngine
from reveriemem_dagster.progress_display import ProgressDisplay


class Echo(dspy.Signature):
    """Repeat the number."""

    number: int = dspy.InputField()
    said: str = dspy.OutputField()


class InFlight:
    """The most calls the pool reported in flight at once."""

    def __init__(self) -> None:
        self.most = 0

    def __call__(self, event: progress.ProgressEvent) -> None:
        if event.kind == "in_flight":
            self.most = max(self.most, event.done)


def _slow_echo(latency: float = 0.05) -> FakeModel:
    def handler(signature: Any, inputs: dict) -> dict:
        number = int(inputs["number"])
        time.sleep(latency * (1 + (7 - number % 8)) / 8)  # later items finish first within a wave
        return {"said": f"n{number}"}

    return FakeModel(handler)


def _ask(handle: Any) -> Any:
    return lambda number: run_program(handle, dspy.Predict(Echo), backoff=0.01, number=number).said


def test_answers_come_back_in_input_order_and_equal_a_serial_run() -> None:
    watcher = InFlight()
    progress.add_listener(watcher)
    try:
        handle = _slow_echo().handle()
        pooled = map_calls(handle, _ask(handle), range(40), concurrency=8)
    finally:
        progress.remove_listener(watcher)
    serial_handle = _slow_echo(0.0).handle()
    serial = map_calls(serial_handle, _ask(serial_handle), range(40), concurrency=1)
    assert [a.result() for a in pooled] == [a.result() for a in serial] == [f"n{i}" for i in range(40)]
    assert 1 < watcher.most <= 8  # the calls did overlap, never more than the bound


def test_a_parse_failure_stays_at_its_place_and_the_rest_go_on() -> None:
    handle = FakeModel(lambda s, inputs: "garbage" if inputs["number"] == 3 else {"said": "ok"}).handle()
    answers = map_calls(handle, lambda n: run_program(handle, dspy.Predict(Echo), retries=1, number=n).said, range(8))
    with pytest.raises(ModelOutputError):
        answers[3].result()
    assert [answers[i].result() for i in range(8) if i != 3] == ["ok"] * 7


def test_a_rate_limit_refusal_is_waited_out_and_pauses_the_other_calls() -> None:
    refusals = [lm15.RateLimitError("slow down", provider="fake", retry_after=0.3) for _ in range(4)]
    lock = threading.Lock()
    starts: list[float] = []

    def handler(signature: Any, inputs: dict) -> dict:
        with lock:
            starts.append(time.monotonic())
            if inputs["number"] == 0 and refusals:
                raise refusals.pop()
        return {"said": str(inputs["number"])}

    handle = FakeModel(handler, name="rate-limited").handle()
    began = time.monotonic()
    answers = map_calls(handle, _ask(handle), range(6), concurrency=2)
    # four refusals are more than run_program's 3 tries for other transient errors
    assert [a.result() for a in answers] == [str(i) for i in range(6)]
    assert time.monotonic() - began >= 4 * 0.3  # each refusal's retry_after was honoured
    failed = [c for c in handle.usage.calls if not c.ok]
    assert len(failed) == 4 and {c.error for c in failed} <= {"LMRateLimitError", "RateLimitError"}


def test_requests_per_minute_are_limited_over_a_sliding_window() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    limiter = RateLimiter(rpm=3, clock=lambda: now[0], sleep=sleep)
    for t in (0.0, 1.0, 2.0):
        now[0] = t
        assert limiter.acquire() == 0
    now[0] = 10.0
    assert limiter.acquire() == pytest.approx(50.0)  # the 4th request waits for the 1st to leave the window
    assert now[0] == pytest.approx(60.0)


def test_tokens_per_minute_hold_calls_until_the_window_frees() -> None:
    now = [0.0]
    limiter = RateLimiter(tpm=1000, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    limiter.acquire()
    limiter.record_tokens(1200)
    now[0] = 5.0
    assert limiter.acquire() == pytest.approx(55.0)


def test_limits_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REVERIEMEM_MAX_RPM", "120")
    monkeypatch.setenv("REVERIEMEM_MAX_TPM", "40000")
    limiter = rate_limiter("env-model")
    assert (limiter.rpm, limiter.tpm) == (120, 40000)
    monkeypatch.setenv("REVERIEMEM_MAX_CONCURRENCY", "three")
    with pytest.raises(ReverieMemError, match="REVERIEMEM_MAX_CONCURRENCY must be a positive number"):
        concurrency_for(FakeModel().handle())


def test_the_cache_is_shared_by_the_threads_and_a_rerun_calls_nothing() -> None:
    fake = _slow_echo(0.01)
    handle = fake.handle(cache=True)
    first = [a.result() for a in map_calls(handle, _ask(handle), range(30), concurrency=8)]
    assert len(fake.calls) == 30 and len(model_cache()) == 30
    again = fake.handle(cache=True)
    second = [a.result() for a in map_calls(again, _ask(again), range(30), concurrency=8)]
    assert second == first
    assert len(fake.calls) == 30 and again.usage.cached_calls == 30


def test_a_failure_mid_pool_loses_no_answer_already_given() -> None:
    down = threading.Event()
    answered: set[int] = set()
    lock = threading.Lock()

    def handler(signature: Any, inputs: dict) -> dict:
        number = int(inputs["number"])
        if number == 12:
            down.set()
        if down.is_set() and number >= 12:
            raise lm15.AuthError("the key was revoked", provider="fake")
        time.sleep(0.01)
        with lock:
            answered.add(number)
        return {"said": f"n{number}"}

    fake = FakeModel(handler, name="flaky")
    handle = fake.handle(cache=True)
    answers = map_calls(handle, _ask(handle), range(40), concurrency=4)
    results = []
    with pytest.raises(ModelUnavailableError):
        for answer in answers:
            results.append(answer.result())
    assert results == [f"n{i}" for i in range(12)]  # in order, up to the failure
    assert len(model_cache()) == len(answered) >= 12  # every answer given is in the cache
    first_calls = len(fake.calls)

    down.clear()
    healthy = FakeModel(lambda s, inputs: {"said": f"n{int(inputs['number'])}"}, name="flaky")
    resumed = healthy.handle(cache=True)
    final = [a.result() for a in map_calls(resumed, _ask(resumed), range(40), concurrency=4)]
    assert final == [f"n{i}" for i in range(40)]
    assert sorted(int(c.inputs["number"]) for c in healthy.calls) == sorted(set(range(40)) - answered)
    assert resumed.usage.cached_calls == len(answered) and first_calls < 40


def test_local_engines_and_queued_fakes_run_one_call_at_a_time() -> None:
    assert concurrency_for(FakeModel(responses=[{"said": "a"}]).handle(), 16) == 1
    assert concurrency_for(FakeModel().handle(), 16) == 16
    assert LlamaCppEngine.serial_calls is True


def test_the_progress_line_shows_calls_in_flight() -> None:
    display = ProgressDisplay(io.StringIO(), tty=False)
    display.on_progress(progress.ProgressEvent("", "", "in_flight", 0, 5))
    assert "5 calls in flight" in display.line(0.0)
    display.on_progress(progress.ProgressEvent("", "", "in_flight", 0, 0))
    assert "in flight" not in display.line(0.0)


def test_an_interrupt_that_lands_on_a_worker_thread_still_stops_the_pool() -> None:
    # A process-directed SIGTERM or Ctrl-C may be delivered to any thread. The interpreter runs the Python
    # handler only in the main thread; if that thread slept in an unbounded join, the signal landing on a
    # worker would never wake it, and the command would hang until the model answered.
    release = threading.Event()

    def call(item: int) -> int:
        if item == 0:
            time.sleep(0.5)  # the caller is waiting on the pool by now
            signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)
        release.wait(30)
        return item

    previous = signal.signal(signal.SIGUSR1, signal.default_int_handler)
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_at_once(call, [0, 1], 2)
    finally:
        signal.signal(signal.SIGUSR1, previous)
        release.set()
    assert time.monotonic() - started < 10
