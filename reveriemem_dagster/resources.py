"""Resources: the language model and the embedding model, each chosen by one string."""

from __future__ import annotations

from typing import Any

import dagster as dg
from pydantic import PrivateAttr

from reveriemem.core.embeddings import Embedder, open_embedder
from reveriemem.models import ModelHandle, open_model


class LanguageModel(dg.ConfigurableResource):
    """Any LiteLLM model string, `gguf:/path`, `bundled` (SmolLM2-135M), `none` or `fake`.

    Empty means the environment variable `REVERIEMEM_LM`, else `bundled`.
    Keys for hosted APIs are read by LiteLLM from the environment only.
    """

    model: str = ""
    api_base: str = ""
    _handle: Any = PrivateAttr(default=None)

    def handle(self) -> ModelHandle:
        if self._handle is None:
            self._handle = open_model(self.model or None, api_base=self.api_base or None)
        return self._handle

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


class EmbeddingModel(dg.ConfigurableResource):
    """`all-MiniLM-L6-v2` (default, offline from its PyPI package), `hash`, `hash:DIM`, or a sentence-transformers name.

    The stored vectors take this embedder's dimension, and the book's build manifest records its name.
    """

    model: str = ""
    _embedder: Any = PrivateAttr(default=None)

    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = open_embedder(self.model or None)
        return self._embedder
