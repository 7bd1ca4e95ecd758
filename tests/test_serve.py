"""`reveriemem serve` with real clients on loopback: the official `openai` client, concurrent
conversations, a client that leaves mid-stream, and the errors, over the demo built offline."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import httpx
import openai
import pytest
import uvicorn
from click.testing import CliRunner

from reveriemem.core.demo import DEMO_SLUG, demo_gold
from reveriemem.core.export import layer_rows
from reveriemem.core.storage import MemoryStore
from reveriemem.serving import ServeConfig, create_app
from reveriemem_dagster.cli import main
from tests.servers import free_port

QUESTION = "Mara, from which cask did you fill the Horn Lamp on the fourteenth?"


@contextmanager
def serving(config: ServeConfig | None = None) -> Iterator[str]:
    """uvicorn serving the app on a free loopback port in a thread; yields the API's base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(config), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def client(base: str, key: str = "none") -> openai.OpenAI:
    return openai.OpenAI(base_url=base, api_key=key, max_retries=0, timeout=120)


def model_of(name: str) -> str:
    return f"{DEMO_SLUG}/{name}"


def hidden_facts(slug: str) -> tuple[set[str], list[str]]:
    """The ids of the facts `slug` may not know, and those of their texts no visible fact shares."""
    rows = layer_rows(MemoryStore.for_home(), DEMO_SLUG, "facts").to_dicts()
    visible_texts = {r["text"] for r in rows if slug in (r["visibility"] or [])}
    hidden = [r for r in rows if slug not in (r["visibility"] or [])]
    return ({str(r["fact_id"]) for r in hidden},
            [r["text"] for r in hidden if r["text"] and len(r["text"]) > 20 and r["text"] not in visible_texts])


def test_openai_client_lists_the_characters_and_answers_plain_and_streaming(built_demo):
    with serving() as base:
        api = client(base)
        ids = {m.id for m in api.models.list().data}
        assert model_of("mara-quell") in ids and len(ids) == 6
        reply = api.chat.completions.create(model=model_of("Mara"), messages=[
            {"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": QUESTION}])
        text = reply.choices[0].message.content or ""
        assert "nearest the door" in text
        extension = reply.model_extra["reveriemem"]
        facts = extension["trace"]["facts"]
        assert facts and all("mara-quell" in f["visibility"] for f in facts)
        assert all(f["route"] and f["source_start"] is not None for f in facts)
        assert extension["trace"]["anchored"] and not extension["continued"]

        chunks = list(api.chat.completions.create(model=model_of("mara-quell"), stream=True,
                                                  messages=[{"role": "user", "content": QUESTION}]))
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert streamed == text and len(chunks) > 2
        assert chunks[-1].choices[0].finish_reason == "stop"
        assert chunks[-1].model_extra["reveriemem"]["trace"]["facts"] == facts

        bounded = api.chat.completions.create(model=model_of("tobin-reddick"), extra_body={"as_of": {"scene": 2}},
                                              messages=[{"role": "user", "content": "What did Osric confess?"}])
        trace = bounded.model_extra["reveriemem"]["trace"]
        assert trace["as_of"] is not None
        assert all(f["source_start"] <= trace["as_of"] for f in trace["facts"])


def _conversation(base: str, item: dict[str, Any]) -> tuple[str, list[dict[str, Any]], list[str], list[bool]]:
    """Two turns with one character: its question, then a follow-up that carries the history."""
    api = client(base)
    model = model_of(item["character"].split()[0])
    messages: list[dict[str, Any]] = [{"role": "user", "content": item["question"]}]
    traces, replies, continued = [], [], []
    for follow_up in ("And who else was there?", None):
        answer = api.chat.completions.create(model=model, messages=messages)
        extension = answer.model_extra["reveriemem"]
        traces.append(extension["trace"])
        replies.append(answer.choices[0].message.content or "")
        continued.append(extension["continued"])
        if follow_up:
            messages += [{"role": "assistant", "content": replies[-1]}, {"role": "user", "content": follow_up}]
    return traces[0]["character"], traces, replies, continued


def test_twenty_concurrent_conversations_each_stay_inside_their_characters_boundary(built_demo):
    items = demo_gold()["items"]
    by_character: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        by_character.setdefault(item["character"], []).append(item)
    picked: list[dict[str, Any]] = []  # interleaved, so neighbouring conversations speak with different characters
    while len(picked) < 20:
        for queue in by_character.values():
            if queue and len(picked) < 20:
                picked.append(queue.pop(0))
    with serving() as base, ThreadPoolExecutor(max_workers=20) as pool:
        outcomes = list(pool.map(lambda item: _conversation(base, item), picked))
    assert len({slug for slug, *_ in outcomes}) == 6
    for slug, traces, replies, continued in outcomes:
        hidden_ids, hidden_texts = hidden_facts(slug)
        assert hidden_ids and hidden_texts  # every demo character is kept from some facts
        assert continued == [False, True]  # the second turn found the first turn's emotional state
        for trace, reply in zip(traces, replies):
            assert trace["character"] == slug and trace["dropped_rows"] == 0
            assert not {f["fact_id"] for f in trace["facts"]} & hidden_ids, slug
            assert all(slug in f["visibility"] for f in trace["facts"])
            assert not [text for text in hidden_texts if text in reply], (slug, reply)


def _stream_lines(base: str, model: str, question: str) -> list[str]:
    body = {"model": model, "stream": True, "messages": [{"role": "user", "content": question}]}
    with httpx.stream("POST", f"{base}/chat/completions", json=body, timeout=120) as response:
        assert response.status_code == 200
        return [line for line in response.iter_lines() if line.startswith("data: ")]


def test_a_client_leaving_mid_stream_does_not_disturb_the_others(built_demo):
    others = [("mara-quell", QUESTION), ("tobin-reddick", "What did you see at the quay?"),
              ("elspeth-vane", "What do you keep in the ledger?"), ("osric-penhallow", "What did you confess?")]
    with serving() as base:
        expected = {name: _stream_lines(base, model_of(name), question) for name, question in others}
        body = {"model": model_of("ansel-harrow"), "stream": True,
                "messages": [{"role": "user", "content": "Tell me everything about the Horn Lamp."}]}
        with ThreadPoolExecutor(max_workers=len(others)) as pool:
            running = [pool.submit(_stream_lines, base, model_of(n), q) for n, q in others for _ in range(2)]
            with httpx.stream("POST", f"{base}/chat/completions", json=body, timeout=120) as leaving:
                first = next(leaving.iter_lines())
                assert first.startswith("data: ")
            # the connection is closed after one event: the server must drop it and carry on
            results = [future.result() for future in running]
        for (name, _), lines in zip([o for o in others for _ in range(2)], results):
            assert lines[-1] == "data: [DONE]"
            assert _content(lines) == _content(expected[name])
        assert client(base).chat.completions.create(model=model_of("ansel-harrow"), messages=[
            {"role": "user", "content": "Tell me everything about the Horn Lamp."}]).choices[0].message.content


def _content(lines: list[str]) -> str:
    import json

    chunks = [json.loads(line[6:]) for line in lines if line != "data: [DONE]"]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)


@pytest.mark.parametrize(("body", "status", "code"), [
    ({"model": f"{DEMO_SLUG}/nobody", "messages": [{"role": "user", "content": "hi"}]}, 404, "model_not_found"),
    ({"model": "no-such-book/mara", "messages": [{"role": "user", "content": "hi"}]}, 404, "model_not_found"),
    ({"model": f"{DEMO_SLUG}/mara", "messages": []}, 400, "empty_messages"),
    ({"model": f"{DEMO_SLUG}/mara", "messages": [{"role": "user", "content": "   "}]}, 400, "empty_messages"),
    ({"model": f"{DEMO_SLUG}/mara", "messages": [{"role": "user", "content": "why " * 2000}]}, 400,
     "message_too_long"),
    ({"model": f"{DEMO_SLUG}/mara", "messages": [{"role": "user", "content": "hi"}], "as_of": {"scene": 99}}, 400,
     "invalid_as_of"),
    ({"model": f"{DEMO_SLUG}/mara", "messages": [{"role": "user", "content": "hi"}], "as_of": "yesterday"}, 400,
     "invalid_as_of"),
])
def test_bad_requests_get_one_sentence_in_openais_error_shape(built_demo, body, status, code):
    with serving() as base:
        response = httpx.post(f"{base}/chat/completions", json=body, timeout=60)
        assert response.status_code == status
        error = response.json()["error"]
        assert error["code"] == code and error["type"] == "invalid_request_error"
        assert error["message"].endswith(".") and "Traceback" not in error["message"]
        if code == "model_not_found":
            with pytest.raises(openai.NotFoundError):
                client(base).chat.completions.create(model=body["model"], messages=body["messages"])


def test_an_api_key_is_asked_for_and_required_beyond_loopback(built_demo, monkeypatch):
    with serving(ServeConfig(api_key="s3cret")) as base:
        with pytest.raises(openai.AuthenticationError):
            client(base, key="wrong").models.list()
        assert client(base, key="s3cret").models.list().data
    monkeypatch.delenv("REVERIEMEM_API_KEY", raising=False)
    result = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0", "--port", str(free_port())])
    assert result.exit_code == 1 and "REVERIEMEM_API_KEY" in result.output


@pytest.mark.parametrize("port", ["70000", "0", "-1"])
def test_a_port_outside_1_to_65535_is_refused_by_the_option(port):
    result = CliRunner().invoke(main, ["serve", "--port", port])
    assert result.exit_code == 2 and "--port" in result.output and "Serving" not in result.output


def test_a_port_in_use_is_one_sentence_before_anything_is_announced(built_demo):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(main, ["serve", "--port", str(port)])
    assert result.exit_code == 1 and "Serving" not in result.output
    assert result.output.strip() == f"Error: Port {port} on 127.0.0.1 is already in use; choose another with --port."
