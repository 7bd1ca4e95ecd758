"""Dialogue records, emotion transitions and personality patterns: the lexicon
annotator, the model path with a fake, clustering, and the Dagster assets."""

import re

import dagster as dg
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assets import personality as personality_assets
from assets import scenes as scene_assets
from dspy_programs.personality import AnnotateDialogue, DescribePattern
from reveriemem.core.embeddings import HashEmbedder
from reveriemem.core.text import split_paragraphs
from reveriemem.models import FakeModel, open_model
from reveriemem.source_to_memory.clustering import behaviour_units, cluster_units
from reveriemem.source_to_memory.dialogue_records import Context, Line, annotate_lines, emotion_transitions
from reveriemem.source_to_memory.emotions import HEURISTIC_METHOD, read_utterance, utterance_act
from reveriemem.source_to_memory.own_lines import own_quote_spans
from reveriemem.source_to_memory.patterns import build_patterns, excerpts_of, pattern_rows
from reveriemem.source_to_memory.reading import BookReading
from tests.conftest import write_book

# -- the lexicon annotator -------------------------------------------------------


def test_negation_cancels_or_turns_a_cue():
    assert read_utterance("I am happy to see you.").emotion == "joy"
    assert read_utterance("I am not happy to see you.").emotion == "sadness"
    assert read_utterance("I'm not afraid of him.").emotion != "fear"
    assert read_utterance("I never doubted you.").emotion != "fear"
    # a negator in another clause does not reach the cue
    assert read_utterance("No, I am glad of it.").emotion == "joy"


def test_intensity_grows_with_punctuation_intensifiers_capitals_and_repetition():
    plain = read_utterance("I am glad.").intensity
    exclaimed = read_utterance("I am glad!").intensity
    intensified = read_utterance("I am very glad!").intensity
    shouted = read_utterance("I am VERY glad!! Very glad!").intensity
    assert 1 <= plain < exclaimed < intensified <= shouted <= 5
    assert read_utterance("The train leaves at noon.").intensity == 1
    excited = read_utterance("I've found it! I've found it!")
    assert excited.emotion != "neutral" and excited.intensity >= 4


@pytest.mark.parametrize(("text", "act"), [
    ("Who was Corwen Dask?", "question"),
    ("Sit down. You've come to tell me I'm wrong.", "command"),
    ("Watson, come here at once.", "command"),
    ("No, I will not go with you.", "refusal"),
    ("I refuse to say another word.", "refusal"),
    ("Good morning, Doctor.", "greeting"),
    ("Good-bye, and good luck.", "farewell"),
    ("Would you pass the salt?", "request"),
    ("Shut the door, please.", "request"),
    ("Thank you, sir.", "thanks"),
    ("I beg your pardon.", "apology"),
    ("Yes, that is so.", "agreement"),
    ("What a night it has been!", "exclamation"),
    ("The ledger was in the press.", "assertion"),
])
def test_intent_comes_from_the_form_of_the_utterance(text, act):
    assert utterance_act(text) == act


def _lines_for(book_text, paragraphs, speakers):
    """Lines of a little scene: each paragraph with a quote, its speaker given by the test."""
    out = []
    for paragraph, speaker in zip(paragraphs, speakers):
        match = re.search(r"\"[^\"]*\"", paragraph.text)
        if match is None:
            continue
        start = paragraph.start + match.start()
        out.append(Line(scene_id=1, paragraph=paragraph.index, start=start, end=paragraph.start + match.end(),
                        speaker=speaker, label=speaker, text=match.group(0).strip('"')))
    return out


def test_trigger_is_another_speakers_line_or_the_narration_before():
    text = ("The door flew open and a stranger stood there, dripping wet.\n\n"
            "\"Who are you?\" said Mara.\n\n"
            "\"A friend,\" said Tobin.\n\n"
            "\"Then come in,\" said Mara. \"And shut the door.\"\n\n"
            "\"I will not,\" said Tobin.\n\n"
            "\"You must.\"")
    paragraphs = split_paragraphs(text)
    lines = _lines_for(text, paragraphs, [None, "mara", "tobin", "mara", "tobin", "tobin"])
    context = Context(text, paragraphs, lines, {1: 0}, {"mara": "Mara Quell", "tobin": "Tobin Reddick"})
    assert context.before(lines[0], 20) == "The door flew open and a stranger stood there, dripping wet."
    assert context.before(lines[1], 20) == 'Mara Quell: "Who are you?"'
    assert context.before(lines[2], 20).startswith("Tobin Reddick:")
    # the same speaker twice: the trigger is the other speaker's line before both
    assert context.before(lines[4], 20).startswith("Mara Quell:")


def test_transitions_are_in_story_order_and_chain_states():
    records = [
        {"book": "b", "speaker": "mara", "speaker_name": "Mara", "scene_id": s, "paragraph": p, "start": p * 10,
         "end": p * 10 + 5, "emotion": e, "intensity": i, "trigger": f"t{p}", "intent": "x", "act": "assertion",
         "text": f"line {p}", "method": HEURISTIC_METHOD}
        for s, p, e, i in [(2, 9, "anger", 4), (1, 2, "neutral", 1), (1, 5, "fear", 3), (2, 7, "fear", 3)]
    ]
    rows = emotion_transitions(records)
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert [r["paragraph"] for r in rows] == [2, 5, 7, 9]
    assert rows[0]["from_emotion"] is None and rows[0]["changed"]
    for before, after in zip(rows, rows[1:]):
        assert after["from_emotion"] == before["to_emotion"]
        assert after["from_intensity"] == before["to_intensity"]
    assert [r["same_scene"] for r in rows] == [False, True, False, True]
    assert [r["changed"] for r in rows] == [True, True, False, True]


# -- the model path ----------------------------------------------------------------


def _demo_lines(demo_book):
    reading = BookReading(demo_book)
    scenes = reading.heuristic_scenes()
    scene_of = {p: i + 1 for i, s in enumerate(scenes) for p in s.paragraphs}
    lines = [Line(scene_of[u.paragraph], u.paragraph, u.start, u.end, u.speaker, u.speaker_label, u.text,
                  u.addressees) for u in reading.utterances(scenes)]
    first = {i + 1: s.first for i, s in enumerate(scenes)}
    names = {c.slug: c.name for c in demo_book.characters}
    return reading, lines, first, names


def test_model_annotates_each_scene_in_one_call_and_one_bad_scene_falls_back(demo_book):
    reading, lines, first, names = _demo_lines(demo_book)
    focus = [line for line in lines if line.speaker]
    scenes_with_dialogue = sorted({line.scene_id for line in focus})
    bad_scene = scenes_with_dialogue[1]
    bad_texts = {line.text[:30] for line in focus if line.scene_id == bad_scene}

    def answer(signature, inputs):
        assert signature is AnnotateDialogue
        numbered = re.findall(r"^(\d+)\. ", inputs["lines"], re.MULTILINE)
        if any(text in inputs["lines"] for text in bad_texts):
            return "this is not the format you asked for"
        # leave the last line out: it gets the lexicon's annotation
        return {"annotations": [{"n": int(n), "emotion": "anger", "intensity": 9, "trigger": "the ledger",
                                 "intent": "to accuse"} for n in numbered[:-1]]}

    model = FakeModel(answer)
    done = []
    result = annotate_lines(demo_book.text, reading.paragraphs, lines, first, names, model.handle(),
                            on_scene=done.append)
    assert done == sorted(first)
    assert len(result.lines) == len(focus) == len(result.annotations)
    assert result.method == "model:fake" and len(result.failures) == 1
    calls = [c for c in model.calls if c.signature is AnnotateDialogue]
    bad_calls = [c for c in calls if any(text in c.inputs["lines"] for text in bad_texts)]
    assert len(calls) - len(bad_calls) == len(scenes_with_dialogue) - 1  # one call per good scene
    assert len(bad_calls) >= 3  # the bad scene was retried
    # only focus speakers' lines go to the model, never the whole scene
    assert all(len(c.inputs["lines"].split("\n")) <= len(focus) for c in calls)
    by_scene: dict[int, list] = {}
    for line, annotation in zip(result.lines, result.annotations):
        by_scene.setdefault(line.scene_id, []).append(annotation)
    for scene_id, annotations in by_scene.items():
        if scene_id == bad_scene:
            assert all(a.method == HEURISTIC_METHOD and "never parsed" in a.error for a in annotations)
            continue
        *modelled, last = annotations
        assert all(a.method == "model:fake" and a.emotion == "anger" and a.intensity == 5 for a in modelled)
        assert last.method == HEURISTIC_METHOD and "no annotation" in last.error


def test_without_a_model_every_line_is_annotated_by_the_lexicon(demo_book):
    reading, lines, first, names = _demo_lines(demo_book)
    result = annotate_lines(demo_book.text, reading.paragraphs, lines, first, names, open_model("none"))
    assert result.method == HEURISTIC_METHOD and not result.failures
    assert {a.method for a in result.annotations} == {HEURISTIC_METHOD}
    assert all(1 <= a.intensity <= 5 and a.intent and a.act for a in result.annotations)
    assert sum(1 for a in result.annotations if a.trigger) >= 0.8 * len(result.annotations)


# -- clustering ----------------------------------------------------------------


def _unit(v):
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def test_hdbscan_finds_clear_clusters_and_keeps_far_noise_apart():
    rng = np.random.default_rng(7)
    centres = _unit(rng.normal(size=(3, 64)))
    blobs = [_unit(c + 0.05 * rng.normal(size=(12, 64))) for c in centres]
    outliers = _unit(rng.normal(size=(2, 64)))
    vectors = np.concatenate([*blobs, outliers]).astype(np.float32)
    result = cluster_units(vectors)
    assert result.label.startswith("hdbscan(")
    found = [set(g) for g, origin in zip(result.groups, result.origins) if origin == "cluster"]
    truth = [set(range(12 * k, 12 * k + 12)) for k in range(3)]
    for blob in truth:
        assert any(blob <= group for group in found)
    assert len(found) == 3
    # every unit belongs to exactly one group; the far outliers are patterns of their own
    members = sorted(i for g in result.groups for i in g)
    assert members == list(range(len(vectors)))
    noise = [g for g, origin in zip(result.groups, result.origins) if origin == "noise"]
    assert sorted(i for g in noise for i in g) == [36, 37]


def test_noise_near_a_cluster_is_attached_to_it():
    rng = np.random.default_rng(3)
    centre = _unit(rng.normal(size=64))
    other = _unit(rng.normal(size=64))
    blob_a = _unit(centre + 0.03 * rng.normal(size=(10, 64)))
    blob_b = _unit(other + 0.03 * rng.normal(size=(10, 64)))
    near = _unit(centre + 0.6 * _unit(rng.normal(size=64)))  # loosely like blob A, not dense with it
    vectors = np.concatenate([blob_a, blob_b, near[None, :]]).astype(np.float32)
    result = cluster_units(vectors)
    home = next(i for i, g in enumerate(result.groups) if 20 in g)
    assert result.origins[home] == "cluster" and set(range(10)) <= set(result.groups[home])
    assert float(_unit(vectors[:10].mean(0)) @ vectors[20]) >= 0.6


def test_zero_one_two_and_identical_units_need_no_hdbscan():
    assert cluster_units(np.zeros((0, 8), dtype=np.float32)).groups == []
    one = cluster_units(_unit(np.ones((1, 8), dtype=np.float32)))
    assert one.groups == [[0]] and one.origins == ["threshold"]
    alike = cluster_units(_unit(np.array([[1, 0.1, 0, 0], [1, 0, 0.1, 0]], dtype=np.float32)))
    assert alike.groups == [[0, 1]]
    apart = cluster_units(np.eye(2, 4, dtype=np.float32))
    assert apart.groups == [[0], [1]] and "few units" in apart.label
    same = cluster_units(_unit(np.ones((6, 8), dtype=np.float32)))
    assert same.groups == [[0, 1, 2, 3, 4, 5]] and "identical" in same.label


def test_units_break_at_scene_and_register_changes():
    def record(scene, emotion, words=5):
        return {"scene_id": scene, "emotion": emotion, "text": " ".join(["word"] * words)}
    records = [record(1, "neutral"), record(1, "anger"), record(1, "neutral"), record(1, "fear"),
               record(2, "fear"), *[record(3, "neutral") for _ in range(6)]]
    units = behaviour_units(records)
    assert [u.records for u in units] == [[0, 1, 2], [3], [4], [5, 6, 7, 8], [9, 10]]


# -- patterns ----------------------------------------------------------------------


def _demo_records(demo_book, handle=None):
    reading, lines, first, names = _demo_lines(demo_book)
    result = annotate_lines(demo_book.text, reading.paragraphs, lines, first, names, handle or open_model("none"))
    return reading, names, [
        {"book": demo_book.slug, "scene_id": line.scene_id, "paragraph": line.paragraph, "start": line.start,
         "end": line.end, "speaker": line.speaker, "speaker_name": names[line.speaker], "addressees": line.addressees,
         "text": line.text, "emotion": a.emotion, "intensity": a.intensity, "trigger": a.trigger,
         "intent": a.intent, "act": a.act, "method": a.method, "error": a.error}
        for line, a in zip(result.lines, result.annotations)
    ]


def test_excerpts_are_verbatim_slices_without_quote_marks(demo_book):
    reading, _, records = _demo_records(demo_book)
    for index, record in enumerate(records):
        paragraph = reading.paragraphs[record["paragraph"]]
        for excerpt in excerpts_of(demo_book.text, paragraph, record["start"], record["end"], index):
            assert demo_book.text[excerpt.start:excerpt.end] == excerpt.text
            assert record["start"] <= excerpt.start and excerpt.end <= record["end"]
            assert not excerpt.text.startswith(('"', "“", " ")) and not excerpt.text.endswith((",", '"', "”", " "))
            assert len(excerpt.text.split()) <= 40


def test_offline_patterns_cover_every_line_with_templates_and_excerpts(demo_book):
    reading, names, records = _demo_records(demo_book)
    mine = [r for r in records if r["speaker"] == "ansel-harrow"]
    result = build_patterns(demo_book.text, reading.paragraphs, mine, "Ansel Harrow", names, HashEmbedder(),
                            open_model("none"))
    rows = pattern_rows(demo_book.slug, "ansel-harrow", "Ansel Harrow", result)
    assert rows and [r["pattern_id"] for r in rows] == list(range(1, len(rows) + 1))
    assert sorted(s for r in rows for s in r["utterance_starts"]) == sorted(r["start"] for r in mine)
    for row in rows:
        assert row["method"] == "heuristic:pattern-v1" and row["error"] is None
        assert row["description"].endswith(".") and len(row["vector"]) == 384
        assert 1 <= len(row["excerpts"]) <= 3
        for text, start in zip(row["excerpts"], row["excerpt_starts"]):
            assert demo_book.text[start:start + len(text)] == text
            assert start in range(min(row["utterance_starts"]), max(r["end"] for r in mine) + 1)


def test_model_describes_patterns_and_a_bad_answer_falls_back_to_the_template(demo_book):
    reading, names, records = _demo_records(demo_book)
    mine = [r for r in records if r["speaker"] == "ansel-harrow"]
    asked: list[list[str]] = []

    def answer(signature, inputs):
        assert signature is DescribePattern and inputs["character"] == "Ansel Harrow"
        asked.append(inputs["lines"])
        if inputs["lines"] == asked[0]:  # the first pattern asked about (calls run at once) never gets a usable answer
            return "garbage"
        return {"description": "Slow, even-voiced authority over the Guild."}

    result = build_patterns(demo_book.text, reading.paragraphs, mine, "Ansel Harrow", names, HashEmbedder(),
                            FakeModel(answer).handle())
    assert len(result.patterns) >= 2
    fell_back = [p for p in result.patterns if p.method == "heuristic:pattern-v1"]
    assert len(fell_back) == 1 and "never parsed" in fell_back[0].error
    first = fell_back[0]
    others = [p for p in result.patterns if p is not first]
    assert first.description.endswith(".") and first.description != "Slow, even-voiced authority over the Guild."
    assert all(p.method == "model:fake" and p.error is None for p in others)
    assert all(p.description == "Slow, even-voiced authority over the Guild." for p in others)
    # the prompt carries a few tagged lines of the character's, not the scene
    assert all(1 <= len(lines) <= 6 and all(re.search(r"\(\w+ \d, \w+\)$", x) for x in lines) for lines in asked)


def test_a_character_without_lines_has_no_patterns(demo_book):
    reading, names, _ = _demo_records(demo_book)
    result = build_patterns(demo_book.text, reading.paragraphs, [], "Corwen Dask", names, HashEmbedder(),
                            open_model("none"))
    assert result.patterns == [] and pattern_rows("b", "c", "C", result) == []


# -- Dagster -------------------------------------------------------------------------

ASSETS = [scene_assets.scenes, scene_assets.utterances, personality_assets.dialogue_records,
          personality_assets.emotion_transitions, personality_assets.personality_patterns]


def _resources():
    from reveriemem_dagster.io_managers import MemoryIOManager
    from reveriemem_dagster.resources import EmbeddingModel, LanguageModel

    return {"lm": LanguageModel(), "embedder": EmbeddingModel(), "memory_io": MemoryIOManager()}


def _register(book):
    from reveriemem.core.registry import write_book as register_book
    from reveriemem_dagster.instance import get_instance, register_partitions

    register_book(book)
    instance = get_instance()
    register_partitions(instance, book)
    return instance


def _materialise(instance, selection, key):
    result = dg.materialize(ASSETS, selection=selection, partition_key=key, instance=instance,
                            resources=_resources())
    assert result.success
    metadata = {}
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization
        metadata[materialization.asset_key.to_user_string()] = {k: v.value for k, v in materialization.metadata.items()}
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    return metadata, checks


def test_the_three_assets_materialise_on_the_demo(demo_book):
    from reveriemem.core.settings import data_home, lancedb_uri
    from reveriemem.core.storage import LanceStore, ParquetStore, PartitionRef
    from reveriemem_dagster.definitions import BOOK_ASSETS, CHARACTER_ASSETS
    from reveriemem_dagster.partitions import pair_key

    assert personality_assets.dialogue_records in BOOK_ASSETS
    assert {personality_assets.emotion_transitions, personality_assets.personality_patterns} <= set(CHARACTER_ASSETS)
    instance = _register(demo_book)
    slug = demo_book.slug
    metadata, checks = _materialise(instance, [scene_assets.scenes, scene_assets.utterances,
                                               personality_assets.dialogue_records], slug)
    assert checks == {"scenes_are_ordered": True, "dialogue_is_annotated": True}
    store = ParquetStore(data_home() / "parquet")
    utterances = store.read("utterances", PartitionRef(slug))
    records = store.read("dialogue_records", PartitionRef(slug))
    assert records.height == utterances.filter(utterances["speaker"].is_not_null()).height > 0
    assert metadata["dialogue_records"]["method"] == HEURISTIC_METHOD
    assert set(records["speaker_name"].unique()) <= {c.name for c in demo_book.characters}

    instance.add_dynamic_partitions("character", ["sherlock-holmes"])
    character_assets = [personality_assets.emotion_transitions, personality_assets.personality_patterns]
    for character in ("mara-quell", "corwen-dask", "sherlock-holmes"):
        metadata, checks = _materialise(instance, character_assets, pair_key(slug, character))
        assert checks == {"excerpts_are_verbatim": True, "speakers_have_patterns": True}, character
        assert metadata["personality_patterns"]["in_book"] is (character != "sherlock-holmes")
    mara = store.read("emotion_transitions", PartitionRef(slug, "mara-quell"))
    assert mara.height == records.filter(records["speaker"] == "mara-quell").height
    assert mara["start"].is_sorted() and mara["step"].to_list() == list(range(1, mara.height + 1))
    lance = LanceStore(lancedb_uri())
    patterns = lance.read("personality_patterns", PartitionRef(slug, "mara-quell"))
    assert patterns.height >= 1 and patterns["method"].str.starts_with("heuristic:").all()
    assert len(patterns["vector"][0]) == 384
    assert lance.read("personality_patterns", PartitionRef(slug, "corwen-dask")).height == 0
    assert lance.read("personality_patterns", PartitionRef(slug, "sherlock-holmes")).height == 0
    assert store.read("emotion_transitions", PartitionRef(slug, "sherlock-holmes")).height == 0


def test_a_book_without_dialogue_builds_empty_layers(tmp_path):
    from reveriemem.core.registry import prepare_book
    from reveriemem.core.settings import data_home
    from reveriemem.core.storage import ParquetStore, PartitionRef
    from reveriemem_dagster.partitions import pair_key

    story = ("CHAPTER I. THE SHORE\n\nAnna walked along the shore at dawn and counted the boats drawn up on the "
             "shingle. Ben was mending nets by the slipway and did not look up when she passed.\n\n"
             "CHAPTER II. THE HILL\n\nBy noon Anna had climbed the hill above the harbour. The wind had dropped, "
             "and far below Ben was still at his nets.\n")
    book_path = write_book(tmp_path, story, name="quiet.txt")
    characters = tmp_path / "quiet.yaml"
    characters.write_text("characters:\n  - name: Anna\n    gender: female\n  - name: Ben\n    gender: male\n",
                          encoding="utf-8")
    book, _ = prepare_book(book_path, characters, slug="quiet")
    instance = _register(book)
    _, checks = _materialise(instance, [scene_assets.scenes, scene_assets.utterances,
                                        personality_assets.dialogue_records], "quiet")
    assert checks["dialogue_is_annotated"]
    assert ParquetStore(data_home() / "parquet").read("dialogue_records", PartitionRef("quiet")).height == 0
    metadata, checks = _materialise(instance, [personality_assets.emotion_transitions,
                                               personality_assets.personality_patterns], pair_key("quiet", "anna"))
    assert all(checks.values())
    assert metadata["personality_patterns"]["patterns"] == 0
    assert metadata["emotion_transitions"]["transitions"] == 0


# -- own lines only ------------------------------------------------------------------

TWO_SPEAKERS = """CHAPTER I. THE INN

The rain had not stopped all evening when the door of the inn opened on the dark.

"Who is there at this hour?" said Mara. "Come in out of the wet."

"A traveller, that is all," said Tobin. "Only a tired traveller."

"Then sit by the fire," said Mara. "Thank you, I will warm my hands first," said Tobin. "You are very kind to strangers tonight."

"We are a harbour town," Mara replied. Tobin shook his head. "Harbours are full of thieves and liars."

"Sit down and eat," said Mara. "I would rather stand by the window," he said.
"""
MARA_WORDS = ["Who is there at this hour?", "Come in out of the wet", "Then sit by the fire", "We are a harbour town",
               "Sit down and eat"]
TOBIN_WORDS = ["A traveller, that is all", "Only a tired traveller", "Thank you, I will warm my hands first",
               "You are very kind to strangers tonight", "Harbours are full of thieves and liars",
               "I would rather stand by the window"]


def _book_records(book):
    reading = BookReading(book)
    scenes = reading.heuristic_scenes()
    scene_of = {p: i + 1 for i, s in enumerate(scenes) for p in s.paragraphs}
    lines = [Line(scene_of[u.paragraph], u.paragraph, u.start, u.end, u.speaker, u.speaker_label, u.text,
                  u.addressees) for u in reading.utterances(scenes)]
    names = {c.slug: c.name for c in book.characters}
    result = annotate_lines(book.text, reading.paragraphs, lines, {i + 1: s.first for i, s in enumerate(scenes)},
                            names, open_model("none"))
    return reading, names, [
        {"book": book.slug, "scene_id": line.scene_id, "paragraph": line.paragraph, "start": line.start,
         "end": line.end, "speaker": line.speaker, "speaker_name": names[line.speaker], "addressees": line.addressees,
         "text": line.text, "emotion": a.emotion, "intensity": a.intensity, "trigger": a.trigger,
         "intent": a.intent, "act": a.act, "method": a.method, "error": a.error}
        for line, a in zip(result.lines, result.annotations)
    ]


def _inn(tmp_path):
    from reveriemem.core.registry import prepare_book

    characters = tmp_path / "inn.yaml"
    characters.write_text("characters:\n  - name: Mara Quell\n    aliases: [Mara]\n    gender: female\n"
                          "  - name: Tobin Reddick\n    aliases: [Tobin]\n    gender: male\n", encoding="utf-8")
    book, _ = prepare_book(write_book(tmp_path, TWO_SPEAKERS, name="inn.txt"), characters, slug="inn")
    return book


def test_a_paragraph_with_two_speakers_gives_each_character_only_their_own_words(tmp_path):
    book = _inn(tmp_path)
    reading, names, records = _book_records(book)
    genders = {c.slug: c.gender for c in book.characters}
    # the attribution gives the mixed paragraphs to Mara: the other speaker's quotes are in her records
    mara_records = [r for r in records if r["speaker"] == "mara-quell"]
    assert any("Thank you" in r["text"] for r in mara_records)
    for slug, own, other in (("mara-quell", MARA_WORDS, TOBIN_WORDS), ("tobin-reddick", TOBIN_WORDS, MARA_WORDS)):
        mine = [r for r in records if r["speaker"] == slug]
        assert mine, slug
        every = [e.text for index, r in enumerate(mine)
                 for e in excerpts_of(book.text, reading.paragraphs[r["paragraph"]], r["start"], r["end"], index,
                                      names[slug], genders[slug], names)]
        assert every and all(any(e in line or line in e for line in own) for e in every), (slug, every)
        assert not any(w in e for e in every for w in other)
        result = build_patterns(book.text, reading.paragraphs, mine, names[slug], names, HashEmbedder(),
                                open_model("none"), gender=genders[slug])
        rows = pattern_rows(book.slug, slug, names[slug], result)
        excerpts = [e for row in rows for e in row["excerpts"]]
        assert excerpts and not any(w in e for e in excerpts for w in other), (slug, excerpts)
        assert not any(w.split(",")[0] in row["description"] for row in rows for w in other if len(w) > 20)
    mara = [e.text for index, r in enumerate(mara_records)
            for e in excerpts_of(book.text, reading.paragraphs[r["paragraph"]], r["start"], r["end"], index,
                                 "Mara Quell", "female", names)]
    assert {"Then sit by the fire", "We are a harbour town", "Sit down and eat"} <= set(mara)


def test_own_quote_spans_follow_tags_beats_and_pronouns():
    names = {"mara": "Mara Quell", "tobin": "Tobin Reddick"}

    def own(text, name, gender):
        paragraph = split_paragraphs(text)[0]
        return [text[a:b].strip('"“”,. ') for a, b in own_quote_spans(text, paragraph, paragraph.start, paragraph.end,
                                                                      name, gender, names)]

    # one speaker throughout: every quote is theirs, whatever pronoun tags continue it
    assert own('"Sit down," said Mara. "And shut the door," she added. "Now."', "Mara Quell", "female") == [
        "Sit down", "And shut the door", "Now"]
    assert own('“Poison,” said Mr. Quell curtly. “One other thing,” he added.', "Tobin Quell", "male") == [
        "Poison", "One other thing"]
    # two speakers: tags, a beat, the narrator, a pronoun of the other gender
    assert own('"Come in," said Mara. "Thank you," said Tobin. "It is cold."', "Mara Quell", "female") == ["Come in"]
    assert own('"Come in," said Mara. "Thank you," said Tobin. "It is cold."', "Tobin Reddick", "male") == [
        "Thank you", "It is cold"]
    assert own('"Come in," Mara said. Tobin shook his head. "I will not."', "Mara Quell", "female") == ["Come in"]
    assert own('"But how," said I. "Ah," Tobin answered. "Thus."', "Tobin Reddick", "male") == ["Ah", "Thus"]
    assert own('"Already?" I remonstrated. "Enough," said Tobin.', "Tobin Reddick", "male") == ["Enough"]
    assert own('"Sit," said Mara. "I would rather stand," he said.', "Mara Quell", "female") == ["Sit"]
    assert own('"Certain, sir," replied the engineer. "We must go." "I will consider," replied Mr. Quell.',
               "Mara Quell", "female") == ["I will consider"]


_FIRST = ["Mara", "Tobin", "Ansel", "Elspeth", "Corwen"]
_LINE_WORDS = st.lists(st.sampled_from(["the", "tide", "ledger", "is", "late", "come", "home", "never", "again",
                                        "north", "quay", "lamp", "why", "now"]), min_size=2, max_size=6)


@settings(max_examples=60, deadline=None)
@given(turns=st.lists(st.tuples(st.integers(0, 1), _LINE_WORDS, st.sampled_from(["said", "asked", "replied"]),
                                st.booleans()), min_size=2, max_size=5),
       pair=st.permutations(_FIRST).map(lambda names: names[:2]))
def test_no_character_keeps_a_tagged_line_of_another_speaker(turns, pair):
    """Any paragraph of named, tagged quotes: a character keeps only the quotes tagged with their name."""
    parts, spoken = [], []
    for who, words, verb, name_first in turns:
        name = pair[who]
        line = " ".join(words).capitalize()
        parts.append(f'"{line}," {name} {verb}.' if name_first else f'"{line}," {verb} {name}.')
        spoken.append((who, line))
    text = " ".join(parts)
    paragraph = split_paragraphs(text)[0]
    names = {n.lower(): f"{n} Vale" for n in _FIRST}
    for who in (0, 1):
        kept = [text[a:b].strip('",') for a, b in own_quote_spans(text, paragraph, paragraph.start, paragraph.end,
                                                                  f"{pair[who]} Vale", None, names)]
        speakers = {w for w, _ in spoken}
        if speakers == {who} or who in speakers:
            assert kept == [line for w, line in spoken if w == who]
        else:
            assert not kept or len(speakers) == 1


def test_every_demo_excerpt_is_a_quote_its_character_speaks(built_demo):
    """On the built demo: every excerpt of every pattern lies inside one quote of an utterance attributed to that
    character, and that quote's own speech tag (read by the dialogue attribution) names no one else."""
    import polars as pl

    from reveriemem.core.registry import load_book
    from reveriemem.core.settings import data_home, lancedb_uri
    from reveriemem.core.storage import LanceStore, ParquetStore, PartitionRef
    from reveriemem.source_to_memory import dialogue

    book = load_book(built_demo)
    reading = BookReading(book)
    utterances = ParquetStore(data_home() / "parquet").read("utterances", PartitionRef(built_demo))
    gender = {c.slug: c.gender for c in book.characters}
    checked = 0
    for character in book.characters:
        rows = LanceStore(lancedb_uri()).read("personality_patterns", PartitionRef(built_demo, character.slug))
        mine = utterances.filter(pl.col("speaker") == character.slug).to_dicts()
        for row in rows.drop("vector").to_dicts():
            for text, start in zip(row["excerpts"], row["excerpt_starts"]):
                assert book.text[start:start + len(text)] == text
                assert any(text in u["text"] for u in mine), (character.slug, text)
                home = next((u for u in mine if u["start"] <= start and start + len(text) <= u["end"]), None)
                assert home is not None, (character.slug, text)
                paragraph = reading.paragraphs[home["paragraph"]]
                spans, _ = dialogue.quote_spans(paragraph)
                quote = next((s for s in spans if s[0] <= start and start + len(text) <= s[1]), None)
                assert quote is not None, f"{character.slug}: {text!r} is not inside one quote"
                alone = dialogue.Utterance(paragraph.index, quote[0], quote[1], "", None, None, "none")
                dialogue._attribute_by_tag(alone, book.text, dialogue.narration_fragments(paragraph, spans), [quote],
                                           reading.mentions_by_paragraph.get(paragraph.index, []), gender, [],
                                           reading.narrator_at.get(paragraph.index))
                assert alone.method == "none" or alone.speaker in (character.slug, None) and (
                    alone.speaker == character.slug or not alone.speaker_label
                    or alone.speaker_label.startswith("?")), (character.slug, text, alone.speaker_label)
                checked += 1
    assert checked >= 10
