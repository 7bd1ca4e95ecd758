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
import threading
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from functools import cached_property
from importlib import metadata as package_metadata
from pathlib import Path
from typing import Any

import lancedb
import polars as pl
import pyarrow as pa

from reveriemem.core.errors import StorageError
from reveriemem.core.object_store import Files, join, lance_storage_options
from reveriemem.core.schemas import BY_ASSET, schema_for, vector_dim
from reveriemem.core.settings import data_home, lancedb_uri, store_uri

COMMIT_ATTEMPTS = 5  # tries of one partition's delete + add when another writer's commit wins the race


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
    """Parquet files under `root/<asset>/book=<b>[/character=<c>]/part.parquet`; `root` a folder or an s3:// URI."""

    def __init__(self, root: str | Path):
        self.files = Files(root)
        self.root = self.files.root

    @staticmethod
    def relative(asset: str, part: PartitionRef) -> str:
        folder = f"{asset}/book={part.book}"
        if part.character is not None:
            folder += f"/character={part.character}"
        return f"{folder}/part.parquet"

    def path(self, asset: str, part: PartitionRef) -> Path:
        """The local file of a partition (a local root only; see `location` for any root)."""
        if self.files.remote:
            raise StorageError(f"The Parquet store at {self.root} is remote: it has locations, not local paths.")
        return Path(self.location(asset, part))

    def location(self, asset: str, part: PartitionRef) -> str:
        return self.files.uri(self.relative(asset, part))

    def write(self, asset: str, part: PartitionRef, data: Any, schema: pa.Schema) -> WriteInfo:
        table = to_arrow(data, schema)
        return WriteInfo(uri=self.files.write_parquet(self.relative(asset, part), table), rows=table.num_rows)

    def exists(self, asset: str, part: PartitionRef) -> bool:
        return self.files.exists(self.relative(asset, part))

    def rows(self, asset: str, part: PartitionRef) -> int | None:
        """How many rows a partition's file holds, or None when it has none."""
        return self.files.parquet_rows(self.relative(asset, part))

    def read(self, asset: str, part: PartitionRef) -> pl.DataFrame:
        table = self.files.read_parquet(self.relative(asset, part))
        if table is None:
            raise StorageError(
                f"The asset {asset!r} has not been materialised for {part.label()}; "
                f"run `reveriemem build {part.book}` first."
            )
        return pl.from_arrow(table)  # type: ignore[return-value]


class LanceStore:
    """LanceDB tables, one per asset, partitioned by `book` and `character` columns."""

    def __init__(self, uri: str):
        self.uri = uri
        self._db: Any = None

    @property
    def db(self) -> Any:
        if self._db is None:
            try:
                self._db = lancedb.connect(self.uri, storage_options=lance_storage_options(self.uri))
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
        with _write_lock(self.uri, name):  # writers in other processes: lance's commit conflicts, retried
            for attempt in range(COMMIT_ATTEMPTS):
                try:
                    target = self.open(name, schema)
                    target.delete(partition_predicate(part))
                    if table.num_rows:
                        self._fit_dimension(name, target, schema).add(table)
                    break
                except Exception as exc:  # lance reports a lost commit race as a plain error naming the conflict
                    if attempt + 1 == COMMIT_ATTEMPTS or "conflict" not in str(exc).lower():
                        raise
                    time.sleep(0.2 * (attempt + 1))
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


_write_locks: dict[tuple[str, str], threading.Lock] = {}
_write_locks_lock = threading.Lock()


def _write_lock(uri: str, name: str) -> threading.Lock:
    """This process's lock on one LanceDB table: partitions built at once in threads write it in turn."""
    with _write_locks_lock:
        return _write_locks.setdefault((uri, name), threading.Lock())


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
    book_version: str = ""  # the registration built from (`core.built_from`); "" in a manifest older than it

    @classmethod
    def now(cls, book: str, model: str, embedder: str, dim: int, book_version: str = "") -> BuildManifest:
        return cls(book, model or "none", embedder, int(dim), code_version(), datetime.now(UTC).isoformat(),
                   book_version)


def code_version() -> str:
    """The installed project's version (`reveriemem <version>`)."""
    try:
        return f"reveriemem {package_metadata.version('reveriemem')}"
    except package_metadata.PackageNotFoundError:
        return "reveriemem (not installed)"


@dataclass(frozen=True)
class MemoryStore:
    """A store's tables and build manifests: Parquet under `<root>/parquet`, LanceDB at `uri`.

    `root` is the data home, or the storage URI `REVERIEMEM_STORE` (a folder or
    `s3://bucket/prefix`) that several workers share; the registry, the model
    cache and the Dagster instance stay in the data home (`home`).
    """

    home: Path
    uri: str
    root: str | Path = ""  # empty: the data home

    @classmethod
    def for_home(cls, home: str | Path | None = None, lancedb: str | None = None) -> MemoryStore:
        """The store of `home` (empty: `REVERIEMEM_HOME` or `.reveriemem`, with `REVERIEMEM_STORE` when set).

        The LanceDB URI is `lancedb` when given, else `<home>/lancedb` for an
        explicit home, else `REVERIEMEM_LANCEDB_URI`, `<REVERIEMEM_STORE>/lancedb`
        or `<data home>/lancedb`.
        """
        if home:
            root = Path(home).expanduser().resolve()
            return cls(root, lancedb or str(root / "lancedb"), root)
        return cls(data_home(), lancedb or lancedb_uri(), store_uri() or data_home())

    @cached_property
    def files(self) -> Files:
        return Files(self.root or self.home)

    @cached_property
    def parquet(self) -> ParquetStore:
        return ParquetStore(join(self.root or self.home, "parquet"))

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
        return backend.rows(asset, part)

    @staticmethod
    def _manifest_rel(book: str) -> str:
        return f"manifests/{book}.json"

    def manifest_path(self, book: str) -> str:
        """Where the build manifest of `book` is kept (a path, or a URI in an object store)."""
        return self.files.uri(self._manifest_rel(book))

    def write_manifest(self, manifest: BuildManifest) -> str:
        """Record what built `manifest.book` (replacing an earlier record), atomically."""
        text = json.dumps(asdict(manifest), indent=2)
        return self.files.write_bytes(self._manifest_rel(manifest.book), text.encode("utf-8"))

    def manifest(self, book: str) -> BuildManifest | None:
        """The build manifest of `book`, or None when its memory was never built in this store."""
        data = self.files.read_bytes(self._manifest_rel(book))
        if data is None:
            return None
        try:
            values = json.loads(data.decode("utf-8"))
            optional = {"book_version"}  # absent from a manifest written before it was recorded
            return BuildManifest(**{name: values[name] for name in BuildManifest.__dataclass_fields__
                                    if name not in optional or name in values})
        except (ValueError, KeyError, TypeError) as exc:
            raise StorageError(
                f"The build manifest of {book} at {self.manifest_path(book)} is damaged ({exc}); rebuild the book."
            ) from exc
