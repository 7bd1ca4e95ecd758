"""Several Dagster runs of one build at once, in threads of the calling process.

A build's character partitions depend on its book-level run only, not on each
other, so `build_book` runs them at once (`partitions_at_once` of them): each
character's model calls then overlap with the others' instead of waiting for
the previous character's run to end. They are threads, not processes, so the
model calls of all of them share one bound (`reveriemem.models.concurrency.
call_slot`), one model cache and one progress display, and a model registered
in the process (a test or benchmark stand-in) is the one every run uses.

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

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
from dagster._core.storage.noop_compute_log_manager import NoOpComputeLogManager

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
