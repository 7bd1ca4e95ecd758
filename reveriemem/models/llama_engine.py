"""An in-process llama.cpp engine for `dspy.LM(..., engine=...)`.

DSPy 3.4 runs custom models as engine objects: `complete(request)` takes one
`dspy.lm15.Request` and returns one `dspy.lm15.Response`; DSPy keeps the
cache, retries, history and callbacks. The engine declares that it honours a
response schema, so `dspy.JSONAdapter` sends the output fields' JSON schema
and llama.cpp decodes under a grammar built from it: even a tiny model then
always returns JSON that parses.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dspy import lm15
from dspy.clients.engines.base import validate_request

from reveriemem.core import settings

logger = logging.getLogger(__name__)

PROVIDER = "llamacpp"
DEFAULT_MAX_TOKENS = 1024


class LlamaCppEngine:
    """Runs one GGUF file with llama-cpp-python; the model loads on first use."""

    supports_response_schema = True
    supports_function_calling = False
    supports_reasoning = False
    serial_calls = True  # one loaded model answers one call at a time (see reveriemem.models.concurrency)
    supported_params = frozenset(
        {"temperature", "max_tokens", "top_p", "top_k", "stop", "seed",
         "frequency_penalty", "presence_penalty", "response_format"}
    )

    def __init__(
        self,
        model_path: str | Path,
        *,
        model_id: str | None = None,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        extra_buffers: bool | None = None,
    ) -> None:
        self.model_path = Path(model_path)
        self.model_id = model_id or self.model_path.stem
        self.n_ctx = n_ctx
        self.n_threads = n_threads or settings.lm_threads() or os.cpu_count() or 1
        # llama.cpp's extra CPU buffer types (AMX, repacked weights). With them,
        # llama-cpp-python 0.3.36 crashed (SIGSEGV in ggml_backend_amx_mul_mat)
        # on the project's AMX-capable machines, so they are off where the CPU has AMX.
        self.extra_buffers = (not _cpu_has_amx()) if extra_buffers is None else extra_buffers
        self.load_seconds: float | None = None
        self._llama: Any = None
        self._lock = threading.RLock()  # a Llama object is not thread-safe

    def __repr__(self) -> str:
        return f"LlamaCppEngine({str(self.model_path)!r}, n_ctx={self.n_ctx}, loaded={self.loaded})"

    # -- engine protocol -------------------------------------------------

    def complete(self, request: lm15.Request) -> lm15.Response:
        validate_request(request)
        messages = _chat_messages(request)
        options = _generation_options(request.config)
        with self._lock:
            llama = self._load()
            try:
                out = llama.create_chat_completion(messages=messages, **options)
            except ValueError as exc:
                if "context window" in str(exc):
                    raise lm15.ContextLengthError(str(exc), provider=PROVIDER) from exc
                raise
        choice = out["choices"][0]
        text = choice["message"].get("content") or ""
        usage = out.get("usage") or {}
        return lm15.Response(
            id=out.get("id") or None,
            model=self.model_id,
            message=lm15.Message.assistant([lm15.TextPart(text)]),
            finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
            usage=lm15.Usage(
                input_tokens=usage.get("prompt_tokens"),
                output_tokens=usage.get("completion_tokens"),
            ),
        )

    def stream(self, request: lm15.Request) -> Iterator[Any]:
        """Not incremental: the whole answer is produced, then replayed as events."""
        return lm15.response_to_events(self.complete(request))

    def close(self) -> None:
        with self._lock:
            llama, self._llama = self._llama, None
        if llama is not None and callable(getattr(llama, "close", None)):
            llama.close()

    # -- internals ---------------------------------------------------------

    @property
    def loaded(self) -> bool:
        return self._llama is not None

    def load(self) -> None:
        """Load the model now rather than on the first call."""
        with self._lock:
            self._load()

    def _load(self) -> Any:
        if self._llama is not None:
            return self._llama
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise lm15.ConfigurationError(
                "llama-cpp-python is not installed; install it to run local GGUF models", provider=PROVIDER
            ) from exc
        if not self.model_path.is_file():
            raise lm15.ConfigurationError(f"the model file {self.model_path} does not exist", provider=PROVIDER)
        started = time.perf_counter()
        try:
            with _model_params(extra_buffers=self.extra_buffers):
                self._llama = Llama(
                    model_path=str(self.model_path), n_ctx=self.n_ctx, n_threads=self.n_threads, verbose=False
                )
        except (ValueError, RuntimeError, OSError) as exc:
            raise lm15.ConfigurationError(
                f"llama.cpp could not load {self.model_path}: {exc}", provider=PROVIDER
            ) from exc
        self.load_seconds = time.perf_counter() - started
        logger.info("Loaded %s in %.1f s", self.model_path.name, self.load_seconds)
        return self._llama


_PARAMS_LOCK = threading.Lock()


@contextmanager
def _model_params(*, extra_buffers: bool) -> Iterator[None]:
    """Set model parameters that `llama_cpp.Llama()` does not take as arguments.

    `Llama.__init__` starts from `llama_model_default_params()`; the function
    is wrapped for the duration of one construction.
    """
    if extra_buffers:
        yield
        return
    from llama_cpp import llama as llama_module

    bindings = llama_module.llama_cpp
    with _PARAMS_LOCK:
        original = bindings.llama_model_default_params

        def without_extra_buffers() -> Any:
            params = original()
            params.use_extra_bufts = False
            return params

        bindings.llama_model_default_params = without_extra_buffers
        try:
            yield
        finally:
            bindings.llama_model_default_params = original


def _cpu_has_amx() -> bool:
    try:
        return " amx_tile" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


class AsyncEngine:
    """The async counterpart DSPy asks for (`async_engine=`): runs a sync engine in a worker thread."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    async def complete(self, request: lm15.Request) -> lm15.Response:
        return await asyncio.to_thread(self.engine.complete, request)

    async def stream(self, request: lm15.Request) -> AsyncIterator[Any]:
        response = await self.complete(request)
        for event in lm15.response_to_events(response):
            yield event

    async def aclose(self) -> None:
        pass  # the sync engine owns the resources; ModelHandle.close() releases them


def _text(parts: Any) -> str:
    if parts is None:
        return ""
    if isinstance(parts, str):
        return parts
    texts = []
    for part in parts:
        if not isinstance(part, lm15.TextPart):
            raise lm15.UnsupportedFeatureError(
                f"the llama.cpp engine takes text only, not {type(part).__name__}", feature="messages"
            )
        texts.append(part.text)
    return "".join(texts)


_ROLES = {"user": "user", "assistant": "assistant", "developer": "system"}


def _chat_messages(request: lm15.Request) -> list[dict[str, str]]:
    if request.tools:
        raise lm15.UnsupportedFeatureError("the llama.cpp engine does not call tools", feature="tools")
    messages = []
    if request.system is not None:
        messages.append({"role": "system", "content": _text(request.system)})
    for message in request.messages:
        role = _ROLES.get(message.role)
        if role is None:
            raise lm15.UnsupportedFeatureError(
                f"the llama.cpp engine does not take {message.role!r} messages", feature="messages"
            )
        messages.append({"role": role, "content": _text(message.parts)})
    return messages


def _generation_options(config: lm15.Config) -> dict[str, Any]:
    options: dict[str, Any] = {
        "max_tokens": config.max_tokens or DEFAULT_MAX_TOKENS,
        "temperature": 0.0 if config.temperature is None else config.temperature,
    }
    for name in ("top_p", "top_k", "seed", "frequency_penalty", "presence_penalty"):
        value = getattr(config, name)
        if value is not None:
            options[name] = value
    if config.stop:
        options["stop"] = list(config.stop)
    response_format = _response_format(config.response_format)
    if response_format is not None:
        options["response_format"] = response_format
    return options


def _response_format(requested: dict[str, Any] | None) -> dict[str, Any] | None:
    """DSPy's OpenAI-style response format, as llama-cpp-python takes it."""
    if not requested:
        return None
    kind = requested.get("type")
    schema = requested.get("schema")
    if schema is None and isinstance(requested.get("json_schema"), dict):
        schema = requested["json_schema"].get("schema")
    if kind not in ("json_schema", "json_object"):
        return None
    return {"type": "json_object", "schema": schema} if schema else {"type": "json_object"}
