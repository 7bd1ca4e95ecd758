"""Running one model step: a DSPy program against a model handle.

`run_program` runs it with retries, the persistent model cache and
one-sentence errors; `run_or_fallback` runs it and, when the model is absent
or its output never parses, takes the step's deterministic twin instead and
says which method produced the result.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import dspy
import pydantic
from dspy import lm15
from dspy.utils.exceptions import (
    AdapterParseError,
    LMAuthError,
    LMConfigurationError,
    LMError,
    LMRateLimitError,
    LMUnsupportedModelError,
    is_retryable_lm_error,
)

from reveriemem.core.errors import ModelOutputError, ModelUnavailableError
from reveriemem.models.cache import lookup, store
from reveriemem.models.concurrency import call_slot, rate_limiter
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
_RATE_LIMIT_TRIES = 8  # a refusal for rate is waited out longer than other transient failures
_MAX_BACKOFF_S = 60.0
_RETRY_TEMPERATURE = 0.7  # a deterministic model repeats its bad answer at temperature 0

T = TypeVar("T")


@dataclass(frozen=True)
class StepOutcome(Generic[T]):
    """What one model step produced, and by which method.

    `method` is `model:<handle.name>` when the model's answer was used, else
    the fallback's label (`failed_method` when the model was asked and its
    output never parsed); `error` then says why, in one sentence.
    """

    value: T
    method: str
    error: str | None = None

    @property
    def by_model(self) -> bool:
        return self.error is None and self.method.startswith("model:")


def run_or_fallback(
    handle: ModelHandle,
    step: Callable[[ModelHandle], T],
    fallback: Callable[[], T],
    *,
    fallback_method: str,
    failed_method: str | None = None,
) -> StepOutcome[T]:
    """Run a model step, or its deterministic twin when there is no model or no parsed answer.

    `step(handle)` makes the step's model calls (through `run_program`) and
    turns the predictions into the step's value; `fallback()` computes the
    same kind of value without a model. With no model (`handle.lm is None`)
    only the fallback runs, labelled `fallback_method`. A `ModelOutputError`
    from the step (output that never parsed, or an answer the step rejects)
    gives the fallback's value labelled `failed_method` (default
    `fallback_method`) with the error's sentence. `ModelUnavailableError` and
    every other error propagate: an unreachable model fails the asset.
    """
    if handle.lm is None:
        return StepOutcome(fallback(), fallback_method)
    try:
        return StepOutcome(step(handle), f"model:{handle.name}")
    except ModelOutputError as exc:
        return StepOutcome(fallback(), failed_method or fallback_method, str(exc))


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
    after unparseable output, at temperature 0, samples at a small
    temperature so a deterministic model can answer differently. A rate-limit
    refusal is tried up to `_RATE_LIMIT_TRIES` times, waiting the provider's
    `retry_after` when it gives one, and pauses every caller of the model
    (`reveriemem.models.concurrency.rate_limiter`); each attempt first waits
    for the requests- and tokens-per-minute limits, when set. With `handle.cache`, a prediction already in the persistent
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
        key, cached = lookup(handle, program, inputs)
        if cached is not None:
            handle.usage.record_cache_hit()
            return cached
    tries = max(1, retries)
    lm = handle.lm
    limiter = rate_limiter(handle.name)
    attempt = 0
    while True:
        attempt += 1
        limiter.acquire()
        delay = min(_MAX_BACKOFF_S, backoff * 2 ** (attempt - 1))
        overrides: dict[str, Any] = {"lm": lm}
        if handle.adapter is not None and dspy.settings.adapter is None:
            overrides["adapter"] = handle.adapter
        try:
            with call_slot(handle), dspy.context(**overrides):
                prediction = program(**inputs)
        except _PARSE_ERRORS as exc:
            if attempt >= tries:
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
            limit = max(tries, _RATE_LIMIT_TRIES) if _is_rate_limit(exc) else tries
            if attempt >= limit:
                raise ModelUnavailableError(f"Could not reach the model {handle.name}: {_reason(exc)}") from exc
            logger.warning("Model %s failed transiently (try %d of %d): %s", handle.name, attempt, limit, _reason(exc))
            if _is_rate_limit(exc):
                delay = max(delay, float(getattr(exc, "retry_after", None) or 0.0))
                limiter.pause(delay)
        else:
            if key is not None:
                store(key, handle, program, prediction)
            return prediction
        time.sleep(delay)


def _is_rate_limit(exc: BaseException) -> bool:
    if isinstance(exc, (LMRateLimitError, lm15.RateLimitError)):
        return True
    return any(cls.__name__ == "RateLimitError" and "litellm" in cls.__module__ for cls in type(exc).__mro__)


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
    """A copy of `lm` that samples: at temperature 0 it would repeat its bad answer."""
    changes: dict[str, Any] = {"cache": False}  # as every LM here (handle.build_lm), said again for copies
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
