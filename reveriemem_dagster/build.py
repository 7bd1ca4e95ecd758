"""Materialising a book's memory from Python or the CLI, recorded in the project's instance.

A build resumes: an (asset, partition) is skipped when its latest
materialisation in the instance is newer than the book's registration and
than the materialisations it was made from, and its stored rows are still
there. Everything else runs, in one Dagster run for the book-level assets and
one per focus character. `force=True` redoes everything; `retry_failed=True`
also redoes the partitions whose latest materialisation recorded failed scenes
(metadata `failed_scenes` > 0). The persistent model cache makes a redone
partition call the model only for what is not cached, i.e. the failed scenes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import dagster as dg
import pyarrow.parquet as pq

from reveriemem.core.registry import Book, load_book
from reveriemem.core.schemas import BY_ASSET
from reveriemem.core.settings import data_home, lancedb_uri
from reveriemem.core.storage import LanceStore, ParquetStore, partition_predicate
from reveriemem.models.usage import tracking
from reveriemem_dagster.instance import get_instance, register_partitions
from reveriemem_dagster.io_managers import MemoryIOManager
from reveriemem_dagster.partitions import pair_key, partition_ref
from reveriemem_dagster.resources import EmbeddingModel, LanguageModel

MODEL_TAG, EMBEDDER_TAG = "reveriemem/lm", "reveriemem/embedder"  # on every build run: what made the outputs
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
class PlannedRun:
    """One Dagster run of a build: some assets of one partition."""

    partition: str | dg.MultiPartitionKey
    character: str | None  # None for the book-level run
    assets: list[dg.AssetsDefinition]  # to materialise, in dependency order

    @property
    def label(self) -> str:
        return str(self.partition)


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


def _asset_lists(
    book_assets: Sequence[dg.AssetsDefinition] | None, character_assets: Sequence[dg.AssetsDefinition] | None
) -> tuple[list[dg.AssetsDefinition], list[dg.AssetsDefinition]]:
    """The given asset lists, each defaulting to the project's definitions (imported only then)."""
    if book_assets is None or character_assets is None:
        from reveriemem_dagster.definitions import BOOK_ASSETS, CHARACTER_ASSETS

        book_assets = BOOK_ASSETS if book_assets is None else book_assets
        character_assets = CHARACTER_ASSETS if character_assets is None else character_assets
    return list(book_assets), list(character_assets)


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
    registered = _registered_at(book)
    groups: list[tuple[str | dg.MultiPartitionKey, str | None, list[dg.AssetsDefinition]]] = [
        (slug, None, _in_dependency_order(book_level))
    ]
    groups += [(pair_key(slug, c.slug), c.slug, _in_dependency_order(per_character)) for c in book.characters]
    book_keys = {a.key for a in book_level}
    group_keys = {a.key for a in per_character}

    latest: dict[tuple[dg.AssetKey, str], float | None] = {}  # when each partition was (or will be) made
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
            upstream = [
                (dep, slug if dep in book_keys else part)
                for dep in sorted(asset.dependency_keys, key=lambda k: k.to_user_string())
                if dep in book_keys or dep in group_keys
            ]
            reason = _reason_to_run(asset, part, record, values, registered, force, retry_failed, failed,
                                    upstream, latest, will_run)
            if reason is None and record is not None and identity:
                reason = _identity_changed(instance, record, identity)
            name = asset.key.to_user_string()
            if reason is None:
                latest[(asset.key, part)] = record.timestamp if record is not None else None
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


def _reason_to_run(
    asset: dg.AssetsDefinition,
    part: str,
    record: dg.EventLogRecord | None,
    values: dict[str, Any],
    registered: float,
    force: bool,
    retry_failed: bool,
    failed: int,
    upstream: list[tuple[dg.AssetKey, str]],
    latest: dict[tuple[dg.AssetKey, str], float | None],
    will_run: set[tuple[dg.AssetKey, str]],
) -> str | None:
    """Why this partition must be materialised, or None when it is up to date."""
    if force:
        return "forced"
    if record is None:
        return "not materialised yet"
    if record.timestamp < registered:
        return "materialised before the book was registered"
    if not _stored(asset.key.path[-1], part, values):
        return "its stored rows are missing"
    if retry_failed and failed:
        return f"{failed} failed scenes"
    for dep, dep_part in upstream:
        if (dep, dep_part) in will_run:
            return f"{dep.to_user_string()} is rebuilt"
        made = latest.get((dep, dep_part))
        if made is not None and made > record.timestamp:
            return f"{dep.to_user_string()} is newer"
    return None


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
    with tracking() as totals:
        for run in plan.runs:
            names = ", ".join(a.key.to_user_string() for a in run.assets)
            progress(f"{slug}: {names}" if run.character is None else f"{slug}: {run.character}: {names}")
            result = dg.materialize([*book_level, *per_character], selection=run.assets, partition_key=run.partition,
                                    instance=instance, resources=resources, run_config=run_config,
                                    tags={"reveriemem/book": slug, **identity})
            report.runs += 1
            for key, values in _metadata(result).items():
                report.metadata[_report_key(key, run.character)] = values
    report.usage = totals.summary()
    report.seconds = time.monotonic() - started
    return report


def _registered_at(book: Book) -> float:
    stamp = book.info.get("registered_at")
    try:
        return datetime.fromisoformat(str(stamp)).timestamp() if stamp else 0.0
    except ValueError:
        return 0.0


def _in_dependency_order(assets: list[dg.AssetsDefinition]) -> list[dg.AssetsDefinition]:
    keys = {a.key for a in assets}
    ordered: list[dg.AssetsDefinition] = []
    placed: set[dg.AssetKey] = set()
    pending = list(assets)
    while pending:
        ready = [a for a in pending if (set(a.dependency_keys) & keys) <= placed]
        if not ready:  # a cycle cannot happen in Dagster; keep the given order if it did
            ready = pending[:1]
        for asset in ready:
            ordered.append(asset)
            placed.add(asset.key)
            pending.remove(asset)
    return ordered


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
    """Whether the rows the latest materialisation wrote are still in storage."""
    if name not in BY_ASSET:
        return True  # stored by something other than the project's IO manager: trust the instance
    backend, _ = BY_ASSET[name]
    part = partition_ref(partition)
    rows = values.get("rows")
    rows = int(rows) if isinstance(rows, (int, float)) else None
    if backend == "lancedb":
        store = LanceStore(lancedb_uri())
        if name not in store.table_names():
            return False
        if not rows:
            return True
        return int(store.open(name).count_rows(partition_predicate(part))) == rows
    path = ParquetStore(data_home() / "parquet").path(name, part)
    if not path.exists():
        return False
    return rows is None or pq.read_metadata(path).num_rows == rows


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
