"""The language-model backend: open a model by name, run DSPy programs on it.

    handle = open_model()              # REVERIEMEM_LM, default "bundled"
    pred = run_program(handle, dspy.Predict(MySignature), passage=...)
    handle.usage.summary()             # calls, cached calls, tokens, latency: asset metadata

Model strings: "bundled" (SmolLM2-135M in-process), "gguf:/path.gguf",
"none" (no model; callers fall back to deterministic code), "fake" (tests),
or any LiteLLM model string ("openai/gpt-4o-mini", "ollama_chat/llama3.1").
No module here calls `dspy.configure`; programs run inside `dspy.context`.
Answers are kept in a persistent cache under the data home (`cache.py`), so a
re-run skips model work already done.
"""

from reveriemem.models.cache import ModelCache, cache_key, model_cache
from reveriemem.models.fake import FakeCall, FakeHandler, FakeModel
from reveriemem.models.handle import ModelHandle
from reveriemem.models.llama_engine import LlamaCppEngine
from reveriemem.models.naming import signature_label
from reveriemem.models.opening import (
    API_BASE_ENV,
    ModelSpec,
    bundled_model_path,
    open_model,
    register_fake,
    resolve_spec,
    unregister_fake,
    use_cache_dir,
)
from reveriemem.models.running import run_program
from reveriemem.models.usage import ModelCall, UsageRecorder, UsageTotals

__all__ = [
    "API_BASE_ENV",
    "FakeCall",
    "FakeHandler",
    "FakeModel",
    "LlamaCppEngine",
    "ModelCache",
    "ModelCall",
    "ModelHandle",
    "ModelSpec",
    "UsageRecorder",
    "UsageTotals",
    "bundled_model_path",
    "cache_key",
    "model_cache",
    "open_model",
    "register_fake",
    "resolve_spec",
    "run_program",
    "signature_label",
    "unregister_fake",
    "use_cache_dir",
]
