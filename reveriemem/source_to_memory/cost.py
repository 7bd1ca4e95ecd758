"""Dollars and wall time of a build, from an `Estimate`'s calls and tokens.

Prices come from LiteLLM's own price table (`litellm.get_model_info`, read
from the copy installed with LiteLLM, never fetched): a model it does not
price gets no dollar figure, and a local model (none, bundled, gguf, a fake)
costs nothing. Wall time assumes the calls run `concurrency` at a time
(`REVERIEMEM_MAX_CONCURRENCY`, default 8; a local model runs one call at a
time) and take `latency` seconds each (a stated assumption: 2 s for a hosted
model, 3 s for the bundled SmolLM2 on 2 cores), plus the offline work the
dry run measured.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from reveriemem.source_to_memory.estimate import Estimate

CONCURRENCY_ENV = "REVERIEMEM_MAX_CONCURRENCY"
DEFAULT_CONCURRENCY = 8
REMOTE_LATENCY_S = 2.0
LOCAL_LATENCY_S = 3.0  # the bundled SmolLM2-135M: a few calls per 10 s on 2 cores
LOCAL_KINDS = ("none", "fake", "bundled", "gguf")


@dataclass(frozen=True)
class Cost:
    model: str
    dollars: float | None  # None: the price is not known
    input_price: float | None  # dollars per million prompt tokens
    output_price: float | None
    concurrency: int
    latency: float  # assumed seconds per call
    seconds: float  # expected wall time of the build

    def lines(self, estimate: Estimate) -> list[str]:
        if self.dollars is None:
            price = (f"no price for {self.model} in LiteLLM's price table, so no dollar figure "
                     f"({estimate.prompt_tokens:,} prompt + {estimate.completion_tokens:,} completion tokens)")
        elif self.input_price is None:
            price = f"$0.00 ({self.model} runs locally)"
        else:
            price = (f"${self.dollars:,.2f} ({estimate.prompt_tokens:,} prompt tokens at ${self.input_price:g}/M + "
                     f"{estimate.completion_tokens:,} completion tokens at ${self.output_price:g}/M, LiteLLM's prices)")
        return [f"Expected cost: {price}.",
                f"Expected wall time: {_duration(self.seconds)} ({estimate.calls:,} calls, {self.concurrency} at a "
                f"time, {self.latency:g} s per call assumed, plus {estimate.seconds:.0f} s of offline work; "
                f"${CONCURRENCY_ENV} and --latency change this)."]


def concurrency(kind: str) -> int:
    """Calls in flight at once: `REVERIEMEM_MAX_CONCURRENCY` (default 8) for a hosted model, 1 for a local one."""
    if kind in LOCAL_KINDS:
        return 1
    raw = os.environ.get(CONCURRENCY_ENV, "").strip()
    try:
        return max(1, int(raw)) if raw else DEFAULT_CONCURRENCY
    except ValueError:
        return DEFAULT_CONCURRENCY


def prices(model: str) -> tuple[float, float] | None:
    """Dollars per prompt token and per completion token from LiteLLM's installed price table, or None."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the table over the network
    import litellm

    try:
        info = litellm.get_model_info(model)
    except Exception:  # LiteLLM raises a plain Exception for a model it does not map
        return None
    prompt, completion = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if prompt is None or completion is None:
        return None
    return float(prompt), float(completion)


def build_cost(estimate: Estimate, model: str, kind: str, latency: float | None = None) -> Cost:
    """What a build of `estimate` would cost with `model` (of backend `kind`), in dollars and wall time."""
    parallel = concurrency(kind)
    per_call = latency if latency is not None else (LOCAL_LATENCY_S if kind in LOCAL_KINDS else REMOTE_LATENCY_S)
    if kind == "none":
        per_call = 0.0
    seconds = estimate.seconds + estimate.calls * per_call / parallel
    if kind in LOCAL_KINDS:
        return Cost(model, 0.0, None, None, parallel, per_call, seconds)
    found = prices(model)
    if found is None:
        return Cost(model, None, None, None, parallel, per_call, seconds)
    prompt, completion = found
    dollars = estimate.prompt_tokens * prompt + estimate.completion_tokens * completion
    return Cost(model, dollars, prompt * 1e6, completion * 1e6, parallel, per_call, seconds)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
