"""Compiling the agent's prompts (eval/compile.py) with a scripted model on the demo story, and how the
agent loads a compiled program (reveriemem.inference.programs.InferencePrograms)."""

from __future__ import annotations

import importlib.util
import json
import logging
import threading
from pathlib import Path
from typing import Any

import dspy
import pytest
from click.testing import CliRunner

from dspy_programs.inference import MemoryFusion, SelectPattern, SelfProbe, memory_fusion_program
from eval.compile import compile_inference, compiled_block, summary_path
from eval.items import KBFItem
from eval.runner import RunSpec, load_items, select_items
from reveriemem.core.demo import DEMO_SLUG
from reveriemem.core.embeddings import HashEmbedder
from reveriemem.core.registry import load_book
from reveriemem.inference import programs as programs_module
from reveriemem.inference.agent import ReverieAgent
from reveriemem.inference.memory_reader import MemoryReader
from reveriemem.inference.programs import COMPILED_ENV, CompiledProgramError, InferencePrograms
from reveriemem.models import FakeModel, register_fake, unregister_fake
from reveriemem.models.cache import cache_key
from reveriemem_dagster.cli import main

_local = threading.local()


class DemoAwareFake(FakeModel):
    """A fake that knows whether the prompt it answers carries demos (messages before the last one)."""

    def complete(self, request: Any) -> Any:
        _local.demos = len(request.messages) > 1
        return super().complete(request)


def _items() -> tuple[list[KBFItem], list[KBFItem], list[KBFItem]]:
    book = load_book(DEMO_SLUG)
    items = load_items(book, RunSpec(book=DEMO_SLUG, out=Path(".")))
    return items, select_items(items, "train", 4), select_items(items, "held-out", 4)


def _fake(items: list[KBFItem], train: list[KBFItem], name: str = "fake") -> DemoAwareFake:
    """Right on the train items always, on other items only when the prompt carries demos."""
    questions = {" ".join(i.question.split()): i for i in items}
    train_ids = {i.id for i in train}

    def handler(signature: Any, inputs: dict[str, Any]) -> dict[str, Any]:
        if signature is SelfProbe:
            return {"refined_question": "what is asked", "probe": "the Horn Lamp", "sufficient": True}
        if signature is SelectPattern:
            return {"choice": 1}
        if signature is MemoryFusion:
            item = next((i for q, i in questions.items() if inputs["question"].startswith(q)), None)
            if item is None:
                return {"reply": "From the cask nearest the door.", "used_facts": []}
            right = item.id in train_ids or getattr(_local, "demos", False)
            letter = item.gold if right else ("A" if item.gold != "A" else "B")
            return {"reply": f"({letter}) {item.options[letter]}", "used_facts": []}
        return {}

    return DemoAwareFake(handler, name=name)


def _agent(name: str = "Mara", **kwargs: Any) -> ReverieAgent:
    book = load_book(DEMO_SLUG)
    character = book.character(name)
    reader = MemoryReader(DEMO_SLUG, character.slug, HashEmbedder())
    return ReverieAgent(reader, kwargs.pop("handle"), character, **kwargs)


def test_compiling_saves_demos_and_the_agent_loads_them(built_demo, tmp_path: Path, monkeypatch) -> None:
    items, train, heldout = _items()
    fake = _fake(items, train)
    out = tmp_path / "compiled" / "inference.json"
    outcome = compile_inference(DEMO_SLUG, fake.handle(), train_items=train, heldout_items=heldout, out=out,
                                embedder="hash", max_demos=2)

    state = json.loads(out.read_text())
    for name in ("self_probe", "select_pattern", "memory_fusion"):
        assert state[name]["demos"], name  # each bootstrapped trace gives every predictor one demo
        assert len(state[name]["demos"]) <= 2
    assert state["reveriemem"]["optimizer"] == "BootstrapFewShot" and state["reveriemem"]["model"] == "fake"
    assert not list(out.parent.glob(".*"))  # no candidate or temporary file is left behind

    block = outcome.block
    assert {"before", "after", "split", "optimizer", "model", "train", "heldout"} <= set(block)
    assert block["split"] == "held-out" and block["optimizer"] == "BootstrapFewShot" and block["model"] == "fake"
    assert block["train"] == 4 and block["heldout"] == 4
    for when in ("before", "after"):
        assert {"krf_acc", "kr_acc", "kbf", "n_krf", "n_kr"} <= set(block[when]["reveriemem"])
    # the fake is right on held-out items only when the prompt carries demos: they reach the loaded program
    assert block["before"]["reveriemem"]["kbf"] == 0.0 and block["after"]["reveriemem"]["kbf"] == 1.0
    assert compiled_block(out) == block == compiled_block(summary_path(out))

    # a new agent loads the file named by REVERIEMEM_COMPILED: its predictors hold the demos
    monkeypatch.setenv(COMPILED_ENV, str(out))
    agent = _agent(handle=fake.handle())
    assert agent.programs.demos == state["reveriemem"]["demos"] and agent.programs.compiled == out
    turn = agent.respond("Which cask did you fill the Horn Lamp from?")
    assert turn.trace.method == "model:fake+compiled:inference.json" and turn.trace.compiled == str(out)
    assert turn.to_dict()["trace"]["compiled"] == str(out)

    # "none" loads nothing; an explicit programs= wins over the variable
    monkeypatch.setenv(COMPILED_ENV, "none")
    assert _agent(handle=fake.handle()).method == "model:fake"
    monkeypatch.setenv(COMPILED_ENV, str(tmp_path / "missing.json"))
    with pytest.raises(CompiledProgramError, match="not a file"):
        _agent(handle=fake.handle())
    assert _agent(handle=fake.handle(), programs=InferencePrograms()).method == "model:fake"

    # by default the agent loads dspy_programs/compiled/inference.json only when it exists
    monkeypatch.delenv(COMPILED_ENV)
    monkeypatch.setattr(programs_module, "DEFAULT_COMPILED", out)
    assert _agent(handle=fake.handle()).method == "model:fake+compiled:inference.json"
    monkeypatch.setattr(programs_module, "DEFAULT_COMPILED", tmp_path / "absent.json")
    assert _agent(handle=fake.handle()).method == "model:fake"

    # a run's summary.json takes the block from the run folder, else from beside the program the agent loads
    run = tmp_path / "run"
    run.mkdir()
    assert compiled_block(run) is None
    monkeypatch.setenv(COMPILED_ENV, str(out))
    assert compiled_block(run) == block and compiled_block(run, model="none") is None


def test_a_stale_compiled_file_is_never_loaded(built_demo, tmp_path: Path, monkeypatch, caplog) -> None:
    programs = InferencePrograms()
    programs.memory_fusion.demos = [dspy.Example(question="q", reply="r")]
    path = programs.save_compiled(tmp_path / "inference.json")
    assert InferencePrograms.from_file(path).demos["memory_fusion"] == 1
    state = json.loads(path.read_text())
    state["reveriemem"]["signatures"] = "made-for-old-prompts"
    path.write_text(json.dumps(state))
    with pytest.raises(CompiledProgramError, match="other prompts"):
        InferencePrograms.from_file(path)
    monkeypatch.setattr(programs_module, "DEFAULT_COMPILED", path)
    with caplog.at_level(logging.WARNING, logger="reveriemem.inference.programs"):
        assert programs_module.default_programs().compiled is None  # the default file is skipped, with a warning
    assert "other prompts" in caplog.text
    monkeypatch.setenv(COMPILED_ENV, str(path))
    with pytest.raises(CompiledProgramError):  # a file asked for by name is an error
        programs_module.default_programs()


def test_demos_change_the_cache_key_and_plain_programs_keep_it() -> None:
    handle = FakeModel().handle()
    inputs = {"character": "Mara", "question": "q", "history": [], "scene_memory": [], "facts": [], "pattern": "",
              "pattern_excerpts": [], "emotion_state": "neutral"}
    plain = InferencePrograms()
    assert cache_key(handle, plain.memory_fusion, inputs) == cache_key(handle, dspy.Predict(
        memory_fusion_program().signature), inputs)  # answers cached before this change stay valid
    compiled = InferencePrograms()
    compiled.memory_fusion.demos = [dspy.Example(question="q", reply="r")]
    assert cache_key(handle, compiled.memory_fusion, inputs) != cache_key(handle, plain.memory_fusion, inputs)


def test_dspy_traces_both_tracks_but_not_persistent_cache_hits(built_demo) -> None:
    items, train, _ = _items()
    fake = _fake(items, train)
    question = "Which cask did you fill the Horn Lamp from?"
    for inline in (False, True):  # the worker thread inherits the caller's DSPy context
        agent = _agent(handle=fake.handle(), inline_personality=inline, programs=InferencePrograms())
        with dspy.context(trace=[]):
            turn = agent.respond(question)
            traced = {id(p) for p, _, _ in dspy.settings.trace}
        assert turn.trace.pattern_source == "selected"
        assert traced == {id(p) for _, p in agent.programs.named_predictors()}, inline
    # a call answered from the persistent model cache never runs its predictor: compiling turns that cache off
    cached = _agent(handle=fake.handle(cache=True), programs=InferencePrograms())
    cached.respond(question)
    cached.state = None
    with dspy.context(trace=[]):
        turn = cached.respond(question)
        assert dspy.settings.trace == [] and turn.trace.totals()["cached_calls"] >= 2


def test_compile_command_prints_before_and_after(built_demo, tmp_path: Path) -> None:
    items, train, _ = _items()
    register_fake("compiler", _fake(items, select_items(items, "train", 2), name="compiler"))
    try:
        out = tmp_path / "bundle.json"
        result = CliRunner().invoke(main, ["compile", DEMO_SLUG, "--lm", "fake:compiler", "--train", "2",
                                           "--heldout", "2", "--out", str(out), "-q"])
        assert result.exit_code == 0, result.output
        assert "BootstrapFewShot on 2 train items" in result.output and "model compiler" in result.output
        assert "before" in result.output and "after" in result.output and f"Saved {out}" in result.output
        assert out.is_file() and summary_path(out).is_file()
        result = CliRunner().invoke(main, ["compile", DEMO_SLUG, "--lm", "none", "--out", str(out), "-q"])
        assert result.exit_code == 1 and "needs a language model" in result.output
    finally:
        unregister_fake("compiler")


def test_mipro_compiles_when_optuna_is_installed_and_is_skipped_without_it(built_demo, tmp_path: Path,
                                                                           monkeypatch) -> None:
    items, train, heldout = _items()
    if importlib.util.find_spec("optuna") is not None:
        out = tmp_path / "mipro.json"
        outcome = compile_inference(DEMO_SLUG, _fake(items, train).handle(), train_items=train, heldout_items=heldout,
                                    out=out, embedder="hash", optimizer="mipro")
        assert outcome.block["optimizer"] == "MIPROv2" and not outcome.block["note"]
        assert InferencePrograms.from_file(out).compiled == out.resolve()
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "optuna" else find_spec(name, *a))
    outcome = compile_inference(DEMO_SLUG, _fake(items, train).handle(), train_items=train, heldout_items=heldout,
                                out=tmp_path / "fallback.json", embedder="hash", optimizer="mipro")
    assert outcome.block["optimizer"] == "BootstrapFewShot" and "optuna is not installed" in outcome.block["note"]
