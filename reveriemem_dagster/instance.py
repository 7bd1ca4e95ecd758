"""The project's Dagster instance lives under the data home, so dynamic
partitions and run history persist between commands."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from reveriemem.core.registry import Book
from reveriemem.core.settings import dagster_home
from reveriemem_dagster.partitions import BOOK, CHARACTER

_DAGSTER_YAML = """\
telemetry:
  enabled: false
"""


def ensure_dagster_home() -> Path:
    """Point DAGSTER_HOME at `<data home>/dagster` (unless already set) and initialise it."""
    home = dagster_home()
    os.environ["DAGSTER_HOME"] = str(home)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(_DAGSTER_YAML, encoding="utf-8")
    return home


def get_instance() -> dg.DagsterInstance:
    ensure_dagster_home()
    return dg.DagsterInstance.get()


def register_partitions(instance: dg.DagsterInstance, book: Book) -> None:
    instance.add_dynamic_partitions(BOOK, [book.slug])
    existing = set(instance.get_dynamic_partitions(CHARACTER))
    new = [c.slug for c in book.characters if c.slug not in existing]
    if new:
        instance.add_dynamic_partitions(CHARACTER, new)


def unregister_partitions(instance: dg.DagsterInstance, book: Book, still_used: set[str]) -> None:
    """Remove a book's partition keys; character keys other books use stay."""
    if instance.has_dynamic_partition(BOOK, book.slug):
        instance.delete_dynamic_partition(BOOK, book.slug)
    for character in book.characters:
        if character.slug not in still_used and instance.has_dynamic_partition(CHARACTER, character.slug):
            instance.delete_dynamic_partition(CHARACTER, character.slug)
