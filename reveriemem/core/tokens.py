"""Counting tokens the same way for book text and prompts.

Uses the `cl100k_base` BPE (the tokenizer of GPT-3.5/4-class models) from the
copy bundled inside LiteLLM, so no download is needed; if it cannot be loaded,
falls back to one token per four characters. Estimates and the build-cost
benchmark say which counter they used (`COUNTER`).
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache
from pathlib import Path
from typing import Any


@lru_cache(maxsize=1)
def _encoding() -> Any:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    bundled = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    if not bundled.is_dir():
        return None
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))
    try:
        import tiktoken

        return tiktoken.get_encoding("cl100k_base")
    except Exception:  # no tokenizer files: fall back to the character estimate
        return None


def counter_name() -> str:
    return "cl100k_base" if _encoding() is not None else "chars/4"


def count_tokens(text: str) -> int:
    encoding = _encoding()
    if encoding is None:
        return (len(text) + 3) // 4
    return len(encoding.encode(text, disallowed_special=()))
