"""The engine for OpenAI-compatible servers: the JSON schema is sent, in the form the server takes."""

from __future__ import annotations

import json
from typing import Any

import dspy
import httpx
import pytest

from reveriemem.models import open_model, run_program
from reveriemem.models.handle import build_lm
from reveriemem.models.llama_engine import AsyncEngine
from reveriemem.models.openai_compatible import OpenAICompatibleEngine
from reveriemem.models.usage import UsageRecorder


class Verdict(dspy.Signature):
    """Say whether the lamp was lit."""

    question: str = dspy.InputField()
    lit: bool = dspy.OutputField()
    reason: str = dspy.OutputField()


def _server(accepts: set[str], seen: list[dict[str, Any]]) -> httpx.MockTransport:
    """A stand-in server that takes only the response formats in `accepts` (by type) and answers JSON."""

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        shape = body.get("response_format") or {}
        kind = shape.get("type", "none") + ("+schema" if "schema" in shape else "")
        if kind not in accepts:
            return httpx.Response(422, json={"detail": f"response_format.type {kind!r} is not supported"})
        text = json.dumps({"lit": True, "reason": "Mara lit it at dusk."})
        return httpx.Response(200, json={"id": "x", "choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                                         "usage": {"prompt_tokens": 10, "completion_tokens": 5}})

    return httpx.MockTransport(handle)


@pytest.mark.parametrize(("accepts", "form"), [
    ({"json_schema"}, "json_schema"),  # vLLM, Ollama, llama-server
    ({"json_object+schema"}, "json_object+schema"),  # llama-cpp-python's server
    ({"json_object"}, "json_object"),
])
def test_the_output_schema_is_sent_in_the_first_form_the_server_takes(accepts, form):
    seen: list[dict[str, Any]] = []
    engine = OpenAICompatibleEngine("http://127.0.0.1:9/v1", "tiny", transport=_server(accepts, seen))
    lm = build_lm("openai/tiny", UsageRecorder("openai/tiny"), engine=engine, async_engine=AsyncEngine(engine))
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        first = dspy.Predict(Verdict)(question="Was the Horn Lamp lit?")
        dspy.Predict(Verdict)(question="Was it lit again?")
    assert first.lit is True and first.reason == "Mara lit it at dusk."
    assert engine.form == form
    sent = seen[0]["response_format"]
    schema = sent.get("schema") or sent.get("json_schema", {}).get("schema")
    assert set(schema["properties"]) == {"lit", "reason"}  # the schema went out with the first try
    assert seen[-1]["response_format"] == seen[-2]["response_format"]  # the accepted form is remembered
    assert len(seen) == (1 if form == "json_schema" else 2 if form == "json_object+schema" else 3) + 1


def test_openai_model_at_an_api_base_opens_the_schema_engine(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    handle = open_model("openai/Qwen/Qwen2.5-7B-Instruct", api_base="http://127.0.0.1:8000/v1", model_cache=False)
    assert isinstance(handle.engine, OpenAICompatibleEngine)
    assert handle.engine.model_id == "Qwen/Qwen2.5-7B-Instruct"
    assert handle.engine.url == "http://127.0.0.1:8000/v1/chat/completions"
    assert isinstance(handle.adapter, dspy.JSONAdapter)
    handle.close()


def test_an_unreachable_server_is_a_clear_error():
    handle = open_model("openai/tiny", api_base="http://127.0.0.1:9/v1", model_cache=False)
    with pytest.raises(Exception, match="127.0.0.1:9"):
        run_program(handle, dspy.Predict(Verdict), question="Was it lit?")


def test_max_tokens_from_the_environment_caps_every_call(monkeypatch):
    from reveriemem.core.errors import ModelUnavailableError

    monkeypatch.setenv("REVERIEMEM_LM_MAX_TOKENS", "200")
    handle = open_model("openai/tiny", api_base="http://127.0.0.1:9/v1", model_cache=False)
    assert handle.lm is not None and handle.lm.kwargs["max_tokens"] == 200
    monkeypatch.setenv("REVERIEMEM_LM_MAX_TOKENS", "lots")
    with pytest.raises(ModelUnavailableError, match="REVERIEMEM_LM_MAX_TOKENS"):
        open_model("openai/tiny", api_base="http://127.0.0.1:9/v1")
