"""The project's Dagster instance lives under the data home, so dynamic
partitions, run history and data versions persist between commands.

Registering a book adds its partition keys and records the data version of
its `book_text` (an observation, only when the version changed), from which
Dagster's staleness follows.
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
from dagster._core.definitions.data_version import DATA_VERSION_TAG, extract_data_version_from_entry

from assets.context import book_text
from reveriemem.core.built_from import book_version
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
    """Add the book's partition keys and observe its `book_text` data version."""
    instance.add_dynamic_partitions(BOOK, [book.slug])
    existing = set(instance.get_dynamic_partitions(CHARACTER))
    new = [c.slug for c in book.characters if c.slug not in existing]
    if new:
        instance.add_dynamic_partitions(CHARACTER, new)
    observe_book(instance, book)


def observe_book(instance: dg.DagsterInstance, book: Book) -> None:
    """Record the book's data version on `book_text` when it differs from the one last recorded."""
    version = book_version(book)
    record = instance.get_latest_data_version_record(book_text.key, True, partition_key=book.slug)
    if record is not None and extract_data_version_from_entry(record.event_log_entry) == dg.DataVersion(version):
        return
    instance.report_runless_asset_event(
        dg.AssetObservation(book_text.key, partition=book.slug, tags={DATA_VERSION_TAG: version})
    )


def unregister_partitions(instance: dg.DagsterInstance, book: Book, still_used: set[str]) -> None:
    """Remove a book's partition keys; character keys other books use stay."""
    if instance.has_dynamic_partition(BOOK, book.slug):
        instance.delete_dynamic_partition(BOOK, book.slug)
    for character in book.characters:
        if character.slug not in still_used and instance.has_dynamic_partition(CHARACTER, character.slug):
            instance.delete_dynamic_partition(CHARACTER, character.slug)


def add_book(path: Path, characters: Path | None = None, name: str | None = None) -> tuple[Book, list[str]]:
    """Register a book file with its character file (the shipped one for the benchmark novels by default).

    Writes it to the registry and adds its partitions; a failure to register the partitions leaves no
    half-registered book. Returns the book and the character file's warnings.
    """
    from reveriemem.core.demo import shipped_character_file
    from reveriemem.core.errors import RegistryError
    from reveriemem.core.registry import prepare_book, remove_book, write_book
    from reveriemem.core.text import check_book_path

    check_book_path(path)
    if characters is None:
        characters = shipped_character_file(name or path.stem)
        if characters is None:
            raise RegistryError("Give the focus characters with --characters FILE (see docs/formats.md).")
    book, warnings = prepare_book(path, characters, slug=name)
    write_book(book)
    try:
        register_partitions(get_instance(), book)
    except Exception:
        remove_book(book.slug)
        raise
    return book, warnings
