"""Several Dagster runs of one build at once, in threads of the calling process.

When model calls may overlap, `build_book` starts each of a build's runs (cut
by `reveriemem_dagster.run_cuts`) as soon as the runs it reads from have
ended, up to `partitions_at_once` of them at a time: the characters' model
calls then overlap with each other's and with the book's later steps. They are
threads, not processes, so the model calls of all of them share one bound
(`reveriemem.models.concurrency.call_slot`), one model cache and one progress
display, and a model registered in the process (a test or benchmark stand-in)
is the one every run uses. `import_while_waiting` imports the slow modules of
the planned steps (hdbscan) while the first calls are out, not inside a step
that shares the process's one interpreter lock with the others.

Two things Dagster does at the start of every run assume one run per process,
and `concurrent_runs(instance)` turns them off on the instance while the runs
go:

- It re-runs `logging.config.dictConfig`, which holds logging's module lock
  while it flushes every handler, the event-log handlers of runs already going
  included; a run writing an event in another thread holds its handler's lock
  and waits for logging's: both hang. Without `python_logs` handlers in
  dagster.yaml that reconfiguration adds no handler, so it is skipped; with
  them, runs go one by one.
- It captures the steps' stdout and stderr by pointing the process's file
  descriptors 1 and 2 at a file and back at the end of the run; two runs doing
  so at once leave the process writing into one run's log file. During the
  concurrent runs the steps' stdout and stderr are not captured (they go to the
  terminal); every event and `context.log` message is still in the instance.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import dagster as dg
from dagster._core.storage.noop_compute_log_manager import NoOpComputeLogManager

from reveriemem.core import progress
from reveriemem.models import open_model
from reveriemem.models.concurrency import concurrency_for


def partitions_at_once(lm: str = "", instance: dg.DagsterInstance | None = None) -> int:
    """How many character partitions of a build run at once: as many as model calls may be in flight.

    One (one after another) for a model that answers one call at a time, for
    no model, at `REVERIEMEM_MAX_CONCURRENCY=1`, and for an instance whose
    dagster.yaml sets `python_logs.dagster_handler_config` (see the module doc).
    """
    if instance is not None and instance.get_python_log_dagster_handler_config():
        return 1
    handle = open_model(lm or None)  # opening loads and contacts nothing
    try:
        return concurrency_for(handle)
    finally:
        handle.close()


@contextmanager
def concurrent_runs(instance: dg.DagsterInstance, at_once: int) -> Iterator[None]:
    """`instance` made fit for `at_once` runs in threads while the block runs (see the module doc)."""
    if at_once <= 1:
        yield
        return
    capture = instance._compute_log_manager  # noqa: SLF001  # the only place Dagster keeps it
    instance._compute_log_manager = NoOpComputeLogManager()  # noqa: SLF001
    instance.get_yaml_python_handlers = list  # type: ignore[method-assign]  # what it returns without handlers
    try:
        yield
    finally:
        del instance.get_yaml_python_handlers
        instance._compute_log_manager = capture  # noqa: SLF001


def import_while_waiting(keys: Sequence[dg.AssetKey]) -> Callable[[], None]:
    """Import the slow modules the planned assets import when they run (`assets.SLOW_IMPORTS`) in a daemon thread,
    from the moment the first model call of the build is in flight; returns what stops the waiting.

    The runs wait for the model meanwhile; imported inside a step, the same second of CPU would be taken from
    the steps running beside it. A module that fails to import fails later in its step, as before.
    """
    from assets import SLOW_IMPORTS

    modules = sorted({name for key in keys for name in SLOW_IMPORTS.get(key, ())} - set(sys.modules))
    once = threading.Lock()

    def load() -> None:
        for name in modules:
            with contextlib.suppress(Exception):
                importlib.import_module(name)

    def on_event(event: progress.ProgressEvent) -> None:
        if event.kind == "in_flight" and event.done > 0 and once.acquire(blocking=False):
            threading.Thread(target=load, name="reveriemem-imports", daemon=True).start()

    if not modules:
        return lambda: None
    progress.add_listener(on_event)
    return lambda: progress.remove_listener(on_event)
