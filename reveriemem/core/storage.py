"""The one IO layer: where stored tables live, and Parquet files and LanceDB tables keyed by asset and partition.

`MemoryStore.for_home(...)` is the only code that turns a data home into
paths and URIs: the IO manager is configured from it and every reader (the
memory reader, evaluation, the benchmarks) opens its tables through it, so a
location configured once is honoured everywhere. Beside the tables, the
store keeps one build manifest per book (`BuildManifest`: which model and
embedder built it, the vector dimension, the code version, when), which is
how `ask`, `chat`, `eval` and the benchmarks learn which embedder to use.

A partition is a book, or a (book, character) pair. Writing a partition
replaces exactly that partition's rows: a Parquet file per partition,
written to a temporary name and renamed into place; in LanceDB, one table
per asset with `book` and `character` columns, the partition's rows deleted
then added. Every table has an explicit Arrow schema (plain `string`, not
polars' `large_string`, so scalar indexes work). A LanceDB table holds
vectors of one dimension: a table is re-created for a new dimension only
when no other partition's rows remain in it.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from functools import cached_property
from importlib import metadata as package_metadata
from pathlib import Path
from typing import Any

import lancedb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from reveriemem.core.errors import StorageError
from reveriemem.core.schemas import BY_ASSET, schema_for, vector_dim
from reveriemem.core.settings import data_home, lancedb_uri


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
            target = self._fit_dimension(name, target, schema)
        if table.num_rows:
            target.add(table)
        return WriteInfo(uri=f"{self.uri}#{name}", rows=table.num_rows)

    def _fit_dimension(self, name: str, target: Any, schema: pa.Schema) -> Any:
        """`target`, re-created for `schema`'s vector dimension when it holds another and no rows remain.

        Called only with rows to add: writing no rows fits any table.
        """
        wanted, held = vector_dim(schema), vector_dim(target.schema)
        if wanted is None or held is None or wanted == held:
            return target
        if int(target.count_rows()) > 0:
            raise StorageError(
                f"The LanceDB table {name!r} in {self.uri} holds {held}-d vectors of other books, so {wanted}-d "
                f"vectors cannot be stored beside them; rebuild those books with the same embedder or use "
                f"another data home (REVERIEMEM_HOME)."
            )
        self.db.drop_table(name)
        return self.db.create_table(name, schema=schema)

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


@dataclass(frozen=True)
class BuildManifest:
    """What built a book's memory: written with its stored vectors, read by whatever asks the memory."""

    book: str
    model: str  # the language model's name, or "none"
    embedder: str  # the embedder's name, which `open_embedder` opens again
    dim: int  # the dimension of the stored vectors
    code_version: str
    built_at: str  # ISO 8601, UTC

    @classmethod
    def now(cls, book: str, model: str, embedder: str, dim: int) -> BuildManifest:
        return cls(book, model or "none", embedder, int(dim), code_version(), datetime.now(UTC).isoformat())


def code_version() -> str:
    """The installed project's version (`reveriemem <version>`)."""
    try:
        return f"reveriemem {package_metadata.version('reveriemem')}"
    except package_metadata.PackageNotFoundError:
        return "reveriemem (not installed)"


@dataclass(frozen=True)
class MemoryStore:
    """A data home's stored tables and build manifests: Parquet under `home/parquet`, LanceDB at `uri`."""

    home: Path
    uri: str

    @classmethod
    def for_home(cls, home: str | Path | None = None, lancedb: str | None = None) -> MemoryStore:
        """The store of `home` (empty: `REVERIEMEM_HOME` or `.reveriemem`).

        The LanceDB URI is `lancedb` when given, else `<home>/lancedb` for an
        explicit home, else `REVERIEMEM_LANCEDB_URI` or `<data home>/lancedb`.
        """
        if home:
            root = Path(home).expanduser().resolve()
            return cls(root, lancedb or str(root / "lancedb"))
        return cls(data_home(), lancedb or lancedb_uri())

    @cached_property
    def parquet(self) -> ParquetStore:
        return ParquetStore(self.home / "parquet")

    @cached_property
    def lance(self) -> LanceStore:
        return LanceStore(self.uri)

    def backend(self, asset: str) -> ParquetStore | LanceStore:
        """Where `asset` is stored, as declared in `schemas.BY_ASSET`."""
        if asset not in BY_ASSET:
            raise StorageError(f"{asset!r} is not a stored asset of the project.")
        return self.lance if BY_ASSET[asset][0] == "lancedb" else self.parquet

    def write(self, asset: str, part: PartitionRef, data: Any) -> WriteInfo:
        """Replace one partition's rows of `asset`, with its schema built for the rows' vector dimension."""
        return self.backend(asset).write(asset, part, data, schema_for(asset, vector_dim(data)))

    def read(self, asset: str, part: PartitionRef) -> pl.DataFrame:
        return self.backend(asset).read(asset, part)

    def stored_rows(self, asset: str, part: PartitionRef) -> int | None:
        """How many rows of `asset` are stored for `part`, or None when nothing was ever stored for it."""
        backend = self.backend(asset)
        if isinstance(backend, LanceStore):
            if asset not in backend.table_names():
                return None
            return int(backend.open(asset).count_rows(partition_predicate(part)))
        path = backend.path(asset, part)
        return pq.read_metadata(path).num_rows if path.exists() else None

    def manifest_path(self, book: str) -> Path:
        return self.home / "manifests" / f"{book}.json"

    def write_manifest(self, manifest: BuildManifest) -> Path:
        """Record what built `manifest.book` (replacing an earlier record), atomically."""
        target = self.manifest_path(manifest.book)
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, staging = tempfile.mkstemp(prefix=".manifest-", suffix=".json", dir=target.parent)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(asdict(manifest), out, indent=2)
        os.replace(staging, target)
        return target

    def manifest(self, book: str) -> BuildManifest | None:
        """The build manifest of `book`, or None when its memory was never built in this store."""
        path = self.manifest_path(book)
        if not path.exists():
            return None
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
            return BuildManifest(**{name: values[name] for name in BuildManifest.__dataclass_fields__})
        except (ValueError, KeyError, TypeError) as exc:
            raise StorageError(f"The build manifest of {book} at {path} is damaged ({exc}); rebuild the book.") from exc
