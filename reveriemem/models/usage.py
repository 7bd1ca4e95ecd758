"""Token and latency accounting for every call a model handle makes.

A `UsageRecorder` is attached to a handle's `dspy.LM` as an instance-level
DSPy callback, so it sees every call through that LM whatever the engine
behind it (a hosted model through LiteLLM or lm15, the in-process llama.cpp
engine, the test fake). DSPy reports a call's token counts to
`dspy.settings.usage_tracker`; the callback installs a per-call tracker for
the duration of the call, reads the counts from it and passes them on to any
tracker the caller installed (`dspy.track_usage()` keeps working).

Answers served by the persistent model cache (`reveriemem.models.cache`) are
recorded with `record_cache_hit()`: they count as `cached_calls`, never as
calls or tokens. Every call and cache hit of every recorder in the process is
also passed to the process-wide listeners (`add_listener`, `tracking()`),
which is how a build shows and totals its model usage across the handles its
runs open and close.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import dspy
from dspy.utils.callback import BaseCallback
from dspy.utils.usage_tracker import UsageTracker

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelCall:
    """One call to a language model, as the recorder saw it."""

    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    ok: bool
    error: str | None = None  # the exception's class name, never its text
    usage_reported: bool = True  # False for DSPy cache hits, our cache hits and providers that report none
    cached: bool = False  # True: answered by the persistent model cache, no model was called


class UsageRecorder:
    """Thread-safe record of the calls made through one model handle."""

    def __init__(self, model: str) -> None:
        self.model = model
        self._calls: list[ModelCall] = []
        self._cached = 0
        self._lock = threading.Lock()
        self._callback = _UsageCallback(self)

    def callback(self) -> BaseCallback:
        """The DSPy callback that feeds this recorder (one per recorder)."""
        return self._callback

    def record(self, call: ModelCall) -> None:
        with self._lock:
            self._calls.append(call)
        _notify(call)

    def record_cache_hit(self) -> None:
        """An answer served by the persistent model cache: no model call, no tokens."""
        with self._lock:
            self._cached += 1
        _notify(ModelCall(self.model, 0, 0, 0.0, ok=True, usage_reported=False, cached=True))

    @property
    def cached_calls(self) -> int:
        with self._lock:
            return self._cached

    @property
    def calls(self) -> list[ModelCall]:
        """A copy of the calls recorded so far, oldest first."""
        with self._lock:
            return list(self._calls)

    def reset(self) -> None:
        with self._lock:
            self._calls.clear()
            self._cached = 0

    def summary(self) -> dict[str, int | float | str]:
        """Totals as plain values, ready to attach as Dagster asset metadata."""
        with self._lock:
            calls = list(self._calls)
            cached = self._cached
        prompt = sum(c.prompt_tokens for c in calls)
        completion = sum(c.completion_tokens for c in calls)
        return {
            "model": self.model,
            "calls": len(calls),
            "cached_calls": cached,
            "failed_calls": sum(1 for c in calls if not c.ok),
            "calls_without_usage": sum(1 for c in calls if c.ok and not c.usage_reported),
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "latency_s": round(sum(c.latency_s for c in calls), 3),
        }

    def __repr__(self) -> str:
        return f"UsageRecorder(model={self.model!r}, calls={len(self.calls)})"


UsageListener = Callable[[ModelCall], None]

_listeners: list[UsageListener] = []
_listeners_lock = threading.Lock()


def add_listener(listener: UsageListener) -> None:
    """Receive every call (and cache hit) any recorder in this process records."""
    with _listeners_lock:
        _listeners.append(listener)


def remove_listener(listener: UsageListener) -> None:
    with _listeners_lock:
        if listener in _listeners:
            _listeners.remove(listener)


def _notify(call: ModelCall) -> None:
    with _listeners_lock:
        listeners = list(_listeners)
    for listener in listeners:
        try:
            listener(call)
        except Exception:  # a display must never break a model call
            logger.exception("A usage listener failed")


class UsageTotals:
    """Running totals over the calls it is given (a listener); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.cached_calls = 0
        self.failed_calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.latency_s = 0.0

    def add(self, call: ModelCall) -> None:
        with self._lock:
            if call.cached:
                self.cached_calls += 1
                return
            self.calls += 1
            self.failed_calls += 0 if call.ok else 1
            self.prompt_tokens += call.prompt_tokens
            self.completion_tokens += call.completion_tokens
            self.latency_s += call.latency_s

    __call__ = add

    def summary(self) -> dict[str, int | float]:
        with self._lock:
            return {
                "calls": self.calls,
                "cached_calls": self.cached_calls,
                "failed_calls": self.failed_calls,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens,
                "latency_s": round(self.latency_s, 3),
            }


@contextmanager
def tracking() -> Iterator[UsageTotals]:
    """Total every model call and cache hit made in this process while the block runs."""
    totals = UsageTotals()
    add_listener(totals.add)
    try:
        yield totals
    finally:
        remove_listener(totals.add)


class _CallTokens(UsageTracker):
    """Collects the usage DSPy reports for one call and forwards it upward."""

    def __init__(self, parent: Any) -> None:
        super().__init__()
        self.parent = parent
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.reported = False

    def add_usage(self, lm: str, usage_entry: dict[str, Any]) -> None:
        if usage_entry:
            self.reported = True
            self.prompt_tokens += _count(usage_entry, "prompt_tokens", "input_tokens")
            self.completion_tokens += _count(usage_entry, "completion_tokens", "output_tokens")
        if self.parent is not None:
            self.parent.add_usage(lm, usage_entry)


def _count(entry: Mapping[str, Any], *keys: str) -> int:
    for key in keys:
        value = entry.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return int(value)
    return 0


class _UsageCallback(BaseCallback):
    """Times each LM call and scopes a `_CallTokens` tracker around it.

    DSPy runs `on_lm_start`, the call and `on_lm_end` in one frame (one
    context), so the settings scope entered at the start is exited at the end.
    """

    def __init__(self, recorder: UsageRecorder) -> None:
        self._recorder = recorder
        self._pending: dict[str, tuple[AbstractContextManager[Any], _CallTokens, float]] = {}
        self._lock = threading.Lock()

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        tokens = _CallTokens(dspy.settings.usage_tracker)
        scope = dspy.settings.context(usage_tracker=tokens)
        scope.__enter__()
        with self._lock:
            self._pending[call_id] = (scope, tokens, time.perf_counter())

    def on_lm_end(self, call_id: str, outputs: Any | None, exception: Exception | None = None) -> None:
        with self._lock:
            pending = self._pending.pop(call_id, None)
        if pending is None:
            return
        scope, tokens, started = pending
        scope.__exit__(None, None, None)
        self._recorder.record(
            ModelCall(
                model=self._recorder.model,
                prompt_tokens=tokens.prompt_tokens,
                completion_tokens=tokens.completion_tokens,
                latency_s=time.perf_counter() - started,
                ok=exception is None,
                error=type(exception).__name__ if exception is not None else None,
                usage_reported=tokens.reported,
            )
        )
