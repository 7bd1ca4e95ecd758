"""Materialising a book's memory from Python or the CLI, recorded in the project's instance."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from reveriemem.registry import load_book
from reveriemem_dagster.definitions import ALL_ASSETS, BOOK_ASSETS, CHARACTER_ASSETS
from reveriemem_dagster.instance import get_instance, register_partitions
from reveriemem_dagster.io_managers import MemoryIOManager
from reveriemem_dagster.partitions import pair_key
from reveriemem_dagster.resources import EmbeddingModel, LanguageModel


@dataclass
class BuildReport:
    book: str
    runs: int = 0
    seconds: float = 0.0
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)


def _metadata(result: dg.ExecuteInJobResult) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization  # type: ignore[union-attr]
        out[materialization.asset_key.to_user_string()] = {k: v.value for k, v in materialization.metadata.items()}
    return out


def build_book(
    slug: str,
    lm: str = "",
    embedder: str = "",
    progress: Callable[[str], None] = lambda message: None,
) -> BuildReport:
    """Materialise a book's book-level assets, then each focus character's partition."""
    book = load_book(slug)
    instance = get_instance()
    register_partitions(instance, book)
    resources = {"lm": LanguageModel(model=lm), "embedder": EmbeddingModel(model=embedder),
                 "memory_io": MemoryIOManager()}
    report = BuildReport(book=slug)
    started = time.monotonic()
    progress(f"{slug}: scenes, utterances and rosters")
    result = dg.materialize(ALL_ASSETS, selection=BOOK_ASSETS, partition_key=slug,
                            instance=instance, resources=resources, tags={"reveriemem/book": slug})
    report.runs += 1
    report.metadata.update(_metadata(result))
    for character in book.characters:
        progress(f"{slug}: {character.name}")
        result = dg.materialize(ALL_ASSETS, selection=CHARACTER_ASSETS, partition_key=pair_key(slug, character.slug),
                                instance=instance, resources=resources, tags={"reveriemem/book": slug})
        report.runs += 1
        for key, values in _metadata(result).items():
            report.metadata[f"{key}[{character.slug}]"] = values
    report.seconds = time.monotonic() - started
    return report
