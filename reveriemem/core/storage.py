"""The one IO layer: Parquet files and LanceDB tables keyed by asset and partition.

A partition is a book, or a (book, character) pair. Writing a partition
replaces exactly that partition's rows: a Parquet file per partition,
written to a temporary name and renamed into place; in LanceDB, one table
per asset with `book` and `character` columns, the partition's rows deleted
then added. Every table has an explicit Arrow schema (plain `string`, not
polars' `large_string`, so scalar indexes work).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lancedb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from reveriemem.core.errors import StorageError


@dataclass(frozen=True)
class PartitionRef:
    book: str
    character: str | None = None

    def label(self) -> str:
        return self.book if self.character is None else f"{self.book}|{self.character}"


@dataclass(frozen=True)
class WriteInfo:
    uri: str
    rows: int


def to_arrow(data: pl.DataFrame | pa.Table | list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Coerce rows to exactly `schema` (column order, types); missing columns are an error."""
    if isinstance(data, pl.DataFrame):
        table = data.to_arrow()
    elif isinstance(data, list):
        table = pa.Table.from_pylist(data, schema=schema) if data else schema.empty_table()
    else:
        table = data
    missing = [name for name in schema.names if name not in table.column_names]
    if missing:
        raise StorageError(f"Rows are missing the column(s) {', '.join(missing)} required by the schema.")
    return table.select(schema.names).cast(schema)


class ParquetStore:
    """Parquet files under `root/<asset>/book=<b>[/character=<c>]/part.parquet`."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, asset: str, part: PartitionRef) -> Path:
        folder = self.root / asset / f"book={part.book}"
        if part.character is not None:
            folder = folder / f"character={part.character}"
        return folder / "part.parquet"

    def write(self, asset: str, part: PartitionRef, data: Any, schema: pa.Schema) -> WriteInfo:
        table = to_arrow(data, schema)
        target = self.path(asset, part)
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, staging = tempfile.mkstemp(prefix=".part-", suffix=".parquet", dir=target.parent)
        os.close(handle)
        try:
            pq.write_table(table, staging)
            os.replace(staging, target)
        except BaseException:
            Path(staging).unlink(missing_ok=True)
            raise
        return WriteInfo(uri=str(target), rows=table.num_rows)

    def exists(self, asset: str, part: PartitionRef) -> bool:
        return self.path(asset, part).exists()

    def read(self, asset: str, part: PartitionRef) -> pl.DataFrame:
        target = self.path(asset, part)
        if not target.exists():
            raise StorageError(
                f"The asset {asset!r} has not been materialised for {part.label()}; "
                f"run `reveriemem build {part.book}` first."
            )
        return pl.read_parquet(target)


class LanceStore:
    """LanceDB tables, one per asset, partitioned by `book` and `character` columns."""

    def __init__(self, uri: str):
        self.uri = uri
        self._db: Any = None

    @property
    def db(self) -> Any:
        if self._db is None:
            try:
                self._db = lancedb.connect(self.uri)
            except Exception as exc:  # lancedb raises several types for a bad URI
                raise StorageError(f"Could not open the LanceDB database at {self.uri}: {exc}") from exc
        return self._db

    def table_names(self) -> list[str]:
        listing = self.db.table_names() if hasattr(self.db, "table_names") else self.db.list_tables()
        return list(getattr(listing, "tables", listing))

    def open(self, name: str, schema: pa.Schema | None = None) -> Any:
        if name in self.table_names():
            return self.db.open_table(name)
        if schema is None:
            raise StorageError(f"The LanceDB table {name!r} does not exist in {self.uri}.")
        return self.db.create_table(name, schema=schema, exist_ok=True)

    def write(self, name: str, part: PartitionRef, data: Any, schema: pa.Schema) -> WriteInfo:
        table = to_arrow(data, schema)
        for column in ("book", "character"):
            if column not in schema.names:
                raise StorageError(f"The LanceDB table {name!r} needs a {column!r} column to be partitioned.")
        target = self.open(name, schema)
        target.delete(partition_predicate(part))
        if table.num_rows:
            target.add(table)
        return WriteInfo(uri=f"{self.uri}#{name}", rows=table.num_rows)

    def read(self, name: str, part: PartitionRef) -> pl.DataFrame:
        if name not in self.table_names():
            raise StorageError(
                f"The asset {name!r} has not been materialised for {part.label()}; "
                f"run `reveriemem build {part.book}` first."
            )
        arrow = self.db.open_table(name).search().where(partition_predicate(part)).limit(None).to_arrow()
        return pl.from_arrow(arrow)  # type: ignore[return-value]


def partition_predicate(part: PartitionRef) -> str:
    """The SQL filter selecting exactly one partition's rows."""
    predicate = f"book = {_quote(part.book)}"
    if part.character is not None:
        predicate += f" AND character = {_quote(part.character)}"
    return predicate


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def frame(rows: list[dict[str, Any]], schema: pa.Schema) -> pl.DataFrame:
    """Rows as a polars frame with exactly the columns and types of `schema`."""
    table = pa.Table.from_pylist(rows, schema=schema) if rows else schema.empty_table()
    return pl.from_arrow(table)  # type: ignore[return-value]
