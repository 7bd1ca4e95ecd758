"""Files under one storage root: a local folder, or a prefix of an S3-compatible bucket.

A root is a path or a URI. `s3://bucket/prefix` is opened with credentials
from the environment only: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
`AWS_SESSION_TOKEN`, `AWS_REGION` (or `AWS_DEFAULT_REGION`), and an endpoint
override for S3-compatible servers (MinIO, Ceph, a loopback server) from
`REVERIEMEM_S3_ENDPOINT` or `AWS_ENDPOINT_URL`. The same settings open the
Parquet files (pyarrow's S3 filesystem) and the LanceDB database
(`lance_storage_options`), so one URI names one store for every writer.

Writes replace a whole object: a local file is written under a temporary name
and renamed into place; an object-store PUT is atomic by itself. Either way a
reader sees the old object or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from reveriemem.core.errors import StorageError

ENDPOINT_ENV = "REVERIEMEM_S3_ENDPOINT"
REMOTE_SCHEMES = ("s3",)


def is_remote(root: str | Path) -> bool:
    """Whether `root` names an object store (`s3://...`) rather than a local folder."""
    if isinstance(root, Path):
        return False
    scheme = urlparse(root).scheme.lower()
    if len(scheme) <= 1 or scheme == "file":  # a Windows drive letter, or a plain path
        return False
    if scheme not in REMOTE_SCHEMES:
        raise StorageError(f"The storage URI {root!r} is not supported; use a local path or s3://bucket/prefix.")
    return True


def join(root: str | Path, *parts: str) -> str | Path:
    """`root` with `parts` appended: a Path for a local root, a URI for a remote one."""
    if is_remote(root):
        return "/".join([str(root).rstrip("/"), *parts])
    return Path(root).joinpath(*parts)


@dataclass(frozen=True)
class S3Settings:
    """How to reach S3 or an S3-compatible server, read from the environment."""

    endpoint: str | None
    region: str | None
    access_key: str | None
    secret_key: str | None
    session_token: str | None

    @classmethod
    def from_env(cls) -> S3Settings:
        env = os.environ.get
        return cls(
            endpoint=env(ENDPOINT_ENV) or env("AWS_ENDPOINT_URL_S3") or env("AWS_ENDPOINT_URL") or None,
            region=env("AWS_REGION") or env("AWS_DEFAULT_REGION") or None,
            access_key=env("AWS_ACCESS_KEY_ID") or None,
            secret_key=env("AWS_SECRET_ACCESS_KEY") or None,
            session_token=env("AWS_SESSION_TOKEN") or None,
        )

    @property
    def http(self) -> bool:
        return bool(self.endpoint) and str(self.endpoint).lower().startswith("http://")

    def filesystem(self) -> pafs.S3FileSystem:
        options: dict[str, object] = {"region": self.region or "us-east-1"}
        if self.endpoint:
            parsed = urlparse(self.endpoint if "://" in self.endpoint else f"https://{self.endpoint}")
            options["endpoint_override"] = parsed.netloc
            options["scheme"] = parsed.scheme or "https"
        if self.access_key and self.secret_key:
            options.update(access_key=self.access_key, secret_key=self.secret_key, session_token=self.session_token)
        return pafs.S3FileSystem(**options)  # type: ignore[arg-type]

    def lance_options(self) -> dict[str, str]:
        options: dict[str, str] = {"region": self.region or "us-east-1"}
        if self.endpoint:
            options["endpoint"] = self.endpoint if "://" in self.endpoint else f"https://{self.endpoint}"
        if self.http:
            options["allow_http"] = "true"
        if self.access_key and self.secret_key:
            options.update(aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key)
        if self.session_token:
            options["aws_session_token"] = self.session_token
        return options


def lance_storage_options(uri: str) -> dict[str, str] | None:
    """LanceDB `storage_options` for `uri`: None for a local database."""
    return S3Settings.from_env().lance_options() if is_remote(uri) else None


class Files:
    """Whole files under `root`, named by paths relative to it ("a/b/part.parquet")."""

    def __init__(self, root: str | Path):
        self.remote = is_remote(root)
        self.root: str | Path = str(root).rstrip("/") if self.remote else Path(root)
        self._fs: pafs.FileSystem | None = None

    @property
    def fs(self) -> pafs.FileSystem:
        if self._fs is None:
            self._fs = S3Settings.from_env().filesystem() if self.remote else pafs.LocalFileSystem()
        return self._fs

    def uri(self, rel: str) -> str:
        return str(join(self.root, *rel.split("/")))

    def _key(self, rel: str) -> str:
        """The path of `rel` inside the filesystem (a bucket/key for S3)."""
        return self.uri(rel).removeprefix("s3://") if self.remote else self.uri(rel)

    def _failure(self, what: str, rel: str, exc: Exception) -> StorageError:
        return StorageError(f"Could not {what} {self.uri(rel)}: {exc}")

    def exists(self, rel: str) -> bool:
        if not self.remote:
            return Path(self.uri(rel)).exists()
        try:
            return bool(self.fs.get_file_info(self._key(rel)).type == pafs.FileType.File)
        except OSError as exc:
            raise self._failure("reach", rel, exc) from exc

    def write_bytes(self, rel: str, data: bytes) -> str:
        if not self.remote:
            return str(_replace_local(Path(self.uri(rel)), lambda staging: staging.write_bytes(data)))
        try:
            with self.fs.open_output_stream(self._key(rel)) as out:
                out.write(data)
        except OSError as exc:
            raise self._failure("write", rel, exc) from exc
        return self.uri(rel)

    def read_bytes(self, rel: str) -> bytes | None:
        """The file's bytes, or None when there is no such file."""
        if not self.remote:
            path = Path(self.uri(rel))
            return path.read_bytes() if path.exists() else None
        try:
            with self.fs.open_input_stream(self._key(rel)) as handle:
                return bytes(handle.read())
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._failure("read", rel, exc) from exc

    def write_parquet(self, rel: str, table: pa.Table) -> str:
        if not self.remote:
            return str(_replace_local(Path(self.uri(rel)), lambda staging: pq.write_table(table, staging)))
        try:
            pq.write_table(table, self._key(rel), filesystem=self.fs)
        except OSError as exc:
            raise self._failure("write", rel, exc) from exc
        return self.uri(rel)

    def read_parquet(self, rel: str) -> pa.Table | None:
        """The file's table, or None when there is no such file."""
        if not self.exists(rel):
            return None
        if not self.remote:
            return pq.read_table(self.uri(rel))
        try:
            return pq.read_table(self._key(rel), filesystem=self.fs)
        except OSError as exc:
            raise self._failure("read", rel, exc) from exc

    def parquet_rows(self, rel: str) -> int | None:
        """The row count recorded in a Parquet file's footer, or None when there is no such file."""
        if not self.exists(rel):
            return None
        if not self.remote:
            return int(pq.read_metadata(self.uri(rel)).num_rows)
        with self.fs.open_input_file(self._key(rel)) as handle:
            return int(pq.read_metadata(handle).num_rows)

    def delete_folder(self, rel: str) -> None:
        """Remove everything under `rel` (nothing to remove is fine)."""
        if not self.remote:
            shutil.rmtree(self.uri(rel), ignore_errors=True)
            return
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_dir(self._key(rel))


def _replace_local(target: Path, write: Callable[[Path], object]) -> Path:
    """Write `target` through `write(staging_path)` under a temporary name, then rename it into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{target.stem}-", suffix=target.suffix, dir=target.parent)
    os.close(handle)
    staging = Path(name)
    try:
        write(staging)
        os.replace(staging, target)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise
    return target
