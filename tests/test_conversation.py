"""`reveriemem ask` and `reveriemem chat` over the demo story's built memory."""

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from dspy_programs.inference import MemoryFusion, SelfProbe
from reveriemem.core.demo import DEMO_SLUG, demo_gold
from reveriemem.models import FakeModel, register_fake, unregister_fake
from reveriemem_dagster.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _ask(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["ask", DEMO_SLUG, *args])
    return result.exit_code, result.output


def _json(output: str) -> dict:
    return json.loads(output[output.index("{"):])


def test_ask_by_alias_answers_from_the_characters_own_memory(built_demo):
    code, output = _ask("Wick", "Who locked the iron press last night?")
    assert code == 0, output
    assert output.startswith("Tobin Reddick: ")
    assert "Facts used:" in output or "Facts retrieved:" in output
    code, output = _ask("Miss Quell", "Where did you fill the Horn Lamp from?", "--json")
    assert code == 0, output
    answer = _json(output)
    assert answer["reply"] and answer["character"] == "Mara Quell"
    assert answer["scenes"] and answer["facts"]
    for fact in answer["facts"]:
        assert {"id", "text", "visibility", "routes"} <= fact.keys()
        assert "mara-quell" in fact["visibility"] and len(fact["routes"]) == len(fact["visibility"])


def test_ask_json_marks_the_sentence_each_used_fact_supports(built_demo):
    code, output = _ask("Mara", "Where did you fill the Horn Lamp from?", "--lm", "none", "--json")
    assert code == 0, output
    answer = _json(output)
    used = [f for f in answer["facts"] if f["used"]]
    assert answer["reply"].startswith("As I remember it:") and len(used) == 1
    quoting = [s for s in answer["sentences"] if "cask nearest the door" in s["text"]]
    assert len(quoting) == 1
    assert quoting[0]["facts"] == [{"id": used[0]["id"], "source_start": used[0]["source_start"],
                                    "source_end": used[0]["source_end"]}]
    assert used[0]["source_start"] is not None
    code, output = _ask("Corwen", "What did the harbour register say at four?", "--lm", "none", "--json")
    assert code == 0, output
    refusal = _json(output)
    assert refusal["trace"]["stop_reason"] == "refusal" and refusal["sentences"]
    assert all(s["facts"] == [] for s in refusal["sentences"])


def test_traces_over_every_gold_item_stay_inside_the_askers_boundary(built_demo):
    from reveriemem.inference.session import open_session

    sessions = {}
    for item in demo_gold()["items"]:
        name = item["character"]
        session = sessions.get(name) or sessions.setdefault(name, open_session(DEMO_SLUG, name, lm="none"))
        turn = session.agent.respond(item["question"])
        for fact in turn.trace.facts:
            assert session.character.slug in fact.visibility, (item["id"], fact.fact_id)
        assert turn.trace.dropped_rows == 0


def test_as_of_bounds_the_character_to_what_they_had_lived(built_demo):
    code, output = _ask("Tobin", "What did Osric confess?", "--as-of", "2", "--json")
    assert code == 0, output
    answer = _json(output)
    cut = answer["as_of"]
    assert cut is not None
    assert all(f["source_start"] <= cut for f in answer["facts"])
    assert all(s["source_end"] <= cut for s in answer["scenes"])
    code, output = _ask("Tobin", "hello", "--as-of", "99")
    assert code == 1 and "scene" in output.lower()


def test_a_fake_model_reply_cites_the_fact_it_used_and_refuses_an_invisible_one(built_demo):
    def handler(signature, inputs):
        if signature is SelfProbe:
            return {"refined_question": inputs["question"], "probe": "the cask nearest the door", "sufficient": True}
        if signature is MemoryFusion:
            facts = [str(f) for f in inputs.get("facts") or []]
            cited = [n for n, f in enumerate(facts, start=1) if "cask nearest the door" in f.lower()]
            if cited and "cask" in inputs["question"].lower():
                return {"reply": "I filled it from the cask nearest the door.", "used_facts": cited[:1]}
            return {"reply": "That I cannot tell you; it never came my way.", "used_facts": []}
        return {}

    register_fake("agent", FakeModel(handler, name="agent"))
    try:
        code, output = _ask("Mara", "Which cask did you fill the Horn Lamp from?", "--lm", "fake:agent", "--json")
        assert code == 0, output
        answer = _json(output)
        assert answer["model"] == "agent" and answer["trace"]["totals"]["calls"] >= 2
        assert all("mara-quell" in f["visibility"] for f in answer["facts"])
        used = [f for f in answer["facts"] if f["used"]]
        assert answer["reply"] == "I filled it from the cask nearest the door."
        assert len(used) == 1 and "cask nearest the door" in used[0]["text"]  # the right fact, cited
        code, output = _ask("Corwen", "What did the harbour register say at four?", "--lm", "fake:agent")
        assert code == 0 and "cannot tell you" in output
    finally:
        unregister_fake("agent")


def test_unknown_character_and_unbuilt_memory_say_what_to_do(tmp_path):
    from reveriemem.core.demo import demo_book_path, demo_characters_path

    result = CliRunner().invoke(main, ["add-book", str(demo_book_path()), "--characters",
                                       str(demo_characters_path()), "--name", DEMO_SLUG])
    assert result.exit_code == 0
    code, output = _ask("Mara", "hello")
    assert code == 1 and f"reveriemem build {DEMO_SLUG}" in output
    code, output = _ask("Sherlock Holmes", "hello")
    assert code == 1 and "not a focus character" in output


def _read_until(fd: int, marker: str, timeout: float = 120.0) -> str:
    seen = ""
    deadline = time.monotonic() + timeout
    while marker not in seen:
        assert time.monotonic() < deadline, f"waited for {marker!r}; saw:\n{seen[-2000:]}"
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 4096).decode("utf-8", "replace")
            except OSError:
                break
            seen += chunk
    return seen


@pytest.mark.slow
def test_chat_in_a_real_terminal_keeps_history_and_shows_the_trace(built_demo):
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "reveriemem_dagster.cli", "chat", DEMO_SLUG, "Elspeth", "--lm", "none"],
        stdin=follower, stdout=follower, stderr=subprocess.DEVNULL, cwd=ROOT, env=os.environ.copy(),
    )
    os.close(follower)
    try:
        banner = _read_until(leader, "You: ")
        assert "Talking with Elspeth Vane" in banner
        os.write(leader, b"What did you see from the harbour wall at four?\n")
        reply = _read_until(leader, "You: ")
        assert "Elspeth Vane: " in reply
        os.write(leader, b"/trace\n")
        trace = _read_until(leader, "You: ")
        assert "round 1" in trace and "exit round" in trace
        assert "visible to" not in trace or "elspeth-vane" in trace
        os.write(leader, b"/quit\n")
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        os.close(leader)
