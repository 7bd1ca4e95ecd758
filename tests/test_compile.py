"""Compiling the agent module (eval/compile.py) with a scripted model on the demo story, and how the same
module (reveriemem.inference.module.ReverieInference) loads the saved program for `ask` and the eval."""

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
from eval.items import KBFItem, render_question
from eval.matching import matched_letter
from eval.runner import RunSpec, load_items, select_items
from reveriemem.core.demo import DEMO_SLUG
from reveriemem.core.embeddings import HashEmbedder
from reveriemem.core.registry import load_book
from reveriemem.inference import compiled as compiled_module
from reveriemem.inference.compiled import COMPILED_ENV, CompiledProgramError, save_compiled
from reveriemem.inference.memory_reader import MemoryReader
from reveriemem.inference.module import ReverieInference
from reveriemem.models import FakeModel, register_fake, unregister_fake
from reveriemem.models.cache import cache_key
from reveriemem.serving import ServeConfig
from reveriemem_dagster.cli import main
from tests.test_serve import client, serving

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


def _agent(name: str = "Mara", **kwargs: Any) -> ReverieInference:
    book = load_book(DEMO_SLUG)
    character = book.character(name)
    reader = MemoryReader(DEMO_SLUG, character.slug, HashEmbedder())
    return ReverieInference(reader, kwargs.pop("handle"), character, **kwargs)


def test_compiling_saves_demos_and_the_agent_loads_them(built_demo, tmp_path: Path, monkeypatch) -> None:
    items, train, heldout = _items()
    fake = _fake(items, train)
    out = tmp_path / "compiled" / "inference.json"
    outcome = compile_inference(DEMO_SLUG, fake.handle(), train_items=train, heldout_items=heldout, out=out,
                                embedder="hash", max_demos=2)

    state = json.loads(out.read_text())
    for name in ("self_probe", "memory_fusion"):
        assert state[name]["demos"], name  # each bootstrapped trace gives both predictors one demo
        assert len(state[name]["demos"]) <= 2
    assert len(state["select_pattern"]["demos"]) <= 2  # Pattern is asked only when the Emo-Gate fires
    assert state["reveriemem"]["optimizer"] == "BootstrapFewShot" and state["reveriemem"]["model"] == "fake"
    assert not list(out.parent.glob(".*"))  # no candidate or temporary file is left behind

    block = outcome.block
    assert {"before", "after", "split", "optimizer", "model", "train", "heldout"} <= set(block)
    assert block["split"] == "held-out" and block["optimizer"] == "BootstrapFewShot" and block["model"] == "fake"
    assert block["train"] == 4 and block["heldout"] == 4
    assert list(block["calls"]) == ["before", "compile", "after"]  # model calls of each phase, from the handle
    calls = {phase: used["calls"] for phase, used in block["calls"].items()}
    assert calls["before"] >= 8 and calls["after"] >= 8  # Self-Probe and Memory-Fusion for each held-out item
    assert calls["compile"] >= 4  # bootstrapping stops once two train traces passed: max_demos 2
    for when in ("before", "after"):
        assert {"krf_acc", "kr_acc", "kbf", "n_krf", "n_kr"} <= set(block[when]["reveriemem"])
    # the fake is right on held-out items only when the prompt carries demos: they reach the loaded program
    assert block["before"]["reveriemem"]["kbf"] == 0.0 and block["after"]["reveriemem"]["kbf"] == 1.0
    assert compiled_block(out) == block == compiled_block(summary_path(out))

    # a new agent loads the file named by REVERIEMEM_COMPILED: its predictors hold the demos
    monkeypatch.setenv(COMPILED_ENV, str(out))
    agent = _agent(handle=fake.handle())
    assert agent.demos == state["reveriemem"]["demos"] and agent.compiled == out
    turn = agent.respond("Which cask did you fill the Horn Lamp from?")
    assert turn.trace.method == "model:fake+compiled:inference.json" and turn.trace.compiled == str(out)
    assert turn.to_dict()["trace"]["compiled"] == str(out)

    # "none" loads nothing; an explicit programs= wins over the variable
    monkeypatch.setenv(COMPILED_ENV, "none")
    assert _agent(handle=fake.handle()).method == "model:fake"
    monkeypatch.setenv(COMPILED_ENV, str(tmp_path / "missing.json"))
    with pytest.raises(CompiledProgramError, match="not a file"):
        _agent(handle=fake.handle())
    assert _agent(handle=fake.handle(), compiled=False).method == "model:fake"

    # by default the agent loads dspy_programs/compiled/inference.json only when it exists
    monkeypatch.delenv(COMPILED_ENV)
    monkeypatch.setattr(compiled_module, "DEFAULT_COMPILED", out)
    assert _agent(handle=fake.handle()).method == "model:fake+compiled:inference.json"
    monkeypatch.setattr(compiled_module, "DEFAULT_COMPILED", tmp_path / "absent.json")
    assert _agent(handle=fake.handle()).method == "model:fake"

    # a run's summary.json takes the block from the run folder, else from beside the program the agent loads
    run = tmp_path / "run"
    run.mkdir()
    assert compiled_block(run) is None
    monkeypatch.setenv(COMPILED_ENV, str(out))
    assert compiled_block(run) == block and compiled_block(run, model="none") is None


def test_ask_serves_the_saved_program_and_its_demos_reach_memory_fusion(built_demo, tmp_path: Path,
                                                                       monkeypatch) -> None:
    """`reveriemem compile` saves the module; `reveriemem ask` and `reveriemem serve` load it into the same
    class and answer with it."""
    items, train, heldout = _items()
    fake = _fake(items, train, name="served")
    out = tmp_path / "served.json"
    compile_inference(DEMO_SLUG, fake.handle(), train_items=train, heldout_items=heldout, out=out, embedder="hash")
    demos = json.loads(out.read_text())["memory_fusion"]["demos"]
    assert demos
    item = heldout[0]
    ask = ["ask", DEMO_SLUG, item.character, render_question(item), "--lm", "fake:served", "--json"]
    register_fake("served", fake)
    try:
        monkeypatch.setenv(COMPILED_ENV, "none")
        plain = CliRunner().invoke(main, ask)
        monkeypatch.setenv(COMPILED_ENV, str(out))
        before = len(fake.calls)
        served = CliRunner().invoke(main, ask)
        after_ask = len(fake.calls)
        with serving(ServeConfig(lm="fake:served")) as base:  # the OpenAI-compatible API's agents load it too
            api = client(base).chat.completions.create(model=f"{DEMO_SLUG}/{item.character}",
                                                       messages=[{"role": "user", "content": render_question(item)}])
    finally:
        unregister_fake("served")
    assert plain.exit_code == 0 and served.exit_code == 0, plain.output + served.output
    plain_turn, served_turn = json.loads(plain.stdout), json.loads(served.stdout)
    # the fake answers a held-out item right only when its prompt carries demos: the user sees another answer
    assert matched_letter(plain_turn["reply"], item) != item.gold
    assert matched_letter(served_turn["reply"], item) == item.gold
    assert plain_turn["method"] == "model:served"
    assert served_turn["method"] == "model:served+compiled:served.json"
    assert served_turn["trace"]["compiled"] == str(out.resolve())
    for calls in (fake.calls[before:after_ask], fake.calls[after_ask:]):  # ask, then serve
        fusion = [c for c in calls if c.signature is MemoryFusion]
        prompt = "\n".join(text for _, text in fusion[-1].messages)
        assert any(str(d["question"]).splitlines()[0] in prompt for d in demos)  # a saved demo, in the prompt
    served_api = api.model_extra["reveriemem"]["trace"]
    assert matched_letter(api.choices[0].message.content or "", item) == item.gold
    assert served_api["method"] == "model:served+compiled:served.json"
    assert served_api["compiled"] == str(out.resolve())


def test_a_stale_compiled_file_is_never_loaded(built_demo, tmp_path: Path, monkeypatch, caplog) -> None:
    handle = FakeModel().handle()
    agent = _agent(handle=handle, compiled=False)
    agent.memory_fusion.demos = [dspy.Example(question="q", reply="r")]
    path = save_compiled(agent, tmp_path / "inference.json")
    assert _agent(handle=handle, compiled=path).demos["memory_fusion"] == 1
    state = json.loads(path.read_text())
    state["reveriemem"]["signatures"] = "made-for-old-prompts"
    path.write_text(json.dumps(state))
    with pytest.raises(CompiledProgramError, match="other prompts"):
        _agent(handle=handle, compiled=path)
    monkeypatch.setattr(compiled_module, "DEFAULT_COMPILED", path)
    with caplog.at_level(logging.WARNING, logger="reveriemem.inference.compiled"):
        skipped = _agent(handle=handle)  # the default file is skipped, with a warning
    assert skipped.compiled is None and skipped.demos["memory_fusion"] == 0
    assert "other prompts" in caplog.text
    monkeypatch.setenv(COMPILED_ENV, str(path))
    with pytest.raises(CompiledProgramError):  # a file asked for by name is an error
        _agent(handle=handle)


def test_demos_change_the_cache_key_and_plain_programs_keep_it() -> None:
    handle = FakeModel().handle()
    inputs = {"character": "Mara", "question": "q", "history": [], "scene_memory": [], "facts": [], "pattern": "",
              "pattern_excerpts": [], "emotion_state": "neutral"}
    plain = memory_fusion_program()
    assert cache_key(handle, plain, inputs) == cache_key(handle, dspy.Predict(
        memory_fusion_program().signature), inputs)  # answers cached before this change stay valid
    compiled = memory_fusion_program()
    compiled.demos = [dspy.Example(question="q", reply="r")]
    assert cache_key(handle, compiled, inputs) != cache_key(handle, plain, inputs)


def test_dspy_traces_both_tracks_but_not_persistent_cache_hits(built_demo) -> None:
    items, train, _ = _items()
    fake = _fake(items, train)
    question = "How dare you! Which cask did you fill the Horn Lamp from?"  # the Emo-Gate fires: Pattern is asked
    for inline in (False, True):  # the worker thread inherits the caller's DSPy context
        agent = _agent(handle=fake.handle(), inline_personality=inline, compiled=False)
        with dspy.context(trace=[]):
            turn = agent.respond(question)
            traced = {id(p) for p, _, _ in dspy.settings.trace}
        assert turn.trace.pattern_source == "selected"
        assert traced == {id(p) for _, p in agent.named_predictors()}, inline
    # a call answered from the persistent model cache never runs its predictor: compiling turns that cache off
    cached = _agent(handle=fake.handle(cache=True), compiled=False)
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
        assert "Model calls: before " in result.output
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
        assert _agent(handle=FakeModel().handle(), compiled=out).compiled == out.resolve()
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "optuna" else find_spec(name, *a))
    outcome = compile_inference(DEMO_SLUG, _fake(items, train).handle(), train_items=train, heldout_items=heldout,
                                out=tmp_path / "fallback.json", embedder="hash", optimizer="mipro")
    assert outcome.block["optimizer"] == "BootstrapFewShot" and "optuna is not installed" in outcome.block["note"]
