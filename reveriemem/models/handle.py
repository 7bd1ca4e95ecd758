"""The object every caller of a language model holds, and the one place a `dspy.LM` is built.

Invariant: DSPy's own response cache is off for every model this project
opens (`build_lm`). The project keeps one model cache, the persistent SQLite
cache of `reveriemem.models.cache`, which `run_program` consults for handles
with `cache=True`; it is shared by processes, keyed by the program's state,
and is what lets an interrupted build resume without repeating model calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import dspy

from reveriemem.models.usage import UsageRecorder

DSPY_RESPONSE_CACHE = False  # the one switch for DSPy's cache; see the module doc


def build_lm(model: str, usage: UsageRecorder, **kwargs: Any) -> dspy.LM:
    """A `dspy.LM` for `model` whose calls feed `usage`, with DSPy's response cache off."""
    return dspy.LM(model, cache=DSPY_RESPONSE_CACHE, callbacks=[usage.callback()], **kwargs)


@dataclass(eq=False, repr=False)
class ModelHandle:
    """A language model opened by `open_model`.

    `name` is what a row records as the method that produced it. `lm` is None
    for the "none" model: callers then use their deterministic fallbacks.
    `adapter` is the DSPy adapter this model works best with (JSONAdapter for
    local GGUF models, whose engine constrains output to the JSON schema), or
    None for DSPy's default; `run_program` applies it unless the caller's
    context already chose one. `cache` says whether `run_program` consults
    and fills the persistent model cache (`reveriemem.models.cache`): on for
    models from `open_model` (unless `REVERIEMEM_MODEL_CACHE=0`), opt-in for
    the test fake (`FakeModel(...).handle(cache=True)`).
    """

    name: str
    lm: dspy.LM | None
    usage: UsageRecorder
    is_fake: bool = False
    adapter: dspy.Adapter | None = None
    engine: Any = field(default=None)  # an engine object this handle owns, closed with it
    cache: bool = False  # use the persistent model cache in run_program

    def close(self) -> None:
        """Release the model (a loaded GGUF model's memory, open HTTP pools)."""
        if self.lm is not None:
            self.lm.close()
        if self.engine is not None:
            self.engine.close()

    def __enter__(self) -> ModelHandle:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"ModelHandle(name={self.name!r}, is_fake={self.is_fake}, cache={self.cache}, "
                f"calls={len(self.usage.calls)})")
