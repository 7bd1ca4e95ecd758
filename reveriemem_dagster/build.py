"""Materialising a book's memory from Python or the CLI, recorded in the project's instance.

What is out of date comes from Dagster. Every asset has a code version, the
book-level assets depend on the observed `book_text` (whose data version is a
hash of the registered book), and Dagster's stale-status resolver says of each
(asset, partition) whether it is missing, stale (a new code version or a new
upstream data version) or fresh. Three things Dagster cannot see are checked
besides: that a fresh partition's stored rows are still there, that it was
made with this build's model and embedder (run tags), and, with
`retry_failed=True`, whether its latest materialisation recorded failed scenes
(metadata `failed_scenes` > 0). Within one build, whatever depends on a
partition that runs runs too. `force=True` redoes everything. The persistent
model cache makes a redone partition call the model only for what is not
cached, i.e. the failed scenes.

A build is one Dagster run for the book-level assets and then one per focus
character, launched through the project's instance from the calling process
(never from inside a run), one after another when model calls go one at a
time. When they may overlap, the runs are cut by what each model step reads
(`reveriemem_dagster.run_cuts`: a character's episodic notes wait for the
scenes and rosters only, not for the book's facts) and each run starts, in its
own thread, as soon as the runs it reads from have ended
(`reveriemem_dagster.parallel_runs`: as many at once as model calls may be in
flight); the report lists the assets in plan order whatever order the runs
finished in. Dagster orders the assets of a run (an asset that asks the model
first among those ready, `assets.context.ASKS_MODEL`), and `graphlib` orders
the report.
"""

from __future__ import annotations

import graphlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.assets.graph.asset_graph import AssetGraph
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleCause, StaleStatus
from dagster._time import get_current_datetime

from assets.context import book_text
from reveriemem.core.errors import FAILED_STEP_NOTE
from reveriemem.core.registry import load_book
from reveriemem.core.schemas import BY_ASSET
from reveriemem.core.storage import MemoryStore
from reveriemem.models.concurrency import run_at_once
from reveriemem.models.usage import tracking
from reveriemem_dagster.instance import get_instance, register_partitions
from reveriemem_dagster.io_managers import MemoryIOManager
from reveriemem_dagster.parallel_runs import concurrent_runs, import_while_waiting, partitions_at_once
from reveriemem_dagster.partitions import pair_key, partition_ref
from reveriemem_dagster.resources import EmbeddingModel, LanguageModel
from reveriemem_dagster.run_cuts import PlannedRun, cut_runs, waits

MODEL_TAG, EMBEDDER_TAG = "reveriemem/lm", "reveriemem/embedder"  # on every build run: what made the outputs
BOOK_TAG = "reveriemem/book"
BOOK_JOB, CHARACTER_JOB = "book_memory", "character_memory"  # the job names of definitions.py
FAILED_SCENES = "failed_scenes"  # metadata: how many scenes an asset failed (an int; a list is counted)
DAGSTER_CONSOLE_LEVEL = "WARNING"  # Dagster's per-event debug log stays in the instance, off the terminal


@dataclass(frozen=True)
class PartitionStatus:
    """What a build does with one asset partition, and why."""

    asset: str
    partition: str  # "book" or "book|character"
    run: bool
    reason: str  # why it runs, or why it is skipped
    failed_scenes: int = 0  # recorded by its latest materialisation


@dataclass
class BuildPlan:
    book: str
    runs: list[PlannedRun]  # only runs with something to do
    statuses: list[PartitionStatus]
    metadata: dict[str, dict[str, Any]]  # latest metadata of the skipped partitions, keyed as in BuildReport

    @property
    def to_run(self) -> list[PartitionStatus]:
        return [s for s in self.statuses if s.run]

    @property
    def skipped(self) -> list[PartitionStatus]:
        return [s for s in self.statuses if not s.run]


@dataclass
class BuildReport:
    book: str
    runs: int = 0
    seconds: float = 0.0
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)  # "asset" or "asset[character]"
    ran: list[PartitionStatus] = field(default_factory=list)
    skipped: list[PartitionStatus] = field(default_factory=list)
    usage: dict[str, int | float] = field(default_factory=dict)  # model calls, cached calls, tokens of this build

    @property
    def failed(self) -> list[PartitionStatus]:
        """Skipped partitions whose latest materialisation recorded failed scenes (see `retry_failed`)."""
        return [s for s in self.skipped if s.failed_scenes]


def _metadata(result: dg.ExecuteInJobResult) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization  # type: ignore[union-attr]
        out[materialization.asset_key.to_user_string()] = {k: v.value for k, v in materialization.metadata.items()}
    return out


def _report_key(asset: str, character: str | None) -> str:
    return asset if character is None else f"{asset}[{character}]"


def _character_of(partition: str) -> str | None:
    """The character of a `PartitionStatus.partition` ("book" or "book|character"), None for the book's."""
    return partition.split("|", 1)[1] if "|" in partition else None


def _asset_lists(
    book_assets: Sequence[dg.AssetsDefinition] | None, character_assets: Sequence[dg.AssetsDefinition] | None
) -> tuple[list[dg.AssetsDefinition], list[dg.AssetsDefinition]]:
    """The given asset lists, each defaulting to the project's book-level and per-character assets."""
    from assets import BOOK_ASSETS, CHARACTER_ASSETS

    book_assets = BOOK_ASSETS if book_assets is None else book_assets
    character_assets = CHARACTER_ASSETS if character_assets is None else character_assets
    return list(book_assets), list(character_assets)


def _stale_status(instance: dg.DagsterInstance, graph: AssetGraph) -> CachingStaleStatusResolver:
    """Dagster's own stale-status resolver over the build's assets, reading the instance now."""
    view = AssetGraphView(temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
                          instance=instance, asset_graph=graph)
    return CachingStaleStatusResolver(instance=instance, asset_graph=graph, loading_context=view)


def _in_dependency_order(assets: list[dg.AssetsDefinition]) -> list[dg.AssetsDefinition]:
    """The assets with every one after those it depends on (ties keep the given order)."""
    by_key = {a.key: a for a in assets}
    sorter: graphlib.TopologicalSorter[dg.AssetKey] = graphlib.TopologicalSorter()
    for asset in assets:
        sorter.add(asset.key, *(dep for dep in asset.dependency_keys if dep in by_key))
    return [by_key[key] for key in sorter.static_order()]


def plan_build(
    slug: str,
    *,
    force: bool = False,
    retry_failed: bool = False,
    instance: dg.DagsterInstance | None = None,
    book_assets: Sequence[dg.AssetsDefinition] | None = None,
    character_assets: Sequence[dg.AssetsDefinition] | None = None,
    identity: dict[str, str] | None = None,
) -> BuildPlan:
    """What `build_book` would materialise and what it would skip, without running anything.

    `identity` (the model and embedder tags of this build) makes a partition
    built with another model or embedder count as out of date.
    """
    book = load_book(slug)
    instance = instance or get_instance()
    book_level, per_character = _asset_lists(book_assets, character_assets)
    stale = _stale_status(instance, AssetGraph.from_assets([*_external(book_text), *book_level, *per_character]))
    groups: list[tuple[str | dg.MultiPartitionKey, str | None, list[dg.AssetsDefinition]]] = [
        (slug, None, _in_dependency_order(book_level))
    ]
    groups += [(pair_key(slug, c.slug), c.slug, _in_dependency_order(per_character)) for c in book.characters]
    book_keys = {a.key for a in book_level}
    group_keys = {a.key for a in per_character}

    runs: list[PlannedRun] = []
    statuses: list[PartitionStatus] = []
    metadata: dict[str, dict[str, Any]] = {}
    will_run: set[tuple[dg.AssetKey, str]] = set()
    for partition, character, assets in groups:
        planned = PlannedRun(partition, character, [])
        for asset in assets:
            part = str(partition)
            record = _latest_materialization(instance, asset.key, part)
            values = _values(record)
            failed = _failed_count(values.get(FAILED_SCENES))
            rebuilt = [dep for dep in sorted(asset.dependency_keys, key=lambda k: k.to_user_string())
                       if (dep, slug) in will_run and dep in book_keys or (dep, part) in will_run and dep in group_keys]
            reason = _reason_to_run(stale, asset.key, part, record, values, force, retry_failed, failed, rebuilt)
            if reason is None and record is not None and identity:
                reason = _identity_changed(instance, record, identity)
            name = asset.key.to_user_string()
            if reason is None:
                metadata[_report_key(name, character)] = values
                hint = f"; {failed} failed scenes (--retry-failed)" if failed else ""
                statuses.append(PartitionStatus(name, part, False, f"up to date{hint}", failed))
            else:
                will_run.add((asset.key, part))
                planned.assets.append(asset)
                statuses.append(PartitionStatus(name, part, True, reason, failed))
        if planned.assets:
            runs.append(planned)
    return BuildPlan(book=slug, runs=runs, statuses=statuses, metadata=metadata)


def _external(spec: dg.AssetSpec) -> list[dg.AssetsDefinition]:
    return [dg.AssetsDefinition(specs=[spec])]


def _reason_to_run(
    stale: CachingStaleStatusResolver,
    key: dg.AssetKey,
    part: str,
    record: dg.EventLogRecord | None,
    values: dict[str, Any],
    force: bool,
    retry_failed: bool,
    failed: int,
    rebuilt: list[dg.AssetKey],
) -> str | None:
    """Why this partition must be materialised, or None when it is up to date."""
    if force:
        return "forced"
    status = stale.get_status(key, part)
    if status == StaleStatus.MISSING or record is None:
        return "not materialised yet"
    if rebuilt:
        return f"{rebuilt[0].to_user_string()} is rebuilt"
    if status == StaleStatus.STALE:
        return _describe(stale.get_stale_root_causes(key, part) or stale.get_stale_causes(key, part))
    if not _stored(key.path[-1], part, values):
        return "its stored rows are missing"
    if retry_failed and failed:
        return f"{failed} failed scenes"
    return None


def _describe(causes: Sequence[StaleCause]) -> str:
    """Dagster's first stale cause as a phrase, e.g. "scenes has a new code version"."""
    if not causes:
        return "stale"
    cause = causes[0]
    return f"{cause.key.asset_key.to_user_string()} {cause.reason}"


def _identity_changed(instance: dg.DagsterInstance, record: dg.EventLogRecord, identity: dict[str, str]) -> str | None:
    run = instance.get_run_by_id(record.run_id) if record.run_id else None
    tags = run.tags if run is not None else {}
    for key, wanted in identity.items():
        if tags.get(key) != wanted:
            what = "model" if key == MODEL_TAG else "embedder"
            return f"built with {what} {tags.get(key) or 'unknown'}, not {wanted}"
    return None


def build_identity(lm: str = "", embedder: str = "") -> dict[str, str]:
    """The tags naming what a build's outputs are made with (model strings resolved from the environment)."""
    from reveriemem.core.settings import embedder_spec
    from reveriemem.models.backends import resolve_spec

    return {MODEL_TAG: resolve_spec(lm or None).name, EMBEDDER_TAG: embedder or embedder_spec()}


def build_book(
    slug: str,
    lm: str = "",
    embedder: str = "",
    progress: Callable[[str], None] = lambda message: None,
    *,
    force: bool = False,
    retry_failed: bool = False,
    book_assets: Sequence[dg.AssetsDefinition] | None = None,
    character_assets: Sequence[dg.AssetsDefinition] | None = None,
    dagster_log_level: str = DAGSTER_CONSOLE_LEVEL,
) -> BuildReport:
    """Materialise a book's book-level assets, then each focus character's partition.

    Partitions already up to date are skipped (see the module doc); the report
    says which ran and which were skipped, and totals the model usage of this
    build (`usage`: calls, cached_calls, tokens). `book_assets` and
    `character_assets` default to the project's definitions. Dagster's console
    log shows `dagster_log_level` and above; the instance records every event.
    """
    book = load_book(slug)
    instance = get_instance()
    register_partitions(instance, book)
    book_level, per_character = _asset_lists(book_assets, character_assets)
    identity = build_identity(lm, embedder)
    plan = plan_build(slug, force=force, retry_failed=retry_failed, instance=instance,
                      book_assets=book_level, character_assets=per_character, identity=identity)
    resources = {"lm": LanguageModel(model=lm), "embedder": EmbeddingModel(model=embedder),
                 "memory_io": MemoryIOManager()}
    run_config = {"loggers": {"console": {"config": {"log_level": dagster_log_level.upper()}}}}
    report = BuildReport(book=slug, metadata=dict(plan.metadata), ran=plan.to_run, skipped=plan.skipped)
    started = time.monotonic()
    launched_after = time.time()
    running: list[PlannedRun] = []  # in plan order: the run a failure or interrupt is reported in

    def launch(run: PlannedRun) -> dict[str, dict[str, Any]]:
        running.append(run)
        names = ", ".join(a.key.to_user_string() for a in run.assets)
        progress(f"{slug}: {names}" if run.character is None else f"{slug}: {run.character}: {names}")
        result = _materialize(BOOK_JOB if run.character is None else CHARACTER_JOB,
                              [book_text, *book_level, *per_character], run, instance=instance,
                              resources=resources, run_config=run_config, tags={BOOK_TAG: slug, **identity})
        running.remove(run)
        return _metadata(result)

    # Runs go as soon as the runs they read from have ended. With calls that may overlap, the plan's runs are cut
    # by `run_cuts.cut_runs`: every model step starts once what it reads exists, e.g. a character's episodic notes
    # once the scenes and rosters exist, beside the book's entities, facts and dialogue annotation.
    at_once = partitions_at_once(lm, instance)
    stop_waiting = import_while_waiting([asset.key for run in plan.runs for asset in run.assets])
    order = cut_runs(plan.runs) if at_once > 1 else list(plan.runs)
    after = [waits(run, order[:i]) for i, run in enumerate(order)]
    with tracking() as totals:
        try:
            with concurrent_runs(instance, at_once):
                done = [answer.result() for answer in run_at_once(launch, order, at_once, after=after)]
        except BaseException as exc:
            current = min(running, key=order.index) if running else None
            _record_failure(exc, instance, slug, launched_after, current)
            raise
        finally:
            stop_waiting()
    for run, values in zip(order, done):
        report.runs += 1
        for key, value in values.items():
            report.metadata[_report_key(key, run.character)] = value
    # in plan order (the book's assets in dependency order, then each character's), however the runs were cut
    rank = {_report_key(s.asset, _character_of(s.partition)): n for n, s in enumerate(plan.statuses)}
    report.metadata = dict(sorted(report.metadata.items(), key=lambda item: rank.get(item[0], len(rank))))
    report.usage = totals.summary()
    report.seconds = time.monotonic() - started
    return report


def _record_failure(exc: BaseException, instance: dg.DagsterInstance, slug: str, since: float,
                    current: PlannedRun | None) -> None:
    """Mark the build's unfinished runs failed and note on `exc` the step it stopped in (never masking `exc`)."""
    try:
        unfinished = mark_unfinished_failed(instance, slug, since)
        if current is not None:
            step = _running_step(instance, unfinished) or _running_step(instance, _latest_run(instance, slug))
            names = step or ", ".join(a.key.to_user_string() for a in current.assets)
            exc.add_note(f"{FAILED_STEP_NOTE}{names} of {current.label}")
    except Exception:  # the instance itself may be what failed; the original error is what to report
        pass


def _materialize(job: str, assets: list[Any], run: PlannedRun, **execute: Any) -> dg.ExecuteInJobResult:
    """`dg.materialize` of `run.assets`, as a run of the named job (not Dagster's anonymous one)."""
    defs = dg.Definitions(jobs=[dg.define_asset_job(name=job, selection=run.assets)], assets=assets,
                          resources=execute.pop("resources"))
    return defs.resolve_job_def(job).execute_in_process(partition_key=run.partition, **execute)


UNFINISHED = (dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
              dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING)


def mark_unfinished_failed(instance: dg.DagsterInstance, slug: str, since: float) -> list[str]:
    """Mark as failed the runs of `slug` launched since `since` that an interrupt or error left unfinished.

    Returns their run ids. Without this a run killed by a signal stays "Started" in the Dagster UI.
    """
    runs = instance.get_runs(dg.RunsFilter(statuses=list(UNFINISHED), tags={BOOK_TAG: slug}))
    failed = []
    for run in runs:
        record = instance.get_run_record_by_id(run.run_id)
        if record is None or record.create_timestamp.timestamp() < since - 1:
            continue
        instance.report_run_failed(run, message="The build was interrupted or failed; rerunning resumes it.")
        failed.append(run.run_id)
    return failed


def _latest_run(instance: dg.DagsterInstance, slug: str) -> list[str]:
    runs = instance.get_runs(dg.RunsFilter(tags={BOOK_TAG: slug}), limit=1)
    return [runs[0].run_id] if runs else []


def _running_step(instance: dg.DagsterInstance, run_ids: list[str]) -> str | None:
    """The step (asset) that started last and did not succeed, in the first of `run_ids` that has one."""
    kinds = {dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS}
    for run_id in run_ids:
        started: list[str] = []
        for entry in instance.all_logs(run_id, of_type=kinds):
            event = entry.dagster_event
            if event is None or event.step_key is None:
                continue
            if event.event_type == dg.DagsterEventType.STEP_START:
                started.append(event.step_key)
            elif event.step_key in started:
                started.remove(event.step_key)
        if started:
            return started[-1]
    return None


def _latest_materialization(instance: dg.DagsterInstance, key: dg.AssetKey, partition: str) -> dg.EventLogRecord | None:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=1, ascending=False
    ).records
    return records[0] if records else None


def _values(record: dg.EventLogRecord | None) -> dict[str, Any]:
    materialization = record.asset_materialization if record is not None else None
    if materialization is None:
        return {}
    return {k: v.value for k, v in materialization.metadata.items()}


def _failed_count(value: Any) -> int:
    """`failed_scenes` as a count: an int, or a list (of the failed scenes) counted."""
    if isinstance(value, (list, tuple, dict, set)):
        return len(value)
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _stored(name: str, partition: str, values: dict[str, Any]) -> bool:
    """Whether the rows the latest materialisation wrote are still in storage (the one store that knows where)."""
    if name not in BY_ASSET:
        return True  # stored by something other than the project's IO manager: trust the instance
    stored = MemoryStore.for_home().stored_rows(name, partition_ref(partition))
    rows = values.get("rows")
    return stored is not None and (not isinstance(rows, (int, float)) or not rows or stored == int(rows))


def built_with(slug: str, asset: str = "facts") -> dict[str, str]:
    """The model and embedder tags of the build that made a book's latest `asset` (empty if unknown)."""
    instance = get_instance()
    record = _latest_materialization(instance, dg.AssetKey(asset), slug)
    if record is None or not record.run_id:
        return {}
    run = instance.get_run_by_id(record.run_id)
    tags = dict(run.tags) if run is not None else {}
    out = {key: tags[key] for key in (MODEL_TAG, EMBEDDER_TAG) if key in tags}
    embedder = _values(record).get("embedder")
    if EMBEDDER_TAG not in out and isinstance(embedder, str):
        out[EMBEDDER_TAG] = embedder
    return out
