"""Concurrent model calls: a bounded pool, rate limits and a shared pause after a rate-limit error.

A build step that makes several independent model calls (one per candidate
boundary, scene, passage, batch of lines or pattern) hands them to
`map_calls(handle, call, items)`: `call(item)` runs in a pool of at most
`REVERIEMEM_MAX_CONCURRENCY` threads (default 8) and the answers come back as
a list in the order of `items`, whatever order the calls finished in, so a
step's rows are the same at any concurrency. Each answer holds the call's
value or the exception it raised; `answer.result()` returns the one or
raises the other, so a step's loop keeps its own `try/except` around it.

Resume: every call goes through `run_program`, which stores each parsed
prediction in the persistent model cache as soon as it arrives (the cache is
safe to share between threads). When a call fails with anything but
`ModelOutputError` (e.g. the model became unreachable), calls not yet started
are cancelled, the calls already in flight run to their end and are cached,
and the failure is raised at its place in input order: a re-run finds every
answer obtained before the failure in the cache.

Serial where it must be: a handle without a model, a model whose engine says
`serial_calls` (the in-process llama.cpp engine runs one GGUF model that
cannot answer two calls at once; a test fake answering from a queue in
order), or a concurrency of 1 run the calls one by one in the caller's
thread, exactly as a plain loop would.

Each worker runs its call in a copy of the caller's `contextvars` context, so
DSPy's settings made with `dspy.context` in the caller (adapter, usage
tracker) hold in the worker; `dspy.configure` is never called from a worker.

One bound for the process: every call of `run_program` holds one of
`concurrency_for(handle)` slots of its model (`call_slot`) while it is in
the model, so several pools at once (the characters of a build, built at
once by `reveriemem_dagster.parallel_runs`) never have more calls in flight
than the setting; the slot reports the calls in flight to the progress
display. `run_at_once` is the pool itself, for any work: the build runs its
characters' Dagster runs with it.

Rate limits, per model name and process-wide (`rate_limiter(name)`):
`REVERIEMEM_MAX_RPM` requests per minute and `REVERIEMEM_MAX_TPM` tokens per
minute, over a sliding 60-second window; tokens are counted from the usage
every call reports (`reveriemem.models.usage`). After a rate-limit error,
`pause(seconds)` holds every caller of that model, not just the one that was
refused. `run_program` calls `acquire()` before each attempt.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from reveriemem.core import progress, settings
from reveriemem.core.errors import ModelOutputError
from reveriemem.models import usage
from reveriemem.models.handle import ModelHandle

T = TypeVar("T")
R = TypeVar("R")

WINDOW_S = 60.0


@dataclass(frozen=True)
class Answer(Generic[R]):
    """One call's value, or the exception it raised."""

    value: R | None = None
    error: BaseException | None = None

    def result(self) -> R:
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


def concurrency_for(handle: ModelHandle, requested: int | None = None) -> int:
    """How many calls of `handle` may run at once: `requested`, else the setting; 1 where calls must be serial."""
    if handle.lm is None:
        return 1
    engine = handle.engine if handle.engine is not None else getattr(handle.lm, "engine", None)
    if getattr(engine, "serial_calls", False):
        return 1
    return max(1, requested if requested is not None else settings.max_concurrency())


def map_calls(
    handle: ModelHandle,
    call: Callable[[T], R],
    items: Iterable[T],
    *,
    concurrency: int | None = None,
) -> list[Answer[R]]:
    """`call(item)` for every item, at most `concurrency` at once; the answers in input order (see the module doc)."""
    return run_at_once(call, items, concurrency_for(handle, concurrency),
                       go_on=lambda exc: isinstance(exc, ModelOutputError))


_WAKE = 0.2  # seconds between checks for a signal while the caller waits on the pool


def run_at_once(
    call: Callable[[T], R],
    items: Iterable[T],
    workers: int,
    *,
    go_on: Callable[[BaseException], bool] = lambda exc: False,
    after: Sequence[Collection[int]] | None = None,
) -> list[Answer[R]]:
    """`call(item)` for every item in at most `workers` threads; the answers in input order.

    `after[i]`, when given, are the indexes of earlier items that must end before item i starts (its
    inputs): an item starts as soon as those have ended and a worker is free. A failure that `go_on`
    does not accept stops the pool: items not yet started are skipped (their answers say so), those
    already running run to their end, and every answer after the failure in input order is a skip, so
    the caller raises the first failure at its place. One worker runs the items one by one in the
    caller's thread, exactly as a plain loop would.
    """
    todo = list(items)
    workers = min(workers, len(todo))
    needs = [set(after[i]) if after is not None else set() for i in range(len(todo))]
    if any(d >= i for i, ds in enumerate(needs) for d in ds):
        raise ValueError("An item can only wait for items before it.")
    if workers <= 1:
        return _serial(call, todo, go_on)
    answers: list[Answer[R] | None] = [None] * len(todo)
    stop = threading.Event()

    def run(index: int, context: contextvars.Context) -> None:
        if stop.is_set():
            return
        try:
            answers[index] = Answer(value=context.run(call, todo[index]))
        except Exception as exc:  # handed back in order; the caller decides
            answers[index] = Answer(error=exc)
            if not go_on(exc):
                stop.set()

    pending = list(range(len(todo)))
    contexts = [contextvars.copy_context() for _ in todo]
    ended: set[int] = set()
    turn = threading.Condition()

    def worker() -> None:
        while True:
            with turn:
                index = None
                while index is None:
                    if stop.is_set() or not pending:
                        return
                    index = next((i for i in pending if needs[i] <= ended), None)
                    if index is None:
                        turn.wait()  # what is left waits for items still running
                pending.remove(index)
            run(index, contexts[index])
            with turn:
                ended.add(index)
                turn.notify_all()

    # Daemon threads, so an interrupt (Ctrl-C, SIGTERM) ends the command at once instead of waiting
    # for calls still in the model; the interrupt reaches the caller while it waits here. The wait wakes
    # every `_WAKE` seconds: a signal the system delivers to a worker thread is handled only when the main
    # thread next runs, and an unbounded join would keep it asleep until the model answered.
    threads = [threading.Thread(target=worker, name=f"reveriemem-call-{n}", daemon=True) for n in range(workers)]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(_WAKE)
    except BaseException:
        stop.set()
        raise
    result: list[Answer[R]] = []
    for answer in answers:
        if answer is None:  # never started: a call failed and stopped the pool; its failure is raised here
            failed = next(a for a in answers if a is not None and a.error is not None and not go_on(a.error))
            result.append(failed)
            break
        result.append(answer)
        if answer.error is not None and not go_on(answer.error):
            break  # what follows a failure is never used: the caller raises here
    return result + [Answer(error=_Skipped())] * (len(todo) - len(result))


def _serial(call: Callable[[T], R], todo: list[T], go_on: Callable[[BaseException], bool]) -> list[Answer[R]]:
    answers: list[Answer[R]] = []
    for index, item in enumerate(todo):
        try:
            answers.append(Answer(value=call(item)))
        except Exception as exc:
            answers.append(Answer(error=exc))
            if not go_on(exc):
                answers.extend([Answer(error=_Skipped())] * (len(todo) - index - 1))
                break
    return answers


class _Skipped(RuntimeError):
    """A call never made because an earlier one failed (its failure is raised first)."""

    def __init__(self) -> None:
        super().__init__("This model call was skipped because an earlier call failed.")


# -- rate limits -------------------------------------------------------------------


class RateLimiter:
    """Requests and tokens per minute for one model, over a sliding window, and a shared pause."""

    def __init__(self, rpm: float | None = None, tpm: float | None = None, *,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self.rpm = rpm if rpm and rpm > 0 else None
        self.tpm = tpm if tpm and tpm > 0 else None
        self.clock = clock
        self.sleep = sleep
        self._lock = threading.Lock()
        self._requests: deque[float] = deque()
        self._tokens: deque[tuple[float, int]] = deque()
        self._paused_until = float("-inf")

    def acquire(self) -> float:
        """Wait until one more request fits the limits (and any pause is over); the seconds waited."""
        waited = 0.0
        while True:
            with self._lock:
                now = self.clock()
                delay = self._delay(now)
                if delay <= 0:
                    self._requests.append(now)
                    return waited
            self.sleep(delay)
            waited += delay

    def record_tokens(self, tokens: int) -> None:
        if self.tpm is None or tokens <= 0:
            return
        with self._lock:
            self._tokens.append((self.clock(), tokens))

    def pause(self, seconds: float) -> None:
        """Hold every caller for `seconds` from now (after the model refused a call for its rate)."""
        with self._lock:
            self._paused_until = max(self._paused_until, self.clock() + seconds)

    def _delay(self, now: float) -> float:
        horizon = now - WINDOW_S
        while self._requests and self._requests[0] <= horizon:
            self._requests.popleft()
        while self._tokens and self._tokens[0][0] <= horizon:
            self._tokens.popleft()
        delay = self._paused_until - now
        if self.rpm is not None and len(self._requests) >= self.rpm:
            delay = max(delay, self._requests[0] + WINDOW_S - now)
        if self.tpm is not None and self._tokens and sum(n for _, n in self._tokens) >= self.tpm:
            delay = max(delay, self._tokens[0][0] + WINDOW_S - now)
        return delay


_limiters: dict[str, RateLimiter] = {}
_limiters_lock = threading.Lock()


def rate_limiter(model: str) -> RateLimiter:
    """The process's limiter for the model named `model`, with the limits set in the environment."""
    with _limiters_lock:
        limiter = _limiters.get(model)
        rpm, tpm = settings.max_rpm(), settings.max_tpm()
        if limiter is None or (limiter.rpm, limiter.tpm) != (rpm, tpm):
            limiter = _limiters[model] = RateLimiter(rpm, tpm)
        _ensure_token_listener()
        return limiter


_listening = False


def _ensure_token_listener() -> None:
    global _listening
    if not _listening:
        usage.add_listener(_count_tokens)
        _listening = True


def _count_tokens(call: Any) -> None:
    if call.cached:
        return
    with _limiters_lock:
        limiter = _limiters.get(call.model)
    if limiter is not None:
        limiter.record_tokens(call.prompt_tokens + call.completion_tokens)


# -- calls in flight, process-wide ---------------------------------------------------


@dataclass
class _Slots:
    size: int
    semaphore: threading.Semaphore


_slots: dict[str, _Slots] = {}


@contextmanager
def call_slot(handle: ModelHandle) -> Iterator[None]:
    """Hold one of the process's slots for calls of `handle`'s model while one runs (`concurrency_for` many).

    Every model call of `run_program` runs in a slot, so the bound holds for the
    whole process, also when several partitions of a build run at once, each
    with its own pools; the calls in flight are reported to the progress display.
    """
    size = concurrency_for(handle)
    with _limiters_lock:
        slots = _slots.get(handle.name)
        if slots is None or slots.size != size:
            slots = _slots[handle.name] = _Slots(size, threading.Semaphore(size))
    with slots.semaphore:
        progress.calls_in_flight(+1)
        try:
            yield
        finally:
            progress.calls_in_flight(-1)
