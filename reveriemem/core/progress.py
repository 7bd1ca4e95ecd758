"""Build progress: steps report units of work done; a listener (the CLI) displays them.

Library code and assets call `step_started(book, step, total)` once per step and
`unit_done(book, step)` after each unit (usually a scene). With no listener
registered these calls do nothing, so tests and Dagster runs pay nothing.
The concurrent model-call pool (`reveriemem.models.concurrency`) reports the
calls it has in flight with `calls_in_flight(+1 / -1)`: an event of kind
"in_flight" whose `done` is the number now running.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ProgressEvent:
    book: str
    step: str  # e.g. "episodes[sherlock-holmes]"
    kind: str  # "started", "done" or "in_flight"
    total: int  # units the step will do (for "started"); 0 when unknown
    done: int  # units done so far in this step


Listener = Callable[[ProgressEvent], None]

_lock = threading.Lock()
_listeners: list[Listener] = []
_done: dict[tuple[str, str], int] = {}
_in_flight = 0


def add_listener(listener: Listener) -> None:
    with _lock:
        _listeners.append(listener)


def remove_listener(listener: Listener) -> None:
    with _lock:
        if listener in _listeners:
            _listeners.remove(listener)


def _emit(event: ProgressEvent) -> None:
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener(event)


def step_started(book: str, step: str, total: int) -> None:
    with _lock:
        _done[(book, step)] = 0
    _emit(ProgressEvent(book, step, "started", total, 0))


def unit_done(book: str, step: str, n: int = 1) -> None:
    with _lock:
        done = _done.get((book, step), 0) + n
        _done[(book, step)] = done
    _emit(ProgressEvent(book, step, "done", 0, done))


def calls_in_flight(delta: int) -> int:
    """Count model calls starting (+1) or ending (-1) in a pool; the number now in flight."""
    global _in_flight
    with _lock:
        _in_flight = max(0, _in_flight + delta)
        now = _in_flight
    _emit(ProgressEvent("", "", "in_flight", 0, now))
    return now
