"""The language-model backend: open a model by name, run DSPy programs on it.

    handle = open_model()              # REVERIEMEM_LM, default "bundled"
    pred = run_program(handle, dspy.Predict(MySignature), passage=...)
    handle.usage.summary()             # calls, tokens, latency: asset metadata

Model strings: "bundled" (SmolLM2-135M in-process), "gguf:/path.gguf",
"none" (no model; callers fall back to deterministic code), "fake" (tests),
or any LiteLLM model string ("openai/gpt-4o-mini", "ollama_chat/llama3.1").
No module here calls `dspy.configure`; programs run inside `dspy.context`.
"""

from reveriemem.models.fake import FakeCall, FakeHandler, FakeModel
from reveriemem.models.handle import ModelHandle
from reveriemem.models.llama_engine import LlamaCppEngine
from reveriemem.models.naming import signature_label
from reveriemem.models.opening import (
    API_BASE_ENV,
    ModelSpec,
    bundled_model_path,
    open_model,
    resolve_spec,
    use_cache_dir,
)
from reveriemem.models.running import run_program
from reveriemem.models.usage import ModelCall, UsageRecorder

__all__ = [
    "API_BASE_ENV",
    "FakeCall",
    "FakeHandler",
    "FakeModel",
    "LlamaCppEngine",
    "ModelCall",
    "ModelHandle",
    "ModelSpec",
    "UsageRecorder",
    "bundled_model_path",
    "open_model",
    "resolve_spec",
    "run_program",
    "signature_label",
    "use_cache_dir",
]
