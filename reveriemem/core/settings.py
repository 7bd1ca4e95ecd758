"""Where the project keeps its data, and which models it uses by default.

Everything a run writes lives under one data home: `.reveriemem/` in the
working directory, or the directory named by the environment variable
`REVERIEMEM_HOME`. It holds the registered books, the Parquet files, the
LanceDB database (unless `REVERIEMEM_LANCEDB_URI` points elsewhere) and the
Dagster instance (`DAGSTER_HOME` defaults to `<home>/dagster`). A deployment
with several workers sets `REVERIEMEM_STORE` (a folder or `s3://bucket/prefix`):
the Parquet files, LanceDB tables, build manifests and a copy of the registry
then live there, shared by every worker (docs/deploy.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from reveriemem.core.errors import ModelUnavailableError, ReverieMemError

HOME_ENV = "REVERIEMEM_HOME"
LANCEDB_ENV = "REVERIEMEM_LANCEDB_URI"
STORE_ENV = "REVERIEMEM_STORE"
LM_ENV = "REVERIEMEM_LM"
LM_API_BASE_ENV = "REVERIEMEM_LM_API_BASE"
EMBEDDER_ENV = "REVERIEMEM_EMBEDDER"
MODEL_CACHE_ENV = "REVERIEMEM_MODEL_CACHE"
MAX_CONCURRENCY_ENV = "REVERIEMEM_MAX_CONCURRENCY"
MAX_RPM_ENV = "REVERIEMEM_MAX_RPM"
MAX_TPM_ENV = "REVERIEMEM_MAX_TPM"
DEFAULT_MAX_CONCURRENCY = 8

DEFAULT_LM = "none"  # the offline rules; `bundled` (SmolLM2-135M) and real models are opted into
DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"


def data_home() -> Path:
    """The project's data home, created on first use."""
    home = Path(os.environ.get(HOME_ENV) or ".reveriemem").expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    return home


def store_uri() -> str:
    """The shared storage URI `REVERIEMEM_STORE` (a folder or `s3://bucket/prefix`), or "" for the data home."""
    return (os.environ.get(STORE_ENV) or "").rstrip("/")


def lancedb_uri() -> str:
    """The LanceDB URI: `REVERIEMEM_LANCEDB_URI`, `<REVERIEMEM_STORE>/lancedb`, or `<home>/lancedb`."""
    store = store_uri()
    return os.environ.get(LANCEDB_ENV) or (f"{store}/lancedb" if store else str(data_home() / "lancedb"))


def dagster_home() -> Path:
    """The Dagster instance directory, `DAGSTER_HOME` or `<home>/dagster`."""
    path = Path(os.environ.get("DAGSTER_HOME") or data_home() / "dagster").resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def lm_spec() -> str:
    """The model string chosen by `REVERIEMEM_LM`, or the default: no model (the offline rules)."""
    return os.environ.get(LM_ENV) or DEFAULT_LM


def lm_configured() -> bool:
    """Whether a model was chosen in the environment (`REVERIEMEM_LM` set and not empty)."""
    return bool(os.environ.get(LM_ENV, "").strip())


def embedder_spec() -> str:
    """The embedding model chosen by `REVERIEMEM_EMBEDDER`, or the default."""
    return os.environ.get(EMBEDDER_ENV) or DEFAULT_EMBEDDER


def model_cache_enabled() -> bool:
    """Whether models opened by name use the persistent model cache (`REVERIEMEM_MODEL_CACHE`, default on)."""
    return os.environ.get(MODEL_CACHE_ENV, "1").strip().lower() not in {"0", "false", "no", "off"}


LM_MAX_TOKENS_ENV = "REVERIEMEM_LM_MAX_TOKENS"
LM_THREADS_ENV = "REVERIEMEM_LM_THREADS"


def lm_max_tokens() -> int | None:
    """The cap on a model call's completion tokens from `REVERIEMEM_LM_MAX_TOKENS` (None: each backend's default)."""
    return _count(LM_MAX_TOKENS_ENV, "tokens")


def lm_threads() -> int | None:
    """CPU threads a local GGUF model computes with, from `REVERIEMEM_LM_THREADS` (None: one per core)."""
    return _count(LM_THREADS_ENV, "threads")


def _count(name: str, unit: str) -> int | None:
    """A positive whole number from the environment variable `name`, or None when it is not set."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ModelUnavailableError(f"{name} must be a positive number of {unit}, not {raw!r}.")
    return int(raw)


def max_concurrency() -> int:
    """Model calls of one model in flight at once in the process (`REVERIEMEM_MAX_CONCURRENCY`, default 8)."""
    value = _positive(MAX_CONCURRENCY_ENV)
    return int(value) if value is not None else DEFAULT_MAX_CONCURRENCY


def max_rpm() -> float | None:
    """Requests per minute allowed to one model (`REVERIEMEM_MAX_RPM`), or None for no limit."""
    return _positive(MAX_RPM_ENV)


def max_tpm() -> float | None:
    """Tokens per minute allowed to one model (`REVERIEMEM_MAX_TPM`), or None for no limit."""
    return _positive(MAX_TPM_ENV)


def _positive(name: str) -> float | None:
    raw = (os.environ.get(name) or "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ReverieMemError(f"{name} must be a positive number, not {raw!r}.") from None
    if value <= 0:
        raise ReverieMemError(f"{name} must be a positive number, not {raw!r}.")
    return value


@contextmanager
def environment(**values: str | None) -> Iterator[None]:
    """Set (or, with None, unset) environment variables for a block, and restore them after."""
    saved = {key: os.environ.get(key) for key in values}
    try:
        for key, value in values.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
