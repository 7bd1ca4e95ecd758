"""A persistent cache of model outputs, shared by every process using the data home.

`run_program` consults it for handles with `cache=True`, so re-running a book
skips every model call already answered, and a re-run after a failure calls
the model only for what failed (failures are never stored).

The key is the SHA-256 of a canonical JSON document made of:

- the model: the handle's name, the LM's model string, its GGUF path or API
  base when it has one, its temperature and max_tokens, and the adapter that
  formats the prompt;
- the program: its class and the source of its `forward`, the DSPy version,
  every predictor's signature (instructions, and per field its name, role,
  prefix, description and the JSON schema of its annotation) and the
  program's state (`dump_state()`: demos, compiled instructions, a
  predictor's own LM);
- the inputs: their canonical JSON (pydantic models dumped, keys sorted).

The value is the prediction's output fields as JSON, restored to their
annotated types on read (with DSPy's own `parse_value`, as the test fake
parses). A prediction is stored only if it survives that round trip exactly.

The store is one SQLite file, `<data home>/model_cache.sqlite`, in WAL mode
with a busy timeout, so several processes (partitions materialised at once)
can read and write it together. A cache that cannot be opened or written is
logged and bypassed: it never fails a build.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dspy
import pydantic
import pydantic_core
from dspy.adapters.utils import parse_value

from reveriemem.core import settings
from reveriemem.models.handle import ModelHandle
from reveriemem.models.naming import signature_label

logger = logging.getLogger(__name__)

CACHE_FILE = "model_cache.sqlite"
KEY_VERSION = "reveriemem-model-cache-v1"
BUSY_TIMEOUT_S = 60.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outputs (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    program TEXT NOT NULL,
    outputs TEXT NOT NULL,
    created REAL NOT NULL
) WITHOUT ROWID
"""


class ModelCache:
    """One SQLite cache file; safe to share between threads and processes.

    Each process opens its own connection (re-opened after a fork). Writes
    are single autocommitted statements, so a writer killed midway leaves the
    file intact.
    """

    def __init__(self, path: str | Path, *, timeout: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._pid = -1

    def _connect(self) -> sqlite3.Connection:
        if self._connection is not None and self._pid == os.getpid():
            return self._connection
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(
            self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
        )
        connection.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
        _until_unlocked(lambda: connection.execute("PRAGMA journal_mode = WAL").fetchone(), self.timeout)
        connection.execute("PRAGMA synchronous = NORMAL")
        _until_unlocked(lambda: connection.execute(_SCHEMA), self.timeout)
        self._connection, self._pid = connection, os.getpid()
        return connection

    def get(self, key: str) -> str | None:
        """The stored outputs (JSON text) for `key`, or None."""
        with self._lock:
            row = self._connect().execute("SELECT outputs FROM outputs WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def put(self, key: str, outputs: str, *, model: str = "", program: str = "") -> None:
        with self._lock:
            self._connect().execute(
                "INSERT OR REPLACE INTO outputs (key, model, program, outputs, created) VALUES (?, ?, ?, ?, ?)",
                (key, model, program, outputs, time.time()),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._connect().execute("SELECT count(*) FROM outputs").fetchone()[0])

    def clear(self) -> None:
        with self._lock:
            self._connect().execute("DELETE FROM outputs")

    def close(self) -> None:
        with self._lock:
            if self._connection is not None and self._pid == os.getpid():
                self._connection.close()
            self._connection = None

    def __repr__(self) -> str:
        return f"ModelCache({str(self.path)!r})"


def _until_unlocked(statement: Any, timeout: float) -> Any:
    """Run a statement that may meet SQLITE_BUSY outside the busy handler (journal mode changes)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return statement()
        except sqlite3.OperationalError as exc:
            busy = "locked" in str(exc) or "busy" in str(exc)
            if not busy or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


_caches: dict[Path, ModelCache] = {}
_caches_lock = threading.Lock()


def cache_path() -> Path:
    """`<data home>/model_cache.sqlite`."""
    return settings.data_home() / CACHE_FILE


def model_cache(path: str | Path | None = None) -> ModelCache:
    """The process's cache object for `path` (default: the data home's cache file)."""
    target = Path(path).resolve() if path is not None else cache_path()
    with _caches_lock:
        cache = _caches.get(target)
        if cache is None:
            cache = _caches[target] = ModelCache(target)
        return cache


# -- keys ----------------------------------------------------------------------


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys; pydantic models, dataclasses and enums as JSON values."""
    return json.dumps(pydantic_core.to_jsonable_python(value), sort_keys=True, ensure_ascii=False,
                      separators=(",", ":"), allow_nan=True)


def cache_key(handle: ModelHandle, program: dspy.Module, inputs: Mapping[str, Any]) -> str:
    """The SHA-256 (hex) naming one model, one program and one set of inputs (see the module doc)."""
    document = {
        "version": KEY_VERSION,
        "model": model_identity(handle),
        "program": program_fingerprint(program),
        "inputs": pydantic_core.to_jsonable_python(dict(inputs)),
    }
    return hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()


def model_identity(handle: ModelHandle) -> dict[str, Any]:
    lm = handle.lm
    kwargs = lm.kwargs if lm is not None else {}
    adapter = dspy.settings.adapter or handle.adapter
    engine_path = getattr(handle.engine, "model_path", None)
    return {
        "name": handle.name,
        "lm": getattr(lm, "model", None),
        "engine_path": str(engine_path) if engine_path is not None else None,
        "api_base": kwargs.get("api_base"),
        "temperature": kwargs.get("temperature"),
        "max_tokens": kwargs.get("max_tokens", kwargs.get("max_completion_tokens")),
        "adapter": type(adapter).__name__ if adapter is not None else None,
    }


def program_fingerprint(program: dspy.Module) -> dict[str, Any]:
    program_type = type(program)
    return {
        "class": f"{program_type.__module__}.{program_type.__qualname__}",
        "forward": _forward_source(program_type),
        "dspy": dspy.__version__,
        "signatures": [
            {"predictor": name, **_signature_fingerprint(predictor.signature)}
            for name, predictor in program.named_predictors()
        ],
        "state": json.loads(json.dumps(program.dump_state(), sort_keys=True, default=str)),
    }


_sources: weakref.WeakKeyDictionary[type, str] = weakref.WeakKeyDictionary()


def _forward_source(program_type: type) -> str:
    source = _sources.get(program_type)
    if source is None:
        try:
            source = inspect.getsource(program_type.forward)  # type: ignore[attr-defined]
        except (OSError, TypeError, AttributeError):
            source = program_type.__qualname__
        _sources[program_type] = source
    return source


_fingerprints: weakref.WeakKeyDictionary[type, dict[str, Any]] = weakref.WeakKeyDictionary()


def _signature_fingerprint(signature: type[dspy.Signature]) -> dict[str, Any]:
    known = _fingerprints.get(signature)
    if known is not None:
        return known
    fields = []
    for name, field in signature.fields.items():
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        fields.append({
            "name": name,
            "role": extra.get("__dspy_field_type"),
            "prefix": extra.get("prefix"),
            "desc": extra.get("desc"),
            "type": _type_schema(field.annotation),
        })
    fingerprint = {"instructions": signature.instructions, "fields": fields}
    _fingerprints[signature] = fingerprint
    return fingerprint


def _type_schema(annotation: Any) -> Any:
    try:
        return pydantic.TypeAdapter(annotation).json_schema()
    except Exception:  # types pydantic cannot describe (images, tools): their name will do
        return repr(annotation)


# -- values --------------------------------------------------------------------


def output_annotations(program: dspy.Module) -> dict[str, Any]:
    """Every predictor's output fields and their annotations (the last predictor wins a clash)."""
    annotations: dict[str, Any] = {}
    for _, predictor in program.named_predictors():
        for name, field in predictor.signature.output_fields.items():
            annotations[name] = field.annotation
    return annotations


def dump_outputs(prediction: Any, program: dspy.Module) -> str | None:
    """The prediction's fields as JSON, or None when they would not come back equal."""
    if not isinstance(prediction, dspy.Prediction):
        return None
    values = dict(prediction.items())
    try:
        text = json.dumps(pydantic_core.to_jsonable_python(values), ensure_ascii=False, separators=(",", ":"))
        restored = load_outputs(text, program)
    except Exception as exc:  # not JSON-able, or not restorable: not cached
        logger.debug("Not caching a prediction of %s: %s", type(program).__name__, exc)
        return None
    if restored != values:
        logger.debug("Not caching a prediction of %s: it does not survive JSON", type(program).__name__)
        return None
    return text


def load_outputs(text: str, program: dspy.Module) -> dict[str, Any]:
    """Stored outputs restored to the annotated types of the program's output fields."""
    raw = json.loads(text)
    if not isinstance(raw, dict):
        raise ValueError("stored outputs are not a JSON object")
    annotations = output_annotations(program)
    return {name: parse_value(value, annotations[name]) if name in annotations else value
            for name, value in raw.items()}


# -- what run_program calls ------------------------------------------------------


def lookup(handle: ModelHandle, program: dspy.Module, inputs: Mapping[str, Any]) -> tuple[str | None, dspy.Prediction | None]:
    """(key, cached prediction or None). The key is None when these inputs cannot be cached."""
    try:
        key = cache_key(handle, program, inputs)
    except Exception as exc:
        logger.debug("Inputs of %s cannot be cached: %s", type(program).__name__, exc)
        return None, None
    try:
        text = model_cache().get(key)
    except (sqlite3.Error, OSError) as exc:
        logger.warning("The model cache could not be read (%s); calling the model", exc)
        return None, None
    if text is None:
        return key, None
    try:
        return key, dspy.Prediction(**load_outputs(text, program))
    except Exception as exc:
        logger.warning("A cached answer of %s could not be restored (%s); calling the model",
                       _program_label(program), exc)
        return key, None


def store(key: str, handle: ModelHandle, program: dspy.Module, prediction: Any) -> bool:
    """Store a parsed prediction under `key`; True when stored."""
    text = dump_outputs(prediction, program)
    if text is None:
        return False
    try:
        model_cache().put(key, text, model=handle.name, program=_program_label(program))
    except (sqlite3.Error, OSError) as exc:
        logger.warning("The model cache could not be written (%s); the answer is not cached", exc)
        return False
    return True


def _program_label(program: dspy.Module) -> str:
    labels = [signature_label(predictor.signature) for _, predictor in program.named_predictors()]
    return "+".join(labels) or type(program).__name__
