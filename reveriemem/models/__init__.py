"""The language-model layer: open a model by its string, run DSPy programs on it.

    handle = open_model()              # REVERIEMEM_LM, default "none" (the offline rules)
    pred = run_program(handle, dspy.Predict(MySignature), passage=...)
    handle.usage.summary()             # calls, cached calls, tokens, latency: asset metadata

Model strings open through a registry of backends (`backends.py`); a step
runs with retries and the one persistent model cache (`steps.py`,
`cache.py`), or falls back to its deterministic twin (`run_or_fallback`).
No module here calls `dspy.configure`; programs run inside `dspy.context`.
This package only re-exports the public surface: its submodules import each
other directly, never the package.
"""

from reveriemem.models.backends import (
    Backend,
    ModelSpec,
    open_model,
    register_backend,
    register_fake,
    resolve_spec,
    unregister_backend,
    unregister_fake,
)
from reveriemem.models.concurrency import Answer, map_calls
from reveriemem.models.fake import FakeCall, FakeHandler, FakeModel
from reveriemem.models.handle import ModelHandle
from reveriemem.models.steps import StepOutcome, run_or_fallback, run_program
from reveriemem.models.usage import ModelCall, UsageRecorder, UsageTotals

__all__ = [
    "Answer",
    "Backend",
    "FakeCall",
    "FakeHandler",
    "FakeModel",
    "ModelCall",
    "ModelHandle",
    "ModelSpec",
    "StepOutcome",
    "UsageRecorder",
    "UsageTotals",
    "map_calls",
    "open_model",
    "register_backend",
    "register_fake",
    "resolve_spec",
    "run_or_fallback",
    "run_program",
    "unregister_backend",
    "unregister_fake",
]
