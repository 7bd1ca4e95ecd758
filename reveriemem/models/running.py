"""Running a DSPy program against a model handle, with retries and clear errors."""

from __future__ import annotations

import json
import logging
import os
import re
import time
from typing import Any

import dspy
import pydantic
from dspy import lm15
from dspy.utils.exceptions import (
    AdapterParseError,
    LMAuthError,
    LMConfigurationError,
    LMError,
    LMUnsupportedModelError,
    is_retryable_lm_error,
)

from reveriemem.core.errors import ModelOutputError, ModelUnavailableError
from reveriemem.models import cache as model_cache
from reveriemem.models.handle import ModelHandle
from reveriemem.models.naming import signature_label

logger = logging.getLogger(__name__)

# LiteLLM's transient exceptions, by class name so LiteLLM is not imported here.
# DSPy normally translates them to its own LM errors; these cover any that slip through.
_TRANSIENT_NAMES = frozenset(
    {"RateLimitError", "APIConnectionError", "Timeout", "APITimeoutError", "ServiceUnavailableError",
     "InternalServerError", "BadGatewayError"}
)
_TRANSIENT_LM15 = (lm15.RateLimitError, lm15.TimeoutError, lm15.ServerError, lm15.TransportError)
# Errors that say the model cannot be used at all: no point in trying again.
_UNUSABLE = (LMAuthError, LMConfigurationError, LMUnsupportedModelError)
_PARSE_ERRORS = (AdapterParseError, pydantic.ValidationError, json.JSONDecodeError)
_RETRY_TEMPERATURE = 0.7  # a deterministic model repeats its bad answer at temperature 0


def run_program(
    handle: ModelHandle,
    program: dspy.Module,
    *,
    retries: int = 3,
    backoff: float = 0.5,
    **inputs: Any,
) -> dspy.Prediction:
    """Run `program(**inputs)` with the handle's model, inside `dspy.context`.

    The program is tried at most `retries` times in all. A transient failure
    (rate limit, timeout, refused connection, server error) or output the
    adapter cannot parse is tried again after `backoff * 2**n` seconds; a retry
    after unparseable output bypasses DSPy's cache and, at temperature 0,
    samples at a small temperature so a deterministic model can answer
    differently. With `handle.cache`, a prediction already in the persistent
    model cache (same model, program and inputs) is returned without calling
    the model and counted as a cache hit; a parsed prediction is stored
    there (failures never are). Raises ModelOutputError when the output never
    parses and ModelUnavailableError when the model cannot be reached or
    refuses the request; both say which model, in one sentence without secrets.
    """
    if handle.lm is None:
        raise ModelUnavailableError(
            f"No language model is configured (the model is {handle.name!r}); set REVERIEMEM_LM to use one."
        )
    key: str | None = None
    if handle.cache:
        key, cached = model_cache.lookup(handle, program, inputs)
        if cached is not None:
            handle.usage.record_cache_hit()
            return cached
    tries = max(1, retries)
    lm = handle.lm
    for attempt in range(1, tries + 1):
        overrides: dict[str, Any] = {"lm": lm}
        if handle.adapter is not None and dspy.settings.adapter is None:
            overrides["adapter"] = handle.adapter
        try:
            with dspy.context(**overrides):
                prediction = program(**inputs)
        except _PARSE_ERRORS as exc:
            if attempt == tries:
                raise ModelOutputError(
                    f"The model {handle.name} returned output that could not be parsed as "
                    f"{_label(program, exc)} after {tries} tries: {_reason(exc)}"
                ) from exc
            logger.warning("Model %s gave unparseable output (try %d of %d); retrying", handle.name, attempt, tries)
            lm = _fresh_sample(handle.lm)
        except Exception as exc:
            if not _is_transient(exc):
                if isinstance(exc, LMError):
                    raise _unavailable(handle.name, exc) from exc
                raise
            if attempt == tries:
                raise ModelUnavailableError(f"Could not reach the model {handle.name}: {_reason(exc)}") from exc
            logger.warning("Model %s failed transiently (try %d of %d): %s", handle.name, attempt, tries, _reason(exc))
        else:
            if key is not None:
                model_cache.store(key, handle, program, prediction)
            return prediction
        time.sleep(backoff * 2 ** (attempt - 1))
    raise AssertionError("unreachable")  # pragma: no cover


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, LMError):
        return is_retryable_lm_error(exc)
    if isinstance(exc, _TRANSIENT_LM15):
        return True
    return any(cls.__name__ in _TRANSIENT_NAMES and "litellm" in cls.__module__ for cls in type(exc).__mro__)


def _unavailable(name: str, exc: LMError) -> ModelUnavailableError:
    if isinstance(exc, _UNUSABLE):
        return ModelUnavailableError(f"Could not reach the model {name}: {_reason(exc)}")
    return ModelUnavailableError(f"The model {name} refused the request: {_reason(exc)}")


def _fresh_sample(lm: dspy.LM) -> dspy.LM:
    """A copy of `lm` whose next answer is neither served from nor kept in DSPy's cache.

    (A fixed rollout id would replay the bad answers a previous run cached, so
    a re-run of a failed scene could never succeed.)
    """
    changes: dict[str, Any] = {"cache": False}
    if lm.kwargs.get("temperature") == 0:
        changes["temperature"] = _RETRY_TEMPERATURE
    return lm.copy(**changes)


def _label(program: Any, exc: BaseException) -> str:
    signature = getattr(exc, "signature", None) or getattr(program, "signature", None)
    if isinstance(signature, type) and issubclass(signature, dspy.Signature):
        return signature_label(signature)
    return type(program).__name__


_MODEL_PREFIX = re.compile(r"^\[[^\]]*\]\s*")
_URL_USERINFO = re.compile(r"(\w+://)[^/@\s]+@")


def _reason(exc: BaseException, limit: int = 200) -> str:
    """The first line of an error message, shortened and without secrets."""
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    line = next((part.strip() for part in str(text).splitlines() if part.strip()), type(exc).__name__)
    line = _MODEL_PREFIX.sub("", line)
    line = _URL_USERINFO.sub(r"\1***@", line)
    for value in _secret_values():
        line = line.replace(value, "***")
    if len(line) > limit:
        line = line[: limit - 3].rstrip() + "..."
    return line.rstrip(".")


def _secret_values() -> list[str]:
    names = ("KEY", "TOKEN", "SECRET", "PASSWORD")
    return [
        value for name, value in os.environ.items()
        if len(value) >= 8 and any(part in name.upper() for part in names)
    ]
