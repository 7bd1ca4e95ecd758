"""An engine for `dspy.LM(..., engine=...)` that talks to an OpenAI-compatible server (Ollama, vLLM,
llama.cpp's servers, LM Studio) at `api_base`, sending the output fields' JSON schema.

Through LiteLLM, DSPy sends a schema only for models its metadata knows: for a local model it sent
none and a small model's output then failed to parse. This engine declares that it honours a
response schema, so `dspy.JSONAdapter` builds one, and sends it in the first form the server
accepts, remembered for the engine's life: OpenAI's `json_schema` (vLLM, Ollama, llama-server),
then `json_object` with a `schema` (llama-cpp-python's server), then plain JSON mode, then none. A
refused form is one the server answers with a client or server error naming the response format.
What still fails to parse is left to the adapter's repair of near-JSON and `run_program`'s retries.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
from dspy import lm15
from dspy.clients.engines.base import validate_request

from reveriemem.models.llama_engine import LlamaCppEngine, _chat_messages, _generation_options

PROVIDER = "openai-compatible"
CONNECT_TIMEOUT_S = 10.0
SCHEMA_FORMS = ("json_schema", "json_object+schema", "json_object", "none")


def response_format(form: str, schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """The `response_format` of one form (None: send none)."""
    if form == "json_schema" and schema:
        return {"type": "json_schema", "json_schema": {"name": "output", "schema": schema, "strict": False}}
    if form == "json_object+schema" and schema:
        return {"type": "json_object", "schema": schema}
    if form in ("json_object", "json_schema", "json_object+schema"):
        return {"type": "json_object"}
    return None


def _refuses_format(response: httpx.Response) -> bool:
    if response.status_code < 400 or response.status_code in (401, 403, 404, 429):
        return False
    text = response.text.lower()
    return "response_format" in text or "json_schema" in text or "json_object" in text


class OpenAICompatibleEngine:
    """POSTs chat completions to `{api_base}/chat/completions` with the JSON schema DSPy's adapter asks for."""

    # what DSPy asks of an engine: the same as the in-process llama.cpp engine's
    supports_response_schema = LlamaCppEngine.supports_response_schema
    supports_function_calling = LlamaCppEngine.supports_function_calling
    supports_reasoning = LlamaCppEngine.supports_reasoning
    supported_params = LlamaCppEngine.supported_params

    def __init__(self, api_base: str, model_id: str, *, api_key: str | None = None, timeout: float = 120.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.url = api_base.rstrip("/") + "/chat/completions"
        self.model_id = model_id
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(headers=headers, timeout=httpx.Timeout(timeout, connect=CONNECT_TIMEOUT_S),
                                    transport=transport)  # a transport of one's own: tests
        self.form = SCHEMA_FORMS[0]  # the form the server accepted last
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAICompatibleEngine({self.url!r}, model={self.model_id!r}, form={self.form!r})"

    def complete(self, request: lm15.Request) -> lm15.Response:
        validate_request(request)
        options = _generation_options(request.config)
        wanted = options.pop("response_format", None)
        schema = wanted.get("schema") if isinstance(wanted, dict) else None
        payload: dict[str, Any] = {"model": self.model_id, "messages": _chat_messages(request), **options}
        forms = SCHEMA_FORMS[SCHEMA_FORMS.index(self.form):] if wanted else ("none",)
        for form in forms:
            shaped = response_format(form, schema)
            body = {**payload, "response_format": shaped} if shaped else payload
            response = self._post(body)
            if _refuses_format(response) and form != "none":
                continue
            if wanted:
                with self._lock:
                    self.form = form
            return self._read(response)
        raise lm15.ServerError(f"{self.url} refused every response format", provider=PROVIDER)  # pragma: no cover

    def _post(self, body: dict[str, Any]) -> httpx.Response:
        try:
            return self._client.post(self.url, json=body)
        except httpx.TimeoutException as exc:
            raise lm15.TimeoutError(f"{self.url} did not answer in time: {exc}", provider=PROVIDER) from exc
        except httpx.HTTPError as exc:
            raise lm15.TransportError(f"could not reach {self.url}: {exc}", provider=PROVIDER) from exc

    def _read(self, response: httpx.Response) -> lm15.Response:
        if response.status_code >= 400:
            detail = response.text[:300]
            if "context" in detail.lower() and "length" in detail.lower():
                raise lm15.ContextLengthError(detail, provider=PROVIDER)
            raise lm15.ServerError(f"{self.url} answered {response.status_code}: {detail}", provider=PROVIDER)
        out = response.json()
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return lm15.Response(
            id=out.get("id") or None,
            model=self.model_id,
            message=lm15.Message.assistant([lm15.TextPart(choice["message"].get("content") or "")]),
            finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
            usage=lm15.Usage(input_tokens=usage.get("prompt_tokens"), output_tokens=usage.get("completion_tokens")),
        )

    def stream(self, request: lm15.Request) -> Iterator[Any]:
        """Not incremental: the whole answer is fetched, then replayed as events."""
        return lm15.response_to_events(self.complete(request))

    def close(self) -> None:
        self._client.close()
