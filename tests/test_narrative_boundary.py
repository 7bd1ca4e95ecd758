"""A property over generated scripts: during a simulation no character's prompt holds a fact outside
that character's boundary at the script's point (unless it was said in its hearing during the play),
nor another character's thought; and its bounded retrieval recalls only facts inside the boundary."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from narrative_fake import narrative_handler

from dspy_programs.inference import MemoryFusion
from reveriemem.core.registry import load_book
from reveriemem.core.settings import lancedb_uri
from reveriemem.core.storage import LanceStore, PartitionRef
from reveriemem.inference.memory_reader import cut_offset
from reveriemem.inference.turn_text import numbered_facts
from reveriemem.models import FakeModel, register_fake, unregister_fake
from reveriemem.narrative.log import Story
from reveriemem.narrative.methods import tell
from reveriemem.narrative.scripts import Location, Script, Stage

DEMO = "the-lamplighters-ledger"
WORDS = ["lantern", "rain", "quay", "bell", "rope", "gull", "tide", "coat", "ladder", "window", "supper", "wick"]
LOCATIONS = [Location("hall", "the Guild Hall"), Location("quay", "the east quay")]


@st.composite
def scripts(draw: st.DrawFn, names: list[str]) -> Script:
    cast = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
    stages = [Stage(" ".join(draw(st.lists(st.sampled_from(WORDS), min_size=2, max_size=6))).capitalize() + ".",
                    draw(st.sampled_from([None, "hall", "quay"])),
                    tuple(draw(st.lists(st.sampled_from(cast), max_size=len(cast), unique=True))))
              for _ in range(draw(st.integers(1, 2)))]
    start = {c: draw(st.sampled_from(["hall", "quay"])) for c in cast}
    return Script("generated", "generated", DEMO, cast, as_of_chapter=draw(st.integers(1, 5)), world="Saltmere",
                  locations=LOCATIONS, start=start, stages=stages, turns=1)


def _facts() -> list[dict[str, Any]]:
    return LanceStore(lancedb_uri()).read("facts", PartitionRef(DEMO)).drop("vector").to_dicts()


def _plain(text: str) -> str:
    """Text compared without quotes, escapes or spacing (a prompt renders lists as JSON)."""
    return " ".join(re.sub(r"[\\\"'“”‘’]", "", text).split())


def inside(fact: dict[str, Any], slug: str, cut: int) -> bool:
    seen = list(fact["visibility"] or [])
    return slug in seen and int((fact["visible_from"] or [0] * len(seen))[seen.index(slug)] or 0) <= cut


def leaks(story: Story, calls: list[Any], names: dict[str, str], facts: list[dict[str, Any]], cut: int) -> list[str]:
    """Every breach of a character's boundary in the prompts made on its behalf, in words (the
    Personality layer's excerpts included: they are cut at `as_of` too)."""
    found = []
    for move in story.log:
        slug = names[move.actor]
        by_id = {f["fact_id"]: f for f in facts}
        found += [f"{move.actor} recalled {fid}" for fid in move.pool if not inside(by_id[fid], slug, cut)]
    for call in calls:
        who = str(call.inputs.get("character") or "").split(" (")[0]
        if who not in names:
            continue
        prompt = " ".join(" ".join(text.split()) for _, text in call.messages)
        prompt = _plain(prompt)
        heard = _plain(" | ".join(m.speech for m in story.log if who in m.audience))
        for move in story.log:
            if move.actor != who and move.thought and move.thought in prompt:
                found.append(f"{who}'s prompt holds {move.actor}'s thought {move.thought}")
        for fact in facts:
            text = _plain(str(fact["text"]))
            if len(text) >= 40 and not inside(fact, names[who], cut) and text in prompt and text not in heard:
                found.append(f"{who}'s prompt holds {fact['fact_id']} outside its boundary")
        if call.signature is MemoryFusion:
            shown = {numbered_facts([f])[0].removeprefix("[1] ") for f in facts if inside(f, names[who], cut)}
            found += [f"{who} was shown {item[:60]!r}" for item in call.inputs["facts"]
                      if re.sub(r"^\[\d+\] ", "", item) not in shown]
    return found


def play(script: Script, method: str) -> tuple[Story, FakeModel]:
    """The script played by `method` under a fresh fake generator; the story and the fake's calls."""
    model = FakeModel(narrative_handler())
    register_fake("bounded", model)
    try:
        return tell(script, method, "fake:bounded"), model
    finally:
        unregister_fake("bounded")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_prompt_in_a_simulation_crosses_a_characters_boundary(built_demo, data):
    book = load_book(built_demo)
    names = {c.name: c.slug for c in book.characters}
    script = data.draw(scripts(sorted(names)))
    story, model = play(script, data.draw(st.sampled_from(["reveriemem", "reveriemem-no-episodic"])))
    assert [m for m in story.log if m.kind == "move"]
    cut = cut_offset(DEMO, chapter=script.as_of_chapter)
    assert leaks(story, model.calls, names, _facts(), cut) == []


def test_the_check_sees_thoughts_leak_through_a_shared_history(built_demo):
    """BookWorld's shared history hands each character the others' thoughts: the property's check flags it."""
    book = load_book(built_demo)
    names = {c.name: c.slug for c in book.characters}
    script = Script("shared", "shared", DEMO, ["Mara Quell", "Tobin Reddick"], as_of_chapter=1,
                    locations=LOCATIONS, stages=[Stage("Rain on the quay.", "quay")], turns=2)
    story, model = play(script, "bookworld")
    found = leaks(story, model.calls, names, _facts(), cut_offset(DEMO, chapter=1))
    assert any("thought" in f for f in found), found


@pytest.mark.parametrize("method", ["reveriemem"])
def test_a_character_elsewhere_perceives_nothing(built_demo, method):
    script = Script("apart", "apart", DEMO, ["Mara Quell", "Tobin Reddick"], as_of_chapter=2, locations=LOCATIONS,
                    start={"Mara Quell": "hall", "Tobin Reddick": "quay"}, stages=[Stage("Rain falls.")], turns=1)
    story, model = play(script, method)
    assert all(m.audience == [] for m in story.log)
    tobin = [c for c in model.calls if str(c.inputs.get("character", "")).startswith("Tobin")]
    assert tobin and not any("MaraQuell" in " ".join(t for _, t in c.messages) for c in tobin)


def test_pattern_excerpts_are_cut_at_the_scripts_point(built_demo):
    book = load_book(built_demo)
    names = {c.name: c.slug for c in book.characters}
    script = Script("early", "early", DEMO, ["Ansel Harrow"], as_of_chapter=1, locations=LOCATIONS,
                    stages=[Stage("Lantern lantern.")], turns=1)
    story, model = play(script, "reveriemem")
    assert leaks(story, model.calls, names, _facts(), cut_offset(DEMO, chapter=1)) == []
