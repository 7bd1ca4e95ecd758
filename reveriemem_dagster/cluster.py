"""Building a book on several machines: each step of a build's runs executes on a worker of a Dask cluster.

The deployment (docs/deploy.md) is Dagster's own pieces: an instance whose
storage is PostgreSQL (`dagster-postgres`, configured in `$DAGSTER_HOME/dagster.yaml`),
the executor of `dagster-dask` sending every step to a `dask.distributed`
scheduler, and the memory in one shared store (`REVERIEMEM_STORE`, e.g.
`s3://bucket/reveriemem`) that every worker opens through `MemoryStore`.

A cluster build plans exactly as `reveriemem build` does (`build.plan_build`:
what is stale, missing or made with another model), so a relaunched build
repeats no finished partition. The book-level run goes first; the per-character
runs then go at once, `parallel` at a time (each run coordinated by its own
process, since Dagster's run machinery is not thread-safe), each of their steps
on whichever worker is free. Model calls happen on the workers, so the
report's usage is not counted here. Dask gives a step of a worker that died to another worker; a
run that fails all the same fails the build, and building again takes up what
is left.

dagster-dask names a step's task `<job>.<step>`, which is the same in every run
of a job: two runs of `character_memory` at once would share one Dask task.
`RunScopedDaskExecutor` adds the run's id to the name, and otherwise hands each
step to dagster-dask's own worker function (its arguments wrapped in one
object, since recent Dask walks tuple arguments and Dagster's records refuse that).
A worker that dies takes the results it held with it, and Dask recomputes those
tasks: `run_step` returns what a step already recorded in the run instead of
materialising its partition a second time.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

import dagster as dg
import dask.distributed
from dagster._core.errors import raise_execution_interrupts
from dagster._core.events import DagsterEvent, DagsterEventType
from dagster._core.execution.context.system import PlanOrchestrationContext
from dagster._core.execution.plan.plan import ExecutionPlan
from dagster._utils import iterate_with_context
from dagster_dask.executor import DaskExecutor, get_dask_resource_requirements, query_on_dask_worker

from assets import BOOK_ASSETS, CHARACTER_ASSETS, book_text
from reveriemem.core.errors import ReverieMemError
from reveriemem.core.registry import load_book
from reveriemem_dagster.build import BuildReport, PlannedRun, build_identity, plan_build
from reveriemem_dagster.build import _metadata as run_metadata
from reveriemem_dagster.build import _report_key as report_key
from reveriemem_dagster.instance import get_instance, register_partitions
from reveriemem_dagster.io_managers import MemoryIOManager
from reveriemem_dagster.partitions import BOOK, CHARACTER, book_character_partitions, book_partitions
from reveriemem_dagster.resources import EmbeddingModel, LanguageModel

SCHEDULER_ENV = "REVERIEMEM_DASK_SCHEDULER"  # the scheduler's address, e.g. tcp://10.0.0.5:8786


class RunScopedDaskExecutor(DaskExecutor):
    """dagster-dask's executor on an existing scheduler, with each Dask task named by run and step."""

    def __init__(self, address: str):
        super().__init__("existing", {"address": address})

    def execute(self, plan_context: PlanOrchestrationContext, execution_plan: ExecutionPlan) -> Iterator[DagsterEvent]:
        if not plan_context.instance.is_persistent:
            raise dg.DagsterInvariantViolationError("A Dask build needs a persistent Dagster instance (DAGSTER_HOME).")
        run = plan_context.dagster_run
        with dask.distributed.Client(self.cluster_configuration["address"]) as client:
            futures: dict[str, Any] = {}
            for level in execution_plan.get_steps_to_execute_by_level():
                for step in level:
                    needs = [futures[key] for step_input in step.step_inputs for key in step_input.dependency_keys]
                    call = StepCall(plan_context.reconstructable_job, run, plan_context.run_config, [step.key],
                                    plan_context.instance.get_ref(), execution_plan.known_state)
                    futures[step.key] = client.submit(
                        run_step, needs, call,
                        key=f"{plan_context.job_name}.{run.run_id}.{step.key}",
                        resources=get_dask_resource_requirements(step.tags),
                    )
            done = dask.distributed.as_completed(list(futures.values()), with_results=True)
            for _future, events in iterate_with_context(raise_execution_interrupts, done):
                yield from events


class StepCall:
    """One step's arguments, held in an object: Dask walks tuples given to `submit`, and Dagster's records refuse it."""

    def __init__(self, *args: Any):
        self.args = args


def run_step(needs: list[Any], call: StepCall) -> Any:
    """Run on a Dask worker: the step, once the steps it `needs` are done (their results are not used).

    A step this run already finished is not run again: Dask recomputes a finished task whose result
    was held by a worker that died, and a second materialisation would repeat a finished partition.
    The events the step recorded are returned instead.
    """
    run, step_keys, instance_ref = call.args[1], call.args[3], call.args[4]
    with dg.DagsterInstance.from_ref(instance_ref) as instance:
        recorded = finished_step_events(instance, run.run_id, step_keys[0])
    return recorded if recorded is not None else query_on_dask_worker(needs, *call.args)


def finished_step_events(instance: dg.DagsterInstance, run_id: str, step_key: str) -> list[DagsterEvent] | None:
    """The events a step recorded in a run, when it succeeded there; None when it has not."""
    events = [entry.dagster_event for entry in instance.all_logs(run_id)
              if entry.dagster_event is not None and entry.dagster_event.step_key == step_key]
    if not any(event.event_type == DagsterEventType.STEP_SUCCESS for event in events):
        return None
    return events  # type: ignore[return-value]


@dg.executor(name="dask_run_scoped", config_schema={"address": dg.StringSource},
             requirements=dg.multiple_process_executor_requirements())
def run_scoped_dask_executor(init_context: dg.InitExecutorContext) -> RunScopedDaskExecutor:
    return RunScopedDaskExecutor(str(init_context.executor_config["address"]))


def _job(name: str, selection: list[dg.AssetsDefinition], partitions: dg.PartitionsDefinition) -> dg.JobDefinition:
    defs = dg.Definitions(
        assets=[book_text, *BOOK_ASSETS, *CHARACTER_ASSETS],
        jobs=[dg.define_asset_job(name, selection=dg.AssetSelection.assets(*selection), partitions_def=partitions)],
        resources={"lm": LanguageModel(), "embedder": EmbeddingModel(), "memory_io": MemoryIOManager()},
        executor=run_scoped_dask_executor,
    )
    return defs.resolve_job_def(name)


_JOBS: dict[str, dg.JobDefinition] = {}  # a worker reconstructs the job for every step it runs: build it once


def book_memory_on_dask() -> dg.JobDefinition:
    """The `book_memory` job with its steps on Dask (reconstructed by name on every worker)."""
    if "book_memory" not in _JOBS:
        _JOBS["book_memory"] = _job("book_memory", list(BOOK_ASSETS), book_partitions)
    return _JOBS["book_memory"]


def character_memory_on_dask() -> dg.JobDefinition:
    """The `character_memory` job with its steps on Dask."""
    if "character_memory" not in _JOBS:
        _JOBS["character_memory"] = _job("character_memory", list(CHARACTER_ASSETS), book_character_partitions)
    return _JOBS["character_memory"]


def _partition_tags(book: str, character: str | None) -> dict[str, str]:
    """The partition tags of a run: a book's key, or a pair's key with one tag per dimension (as Dagster sets them)."""
    if character is None:
        return {"dagster/partition": book}
    return {"dagster/partition": f"{book}|{character}", f"dagster/partition/{BOOK}": book,
            f"dagster/partition/{CHARACTER}": character}


def execute_partition_run(book: str, character: str | None, assets: list[str], run_config: dict[str, Any],
                          tags: dict[str, str]) -> tuple[bool, str, dict[str, dict[str, Any]]]:
    """One run of a book's (or a pair's) assets on the cluster: success, run id, metadata by asset.

    Runs in its own process: Dagster's run machinery (its log manager) is not thread-safe.
    """
    recon = dg.reconstructable(book_memory_on_dask if character is None else character_memory_on_dask)
    with dg.DagsterInstance.get() as instance:
        result = dg.execute_job(recon, instance, run_config=run_config,
                                asset_selection=[dg.AssetKey.from_user_string(a) for a in assets],
                                tags={**tags, **_partition_tags(book, character)})
        return result.success, result.run_id, run_metadata(result)  # type: ignore[arg-type]


def build_book_on_cluster(
    slug: str,
    scheduler: str,
    lm: str = "",
    embedder: str = "",
    progress: Callable[[str], None] = lambda message: None,
    *,
    parallel: int = 4,
    force: bool = False,
) -> BuildReport:
    """Materialise a book's memory with every step on the Dask cluster at `scheduler` (see the module doc)."""
    book = load_book(slug)
    instance = get_instance()
    register_partitions(instance, book)
    identity = build_identity(lm, embedder)
    plan = plan_build(slug, force=force, instance=instance, identity=identity)
    run_config = {
        "execution": {"config": {"address": scheduler}},
        "resources": {"lm": {"config": {"model": lm}}, "embedder": {"config": {"model": embedder}}},
        "loggers": {"console": {"config": {"log_level": "WARNING"}}},
    }
    tags = {"reveriemem/book": slug, **identity}
    report = BuildReport(book=slug, metadata=dict(plan.metadata), ran=plan.to_run, skipped=plan.skipped)

    def launch(pool: ProcessPoolExecutor, run: PlannedRun) -> Future[tuple[bool, str, dict[str, dict[str, Any]]]]:
        names = [a.key.to_user_string() for a in run.assets]
        progress(f"{slug}: {run.label}: {', '.join(names)}")
        return pool.submit(execute_partition_run, slug, run.character, names, run_config, tags)

    def collect(run: PlannedRun, future: Future[tuple[bool, str, dict[str, dict[str, Any]]]]) -> None:
        success, run_id, metadata = future.result()
        if not success:
            raise ReverieMemError(f"The run of {run.label} failed on the cluster (run {run_id}); "
                                  f"build again to take up what is left.")
        report.runs += 1
        for key, values in metadata.items():
            report.metadata[report_key(key, run.character)] = values

    started = time.monotonic()
    with ProcessPoolExecutor(max_workers=max(1, parallel), mp_context=multiprocessing.get_context("spawn")) as pool:
        for run in [run for run in plan.runs if run.character is None]:
            collect(run, launch(pool, run))
        launched = [(run, launch(pool, run)) for run in plan.runs if run.character is not None]
        failures = []
        for run, future in launched:
            try:
                collect(run, future)
            except ReverieMemError as exc:  # the other runs still finish, and what they store counts
                failures.append(exc)
        if failures:
            raise failures[0]
    report.seconds = time.monotonic() - started
    return report
