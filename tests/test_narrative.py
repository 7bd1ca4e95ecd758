"""Task 2: scripts, stories played by bounded characters, the pairwise judge and the batch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from narrative_fake import narrative_handler

from reveriemem.models import FakeModel, open_model, register_fake, unregister_fake
from reveriemem.narrative.judge import combine, judge_pair, win_rates
from reveriemem.narrative.log import Story, parse_move
from reveriemem.narrative.methods import MethodError, tell
from reveriemem.narrative.scripts import (
    ScriptError,
    import_bookworld_preset,
    load_script,
    script_from_dict,
    shipped_scripts,
)

BOOKWORLD = Path(__file__).parent / "data" / "bookworld" / "experiment_presets"
DEMO = "the-lamplighters-ledger"


@pytest.fixture
def fake():
    model = FakeModel(narrative_handler())
    register_fake("narrative", model)
    yield model
    unregister_fake("narrative")


# -- scripts ---------------------------------------------------------------------------------


def test_shipped_scripts_load_for_demo_and_two_novels():
    for book in (DEMO, "a-study-in-scarlet", "treasure-island"):
        scripts = [load_script(p) for p in shipped_scripts(book)]
        assert len(scripts) == 3, book
        assert all(s.book == book and s.cast and (s.stages or s.intervention) for s in scripts)
        assert any(not s.with_script for s in scripts) or book != DEMO


@pytest.mark.parametrize("data, words", [
    ({"title": "x"}, "names no cast"),
    ({"cast": ["A"], "mode": "script"}, "at least one stage"),
    ({"cast": ["A"], "stages": [{"text": "go", "location": "moon"}]}, "not among the script's locations"),
    ({"cast": ["A"], "stages": [{"text": "go", "cast": ["B"]}]}, "outside the cast"),
    ({"cast": ["A"], "mode": "free"}, "intervention"),
])
def test_bad_scripts_are_one_clear_sentence(data, words):
    with pytest.raises(ScriptError, match=words):
        script_from_dict(data)


def test_parse_move_splits_thought_action_speech():
    assert parse_move("[He lies.] (turns away) I was never there.") == ("He lies.", "turns away", "I was never there.")
    assert parse_move("Just words") == ("", "", "Just words")


# -- the judge -------------------------------------------------------------------------------


def test_both_orders_must_agree_or_it_is_a_tie():
    assert combine("A", "B", "x", "y") == "x"  # x shown first and second, preferred both times
    assert combine("B", "A", "x", "y") == "y"
    assert combine("A", "A", "x", "y") == "tie"  # always the first text: a position bias, not a win
    assert combine("tie", "B", "x", "y") == "tie"
    assert combine("A", "tie", "x", "y") == "tie"


def test_a_judge_that_always_prefers_the_first_text_gives_only_ties(built_demo):
    register_fake("biased", FakeModel(narrative_handler(first_bias=True)))
    try:
        script = load_script(shipped_scripts(DEMO)[0])
        x = Story(script.id, "reveriemem", "m", "the ledger, the ledger")
        y = Story(script.id, "direct", "m", "a lamp")
        judged = judge_pair(open_model("fake:biased"), script, x, y)
        assert len(judged) == 5 and {j.winner for j in judged} == {"tie"}
        assert {j.dimension for j in judged} >= {"Storyline Quality", "Character Fidelity"}
        rates = win_rates(judged)
        assert all(r["win_rate"] == 0.5 and r["ties"] == 1 for r in rates)
    finally:
        unregister_fake("biased")


def test_a_verdict_that_never_parses_is_a_tie_and_the_judging_goes_on(built_demo):
    def handler(signature, inputs):
        # the first order's verdict is never JSON; the second names A
        return "no verdict here" if "ledger" in inputs.get("story_a", "") else {"better": "A"}

    register_fake("mumbling", FakeModel(handler))
    try:
        script = load_script(shipped_scripts(DEMO)[0])
        x = Story(script.id, "reveriemem", "m", "the ledger, the ledger")
        y = Story(script.id, "direct", "m", "a lamp")
        judged = judge_pair(open_model("fake:mumbling"), script, x, y)
        assert len(judged) == 5 and all(j.unparsed == 1 for j in judged)
        assert all((j.x_as_a, j.x_as_b, j.winner) == ("tie", "A", "tie") for j in judged)
    finally:
        unregister_fake("mumbling")


def test_win_rate_counts_ties_as_half_with_an_interval():
    rows = [{"first": "x", "second": "y", "mode": "script", "dimension": "Writing Quality", "winner": w}
            for w in ("x", "x", "tie", "y")]
    (rate,) = win_rates(rows)
    assert rate["win_rate"] == pytest.approx(2.5 / 4)
    assert (rate["wins"], rate["ties"], rate["losses"]) == (2, 1, 1)
    assert 0.0 <= rate["ci"][0] <= rate["win_rate"] <= rate["ci"][1] <= 1.0


# -- stories ---------------------------------------------------------------------------------


def test_a_with_script_run_realises_every_stage_and_logs_audience_and_facts(built_demo, fake):
    script = load_script(shipped_scripts(DEMO)[1])  # the harbour office, then Penhallow's rooms
    story = tell(script, "reveriemem", "fake:narrative")
    moves = [m for m in story.log if m.kind == "move"]
    assert story.rounds_played() == set(range(len(script.stages)))
    for index, stage in enumerate(script.stages):
        played = [m for m in moves if m.round == index]
        assert {m.goal for m in played} == {stage.text}
        assert {m.actor for m in played} == set(script.stage_cast(index))
        assert all(m.location == stage.location for m in played)
    # Mara walks to Tallow Lane: seen by those she leaves and by Penhallow, who is there
    (walk,) = [m for m in story.log if m.kind == "movement"]
    assert walk.actor == "Mara Quell" and "Osric Penhallow" in walk.audience
    assert all(m.facts and set(m.facts) <= set(m.pool) for m in moves)
    assert all(m.actor not in m.audience for m in story.log)
    assert "THOUGHT-" in story.text  # the narrator was given the thoughts to render


def test_cli_story_prints_story_and_log(built_demo, fake):
    from reveriemem_dagster.cli import main

    path = shipped_scripts(DEMO)[0]
    result = CliRunner().invoke(main, ["story", DEMO, "--script", str(path), "--method", "bookworld",
                                       "--lm", "fake:narrative"])
    assert result.exit_code == 0, result.output
    assert "# Log" in result.output and "[round 3]" in result.output and "Rope Walk" in result.output
    bad = CliRunner().invoke(main, ["story", DEMO, "--script", str(path.with_name("nope.yaml"))])
    assert bad.exit_code == 1 and "No script file" in bad.output and "Traceback" not in bad.output


# -- BookWorld presets -----------------------------------------------------------------------


def test_bookworld_example_preset_imports_and_runs(fake):
    script = import_bookworld_preset(BOOKWORLD / "example_script.json")
    assert script.cast == ["Lacia", "Trek"] and script.with_script and len(script.stages) >= 2
    assert "Laboratory" in [loc.name for loc in script.locations]
    assert "Relation to Trek" in script.profiles["Lacia"]
    free = load_script(BOOKWORLD / "example_free.json")
    assert not free.with_script and free.intervention.startswith("One day")
    story = tell(script, "bookworld", "fake:narrative")
    assert story.rounds_played() == set(range(len(script.stages)))
    assert tell(free, "hollmwood", "fake:narrative").text
    with pytest.raises(MethodError, match="names no book"):
        tell(script, "reveriemem", "fake:narrative")


# -- the batch -------------------------------------------------------------------------------


def test_the_whole_batch_runs_on_the_demo_and_resumes(built_demo, fake, tmp_path):
    from reveriemem_dagster.cli import main

    out = tmp_path / "run"
    args = ["judge", DEMO, "--lm", "fake:narrative", "--judge-lm", "fake:narrative", "--out", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["per_method"]) == {"reveriemem", "direct", "hollmwood", "bookworld", "reveriemem-no-episodic",
                                          "reveriemem-no-semantic", "reveriemem-no-personality"}
    assert summary["per_method"]["reveriemem"]["stages_realised"] == summary["per_method"]["reveriemem"]["stages"] > 0
    assert summary["per_method"]["reveriemem"]["goal_moves"] == 0  # every Memory-Fusion of the fake parses
    # 3 scripts x 6 comparisons x 5 dimensions, each judged in both orders
    assert summary["judgements"] == 90 and summary["unparsed_verdicts"] == 0
    assert summary["complete"] and summary["stories_done"] == summary["stories_total"] == 21 and summary["model_name"] == "fake"
    lines = (out / "judgements.jsonl").read_text().splitlines()
    assert len(lines) == 90 and all(json.loads(line)["x_as_b"] in {"A", "B", "tie"} for line in lines)
    html = (out / "report.html").read_text()
    assert "<table" in html and "wiring" in html and "gpt-4o" in html
    assert "fake" in (out / "report.md").read_text()
    calls = len(fake.calls)
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0, again.output
    assert len(fake.calls) == calls  # every story and judgement was stored: nothing is asked again
    other = CliRunner().invoke(main, [*args[:-4], "--judge-lm", "fake", "--out", str(out)])
    assert other.exit_code == 1 and "another judge_model" in other.output


def test_a_batch_that_stops_midway_leaves_a_partial_report_and_resumes(built_demo, tmp_path):
    from dspy_programs.narrative import ActFromProfile
    from eval.narrative_runner import NarrativeSpec, run_narrative
    from reveriemem.core.errors import ModelUnavailableError

    base = narrative_handler()
    state = {"down": True}

    def handler(signature, inputs):
        if state["down"] and signature is ActFromProfile:  # bookworld's actors: the model is gone
            raise ModelUnavailableError("The model went away.")
        return base(signature, inputs)

    register_fake("flaky", FakeModel(handler))
    try:
        spec = NarrativeSpec(DEMO, tmp_path / "run", methods=("reveriemem", "direct", "bookworld"),
                             lm="fake:flaky", judge_lm="fake:flaky", limit=1, turns=1)
        with pytest.raises(ModelUnavailableError):
            run_narrative(spec)
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        assert not summary["complete"] and (summary["stories_done"], summary["stories_total"]) == (2, 3)
        assert summary["judgements"] == 5  # reveriemem vs direct, judged before bookworld's story failed
        assert "Partial: 2 of 3 stories" in (tmp_path / "run" / "report.md").read_text()
        state["down"] = False
        summary = run_narrative(spec)
        assert summary["complete"] and summary["judgements"] == 10
        assert "Partial" not in (tmp_path / "run" / "report.md").read_text()
    finally:
        unregister_fake("flaky")


def test_the_narrative_assets_materialise_on_the_demo(built_demo, fake):
    import dagster as dg

    from assets import NARRATIVE_ASSETS
    from reveriemem_dagster.definitions import ALL_ASSETS
    from reveriemem_dagster.instance import get_instance
    from reveriemem_dagster.io_managers import MemoryIOManager
    from reveriemem_dagster.resources import EmbeddingModel, LanguageModel

    instance = get_instance()
    instance.add_dynamic_partitions("book", [DEMO])
    config = {"methods": ["reveriemem", "direct"], "judge_lm": "fake:narrative", "limit": 1, "turns": 1}
    result = dg.materialize(ALL_ASSETS, selection=NARRATIVE_ASSETS, partition_key=DEMO, instance=instance,
                            resources={"lm": LanguageModel(model="fake:narrative"), "embedder": EmbeddingModel(),
                                       "memory_io": MemoryIOManager()},
                            run_config={"ops": {"stories": {"config": config}, "judgements": {"config": config}}})
    assert result.success
    meta = {e.asset_key.to_user_string(): e.event_specific_data.materialization.metadata
            for e in result.get_asset_materialization_events()}
    assert meta["scripts"]["scripts"].value == 3 and meta["scripts"]["source"].value == "hand-written"
    assert meta["judgements"]["judgements"].value == 5  # one script, one comparison, five dimensions
    assert Path(meta["narrative_report"]["html"].value).is_file()


def test_scripts_are_drafted_from_the_built_scenes_and_load_back(built_demo, fake, tmp_path):
    from reveriemem_dagster.cli import main

    result = CliRunner().invoke(main, ["scripts", DEMO, "--lm", "fake:narrative", "--count", "2", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    drafted = [load_script(p) for p in sorted(tmp_path.glob("*.yaml"))]
    assert len(drafted) == 2
    for script in drafted:
        assert script.book == DEMO and len(script.cast) >= 2 and script.as_of_scene is not None
        assert [s.text for s in script.stages] == ["Scene 1 plays out.", "Scene 2 plays out."]  # the model's stages
    assert "# drafted by model:fake" in (sorted(tmp_path.glob("*.yaml"))[0]).read_text()


def test_hollmwood_plays_no_more_beats_than_the_simulations_make_moves():
    from dspy_programs.narrative import DraftOutline, ReviseOutline

    base = narrative_handler()

    def handler(signature, inputs):  # a writer that never stops: 40 beats, some empty
        if signature in (DraftOutline, ReviseOutline):
            return {"beats" if signature is DraftOutline else "revised": ["", *["Mara Quell: lights a lamp"] * 40]}
        return base(signature, inputs)

    register_fake("prolix", FakeModel(handler))
    try:
        script = load_script(shipped_scripts(DEMO)[0])
        script.turns = 1
        story = tell(script, "hollmwood", "fake:prolix")
        budget = sum(len(script.stage_cast(i)) for i in range(script.round_count))
        assert len(story.log) == budget == 10 and all(m.goal == "Mara Quell: lights a lamp" for m in story.log)
    finally:
        unregister_fake("prolix")


def test_a_move_whose_memory_fusion_never_parses_falls_back_to_the_goal(monkeypatch):
    from reveriemem.core.errors import ModelOutputError
    from reveriemem.narrative import methods

    class Agent:
        def respond(self, *args, **kwargs):
            raise ModelOutputError("The model x returned output that could not be parsed as MemoryFusion.")

    class FakeSession:
        agent, as_of = Agent(), None

    actor = methods.ReverieActor.__new__(methods.ReverieActor)
    monkeypatch.setattr(methods.ReverieActor, "session", lambda self, character: FakeSession())
    move = actor.act("Mara Quell", "Find the ledger.", "the quay", [], [])
    assert (move.thought, move.action, move.speech) == methods.parse_move("Find the ledger.")
    assert move.facts == [] and move.pool == []
