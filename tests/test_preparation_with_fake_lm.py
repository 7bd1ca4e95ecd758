"""The LLM steps of scene preparation, with a fake model whose answers the tests write."""

from dspy_programs.scenes import SceneContinuity, SceneRoster, SceneSetting
from reveriemem.models import FakeModel
from reveriemem.source_to_memory.preparation import combine_status, judge_rosters, prepare_scenes
from reveriemem.source_to_memory.reading import BookReading
from reveriemem.source_to_memory.rosters import RosterEvidence


def test_model_decides_every_soft_boundary_and_settings_come_from_it(demo_book):
    reading = BookReading(demo_book)
    soft = [s for s in reading.candidates if s.boundary not in ("start", "chapter")]

    def answer(signature, inputs):
        if signature is SceneContinuity:
            return {"new_scene": "That evening" in inputs["passage_after"][:40]}
        if signature is SceneSetting:
            return {"location": "the harbour", "time": "dusk", "atmosphere": "uneasy"}
        return {}

    model = FakeModel(answer)
    prepared = prepare_scenes(reading, model.handle())
    assert prepared.method.startswith("model:fake+heuristic:")
    chapters = len({s.chapter for s in reading.candidates})
    assert len(prepared.scenes) == chapters + 1  # only the "That evening" boundary was kept
    assert {s.atmosphere for s in prepared.settings} == {"uneasy"}
    boundary_calls = [c for c in model.calls if c.signature is SceneContinuity]
    assert len(boundary_calls) == len(soft)


def test_garbage_from_the_model_falls_back_without_losing_the_book(demo_book):
    reading = BookReading(demo_book)
    prepared = prepare_scenes(reading, FakeModel(lambda signature, inputs: "no structure at all").handle())
    assert prepared.failures  # every call failed after retries, each recorded
    assert len(prepared.scenes) >= len({s.chapter for s in reading.candidates})
    assert all(m == prepared.setting_methods[0] for m in prepared.setting_methods)


def test_roster_model_can_raise_but_never_lower_the_hard_evidence(demo_book):
    reading = BookReading(demo_book)
    scenes = reading.heuristic_scenes()[:2]
    evidence = reading.roster_evidence(scenes)
    names = [c.name for c in demo_book.characters]

    def answer(signature, inputs):
        assert signature is SceneRoster
        assert "quoted speaking" in inputs["evidence"]
        return {"roster": [{"character": n, "status": "absent"} for n in names]}

    judged, method, failures = judge_rosters(reading, scenes, evidence, FakeModel(answer).handle())
    assert method.startswith("model:fake+") and not failures
    for scene_evidence, scene_judged in zip(evidence, judged):
        for slug, record in scene_evidence.items():
            final, model_status = scene_judged[slug]
            assert model_status == "absent"
            if record.utterances:
                assert final == "present_active"
            elif record.mentions:
                assert final == "referenced"


def test_combine_status_rules():
    speaker = RosterEvidence(utterances=2, mentions=3)
    assert combine_status(speaker, "referenced") == "present_active"
    named = RosterEvidence(mentions=1, actions=1)
    assert named.status() == "present_silent"
    assert combine_status(named, "referenced") == "referenced"  # soft evidence yields to the model
    assert combine_status(RosterEvidence(), "present_silent") == "present_silent"  # an unnamed presence
    assert combine_status(named, None) == "present_silent"
