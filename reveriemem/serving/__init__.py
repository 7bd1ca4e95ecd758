"""Serving characters over HTTP: an OpenAI-compatible API (`reveriemem serve`).

`create_app(ServeConfig(...))` is the ASGI app (`reveriemem.serving.openai_api`); the sessions it keeps
warm and each conversation's emotional state live in `reveriemem.serving.sessions`.
"""

from __future__ import annotations

from reveriemem.serving.openai_api import ServeConfig, create_app

__all__ = ["ServeConfig", "create_app"]
