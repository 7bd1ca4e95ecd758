"""The Episodic layer: first-person scene memories, built scene by scene, offline digests and the asset."""

import hashlib
import re

import dagster as dg
import polars as pl
import pytest

from assets import scenes as scene_assets
from assets.episodic import episodes, episodes_presence_check
from dspy_programs.episodic import SummariseSceneAsCharacter
from reveriemem.core.demo import demo_gold
from reveriemem.core.errors import ModelUnavailableError
from reveriemem.core.registry import list_books, write_book
from reveriemem.core.settings import data_home, lancedb_uri
from reveriemem.core.storage import LanceStore, ParquetStore, PartitionRef, frame
from reveriemem.core.text import normalise_space
from reveriemem.models import FakeModel, open_model
from reveriemem.source_to_memory import episodic
from reveriemem.source_to_memory.episodic import DIGEST_METHOD, build_episodes, compact
from reveriemem.source_to_memory.presence import presence_spans
from reveriemem_dagster.definitions import ALL_ASSETS
from reveriemem_dagster.instance import get_instance, register_partitions
from reveriemem_dagster.io_managers import MemoryIOManager
from reveriemem_dagster.partitions import pair_key
from reveriemem_dagster.resources import EmbeddingModel, LanguageModel

MARA, TOBIN, CORWEN = "mara-quell", "tobin-reddick", "corwen-dask"
SCENE_PREPARATION = [scene_assets.scenes, scene_assets.utterances, scene_assets.scene_rosters]
_FRAMES: dict[str, tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]] = {}


def _resources() -> dict:
    return {"lm": LanguageModel(), "embedder": EmbeddingModel(), "memory_io": MemoryIOManager()}


def _materialise_book(book) -> None:
    if book.slug not in list_books():
        write_book(book)
    instance = get_instance()
    register_partitions(instance, book)
    result = dg.materialize(ALL_ASSETS, selection=SCENE_PREPARATION, partition_key=book.slug, instance=instance,
                            resources=_resources())
    assert result.success


def book_frames(book) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The stored `scenes`, `scene_rosters` and `utterances` of a book (offline path), made once per text."""
    key = hashlib.sha256(book.text.encode()).hexdigest()
    if key not in _FRAMES:
        _materialise_book(book)
        part = PartitionRef(book.slug)
        parquet = ParquetStore(data_home() / "parquet")
        scenes = LanceStore(lancedb_uri()).read("scenes", part).drop("vector")
        _FRAMES[key] = (scenes, parquet.read("scene_rosters", part), parquet.read("utterances", part))
    return _FRAMES[key]


def present_ids(rosters: pl.DataFrame, slug: str) -> list[int]:
    mine = rosters.filter((pl.col("character") == slug) & pl.col("status").str.starts_with("present"))
    return sorted(mine["scene_id"].to_list())


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def shingles(text: str, n: int = 8) -> set[tuple[str, ...]]:
    tokens = words(text)
    return {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


def test_offline_digest_remembers_each_present_scene_from_its_own_text(demo_book):
    scenes, rosters, utterances = book_frames(demo_book)
    built = build_episodes(demo_book, scenes, rosters, utterances, MARA, open_model("none"))
    got = [e.scene_id for e in built.episodes]
    assert got == present_ids(rosters, MARA)  # every scene she is present for, in story order
    absent_or_referenced = set(rosters.filter((pl.col("character") == MARA)
                                              & ~pl.col("status").str.starts_with("present"))["scene_id"])
    assert absent_or_referenced and not absent_or_referenced & set(got)
    assert not built.failures
    by_scene = {e.scene_id: e for e in built.episodes}
    for e in built.episodes:
        assert e.method == DIGEST_METHOD and e.error is None
        assert e.summary.scene_understanding and e.summary.my_actions
        p = e.presence
        assert p.scene_start <= p.source_start < p.source_end <= p.scene_end
        source = normalise_space(demo_book.text[p.source_start:p.source_end])
        # the narrated sentences the digest extracts come from this scene's passage only
        narrated = re.sub(r"I said: “[^”]*”", "\n", e.summary.my_actions)
        for sentence in re.split(r"\n|(?<=[.!?]) (?=[A-Z])", narrated):
            assert sentence.strip().rstrip(" …") in source
    # her attributed speech, verbatim
    mine = utterances.filter((pl.col("speaker") == MARA) & (pl.col("scene_id") == got[0]))
    assert mine.height
    first_words = " ".join(mine["text"][0].split()[:8])
    assert first_words in by_scene[got[0]].summary.my_actions
    # narrated actions, including her first-person journal, and an emotion
    assert any("Mara went there the next morning" in e.summary.my_actions for e in built.episodes)
    assert any("I went down to the Guild's oil store" in e.summary.my_actions for e in built.episodes)
    assert any("Mara laughed aloud" in e.summary.my_emotions for e in built.episodes)
    # the setting is part of the understanding and the searchable text holds all three fields
    first = by_scene[got[0]]
    assert first.presence.location and first.presence.location in first.summary.scene_understanding
    assert first.summary.my_actions in first.text and first.summary.scene_understanding in first.text


def _marking_model():
    """A fake whose answers carry the character's first name and a running number."""
    counter = {"n": 0}

    def answer(signature, inputs):
        assert signature is SummariseSceneAsCharacter
        counter["n"] += 1
        who = inputs["character"].split()[0]
        mark = f"{who}-mark-{counter['n']}"
        return {"scene_understanding": f"I remember {mark}.", "my_actions": f"I acted {mark}.",
                "my_emotions": f"I felt {mark}."}

    return FakeModel(answer)


def test_model_builds_scene_by_scene_from_that_scene_and_own_earlier_summaries_only(demo_book):
    scenes, rosters, utterances = book_frames(demo_book)
    model = _marking_model()
    handle = model.handle()
    mara = build_episodes(demo_book, scenes, rosters, utterances, MARA, handle)
    mara_calls = list(model.calls)
    tobin = build_episodes(demo_book, scenes, rosters, utterances, TOBIN, handle)
    tobin_calls = model.calls[len(mara_calls):]

    assert len(mara_calls) == len(mara.episodes) == len(present_ids(rosters, MARA))
    assert all(e.method == "model:fake" and e.error is None for e in mara.episodes)
    text = demo_book.text
    offline = {e.scene_id: e for e in build_episodes(demo_book, scenes, rosters, utterances, MARA,
                                                     open_model("none")).episodes}  # her digests
    by_passage = {normalise_space(c.inputs["passage"]): c for c in mara_calls}
    for index, episode in enumerate(mara.episodes):
        # the passage is her presence in this scene, nothing else
        call = by_passage[normalise_space(text[episode.presence.source_start:episode.presence.source_end])]
        mark = re.search(r"Mara-mark-\d+", episode.summary.scene_understanding).group(0)
        assert episode.summary.my_actions == f"I acted {mark}." and episode.summary.my_emotions == f"I felt {mark}."
        assert call.inputs["character"].startswith("Mara Quell")
        # nothing in the whole prompt comes from after the end of this scene
        prompt = "\n".join(message for _, message in call.messages)
        later_only = shingles(text[episode.presence.scene_end:]) - shingles(text[:episode.presence.scene_end])
        assert not shingles(prompt) & later_only, f"scene {episode.scene_id} saw later text"
        # the reminders are of her own two most recent earlier scenes, oldest first, from their digests
        earlier = call.inputs["earlier_summaries"]
        expected = [e.scene_id for e in mara.episodes[max(0, index - 2):index]]
        assert [int(re.match(r"Scene (\d+):", n).group(1)) for n in earlier] == expected
        for n, scene_id in zip(earlier, expected):
            opening = " ".join(offline[scene_id].summary.scene_understanding.split()[:8])
            assert opening in n and "Mara-mark" not in n  # no scene waits for another's answer
        # the prompt stays lean: the passage plus a bounded overhead (instructions, two clipped reminders)
        reminders = episodic.EARLIER_NOTES * (episodic.NOTE_WORDS + 2)
        assert len(prompt.split()) <= len(call.inputs["passage"].split()) + 400 + reminders
    for call in tobin_calls:
        prompt = "\n".join(message for _, message in call.messages)
        assert "Mara-mark" not in prompt  # never another character's memories
    assert [e.scene_id for e in tobin.episodes] == present_ids(rosters, TOBIN)


def test_a_long_presence_is_summarised_in_parts_that_see_the_running_summary(demo_book, monkeypatch):
    scenes, rosters, utterances = book_frames(demo_book)
    monkeypatch.setattr(episodic, "MAX_PART_WORDS", 300)
    model = _marking_model()
    built = build_episodes(demo_book, scenes, rosters, utterances, MARA, model.handle())
    first = built.episodes[0]
    passage = compact(demo_book.text[first.presence.source_start:first.presence.source_end])
    parts = len(episodic.split_parts(passage, 300))
    assert parts >= 2
    calls = [c for c in model.calls if c.inputs["passage"] in passage]  # the first scene's parts, in order
    assert len(calls) == parts
    assert all(len(c.inputs["passage"].split()) <= 300 for c in calls)
    assert " ".join(c.inputs["passage"] for c in calls).split() == passage.split()  # nothing dropped
    marks = re.findall(r"Mara-mark-\d+", first.summary.scene_understanding)
    assert len(marks) == parts  # the scene's fields join every part, in order
    assert marks[0] in calls[1].inputs["earlier_summaries"][-1]  # part 2 sees part 1
    assert re.findall(r"Mara-mark-\d+", first.summary.my_actions) == marks


def test_malformed_output_for_one_scene_falls_back_and_the_rest_complete(demo_book):
    scenes, rosters, utterances = book_frames(demo_book)

    def answer(signature, inputs):
        # the journal scene: its editorial header ("From the journal of Mara Quell:") is outside her presence,
        # which opens at her first line of the entry, so the scene is recognised by a line she wrote
        if "I went down to the Guild's oil store" in inputs["passage"]:
            return "I refuse to answer in your format."
        return {"scene_understanding": "I was there.", "my_actions": "I watched.", "my_emotions": "I worried."}

    built = build_episodes(demo_book, scenes, rosters, utterances, MARA, FakeModel(answer).handle())
    assert [e.scene_id for e in built.episodes] == present_ids(rosters, MARA)
    failed = [e for e in built.episodes if e.error is not None]
    assert len(failed) == 1 and len(built.failures) == 1
    [bad] = failed
    assert bad.method == f"failed:fake+{DIGEST_METHOD}"
    assert "could not be parsed" in bad.error
    assert "I went down to the Guild's oil store" in bad.summary.my_actions  # the digest stands in
    assert all(e.method == "model:fake" and e.summary.scene_understanding == "I was there."
               for e in built.episodes if e is not bad)


def test_an_unreachable_model_stops_the_build(demo_book):
    scenes, rosters, utterances = book_frames(demo_book)

    def answer(signature, inputs):
        raise ModelUnavailableError("Could not reach the model fake: connection refused")

    with pytest.raises(ModelUnavailableError):
        build_episodes(demo_book, scenes, rosters, utterances, MARA, FakeModel(answer).handle())


def test_a_character_never_present_has_no_episodes_and_the_check_passes(demo_book):
    scenes, rosters, utterances = book_frames(demo_book)
    corwen = rosters.filter(pl.col("character") == CORWEN)
    # Corwen Dask is talked about and called on throughout and never appears, as the demo's gold has it
    gold = [scene["roster"]["Corwen Dask"] for scene in demo_gold()["scenes"]]
    assert gold and not any(status.startswith("present") for status in gold)
    assert corwen.height == scenes.height and present_ids(rosters, CORWEN) == []
    assert (corwen["status"] == "referenced").any()
    assert presence_spans(rosters, CORWEN) == {}
    built = build_episodes(demo_book, scenes, rosters, utterances, CORWEN, open_model("none"))
    assert built.episodes == [] and built.failures == []
    model = _marking_model()
    assert build_episodes(demo_book, scenes, rosters, utterances, CORWEN, model.handle()).episodes == []
    assert model.calls == []  # no scene is asked about at all
    empty = frame([], episodic_schema())
    assert episodes_presence_check(empty, rosters, CORWEN).passed
    # and the check does catch a memory of a scene he was only referenced in
    referenced = corwen.filter(pl.col("status") == "referenced")["scene_id"][0]
    wrong = frame([{"book": demo_book.slug, "character": CORWEN, "scene_id": referenced, "status": "referenced",
                    "scene_understanding": "I was not there.", "text": "I was not there."}], episodic_schema())
    result = episodes_presence_check(wrong, rosters, CORWEN)
    assert not result.passed and result.metadata["unexpected_scenes"].value == [referenced]
    # the asset stores nothing for him and its check passes
    _materialise_book(demo_book)
    instance = get_instance()
    result = dg.materialize(ALL_ASSETS, selection=[episodes], partition_key=pair_key(demo_book.slug, CORWEN),
                            instance=instance, resources=_resources())
    assert result.success and result.get_asset_check_evaluations()[0].passed
    [event] = result.get_asset_materialization_events()
    assert event.event_specific_data.materialization.metadata["in_book"].value is True
    assert LanceStore(lancedb_uri()).read("episodes", PartitionRef(demo_book.slug, CORWEN)).height == 0


def test_an_agent_for_a_character_never_present_refuses_rather_than_crashes(built_demo):
    from reveriemem.inference.offline import REFUSALS
    from reveriemem.inference.session import open_session

    assert LanceStore(lancedb_uri()).read("episodes", PartitionRef(built_demo, CORWEN)).height == 0
    session = open_session(built_demo, "Corwen Dask", lm="none")
    for question in ("What did you see on the harbour wall on Quarter Day?", "Where did Mara fill the Horn Lamp from?"):
        turn = session.agent.respond(question)
        assert turn.reply in REFUSALS and turn.trace.stop_reason == "refusal" and turn.trace.facts == []


def episodic_schema():
    from reveriemem.core.schemas import EPISODES

    return EPISODES


def test_episodes_asset_stores_searchable_memories_per_character(demo_book):
    _materialise_book(demo_book)
    instance = get_instance()
    result = dg.materialize(ALL_ASSETS, selection=[episodes], partition_key=pair_key(demo_book.slug, MARA),
                            instance=instance, resources=_resources())
    assert result.success
    [event] = result.get_asset_materialization_events()
    metadata = {k: v.value for k, v in event.event_specific_data.materialization.metadata.items()}
    [check] = result.get_asset_check_evaluations()
    assert check.check_name == "episodes_match_presence" and check.passed
    rosters = ParquetStore(data_home() / "parquet").read("scene_rosters", PartitionRef(demo_book.slug))
    store = LanceStore(lancedb_uri())
    stored = store.read("episodes", PartitionRef(demo_book.slug, MARA))
    assert sorted(stored["scene_id"].to_list()) == present_ids(rosters, MARA)
    assert metadata["in_book"] is True and metadata["methods"] == {DIGEST_METHOD: stored.height}
    assert metadata["failed_scenes"] == 0 and metadata["model_calls"] == 0
    # a pair whose character is not in the book stores nothing, and its check passes
    instance.add_dynamic_partitions("character", ["sherlock-holmes"])
    result = dg.materialize(ALL_ASSETS, selection=[episodes], instance=instance, resources=_resources(),
                            partition_key=pair_key(demo_book.slug, "sherlock-holmes"))
    assert result.success and result.get_asset_check_evaluations()[0].passed
    [event] = result.get_asset_materialization_events()
    assert event.event_specific_data.materialization.metadata["in_book"].value is False
    assert store.read("episodes", PartitionRef(demo_book.slug, "sherlock-holmes")).height == 0
    # similarity search over her memories finds the night she tested the oil casks. Her Quarter Day note
    # competes for this query ("oil", "Grey Heron", "water") and wins it only if it opens with Vane's speech
    # about the spring oil off the Grey Heron, i.e. if her presence there misses her narrated arrival at dusk
    # ("at dusk Mara found the harbourmaster ... Tobin had come down with her"): a roster error, not a search one.
    last, _, arrival = _last_scene(demo_book, rosters)
    assert presence_spans(rosters, MARA)[last][0][0] <= arrival
    query = EmbeddingModel().embedder().embed(["oil store casks, water, heron"])[0]
    hits = (store.open("episodes").search(query).where(f"character = '{MARA}'", prefilter=True).limit(3)
            .to_list())
    assert hits and {h["character"] for h in hits} == {MARA}
    assert "oil store" in hits[0]["my_actions"]


def test_a_long_passage_is_focused_on_the_characters_paragraphs_within_the_budget(demo_book):
    from reveriemem.core.text import split_paragraphs
    from reveriemem.source_to_memory.episodic import focus_passage

    mara = demo_book.character("Mara Quell")
    start, end = demo_book.body_start, demo_book.text.index("CHAPTER II.")  # chapter I: Mara and Tobin throughout
    passage = focus_passage(demo_book, mara, [(start, end)], budget=400)
    kept = [p for p in passage.split("\n\n") if p != "[...]"]
    assert sum(len(p.split()) for p in kept) <= 400 and "[...]" in passage
    source = [normalise_space(p.text) for p in split_paragraphs(demo_book.text, start, end)]
    assert all(p in source for p in kept)  # verbatim paragraphs of the passage, nothing from outside
    assert [source.index(p) for p in kept] == sorted(source.index(p) for p in kept)  # in story order
    assert any("Mara" in p for p in kept[1:-1])  # her paragraphs before the rest
    assert focus_passage(demo_book, mara, [(start, end)], budget=100_000).count("[...]") == 0


# -- every sentence from the character's presence spans (issue 13) -------------------------------

ARRIVAL = "The council sat at noon and rose at three, and at dusk Mara found the harbourmaster"
BEFORE_DAWN = ("Elspeth Vane slept badly", "walked out along the harbour wall", "Grey Heron swung to her anchor",
               "Go on, then, Captain Dask")


def _note_text(episode) -> str:
    return " ".join((episode.summary.scene_understanding, episode.summary.my_actions, episode.summary.my_emotions))


def _with_presence(rosters: pl.DataFrame, slug: str, scene_id: int, spans: list[tuple[int, int]],
                   rows: bool = False) -> pl.DataFrame:
    """The rosters with the character's presence in one scene replaced by `spans`.

    As the rosters write it: one row whose `presence_spans` are `spans` and whose present_start/end are
    their bounds; or, with `rows`, one row per span (each its own `presence_spans`).
    """
    mine = (pl.col("character") == slug) & (pl.col("scene_id") == scene_id)
    row = rosters.filter(mine).row(0, named=True)
    if rows:
        new = [{**row, "present_start": a, "present_end": b, "presence_spans": [[a, b]]} for a, b in spans]
    else:
        new = [{**row, "present_start": min(a for a, _ in spans), "present_end": max(b for _, b in spans),
                "presence_spans": [[a, b] for a, b in spans]}]
    return pl.concat([rosters.filter(~mine), pl.DataFrame(new, schema=rosters.schema)]).sort("scene_id", "character")


def _last_scene(book, rosters: pl.DataFrame) -> tuple[int, int, int]:
    """The last scene's id, its end, and the offset of Mara's arrival at dusk."""
    last = int(rosters["scene_id"].max())
    end = int(rosters.filter(pl.col("scene_id") == last)["scene_end"][0])
    return last, end, book.text.index(ARRIVAL)


def test_presence_spans_read_the_roster_rows_in_story_order(demo_book):
    scenes, rosters, _ = book_frames(demo_book)
    last, end, arrival = _last_scene(demo_book, rosters)
    spans = presence_spans(rosters, MARA)
    assert list(spans) == present_ids(rosters, MARA)
    assert all(a < b for found in spans.values() for a, b in found)
    for rows in (False, True):  # in one row's presence_spans or over several rows
        moved = _with_presence(rosters, MARA, last, [(arrival + 500, end), (arrival, arrival + 600)], rows=rows)
        assert presence_spans(moved, MARA)[last] == [(arrival, end)]  # sorted, overlaps merged
    assert presence_spans(rosters, "nobody") == {}


def test_presence_spans_keep_the_gaps_and_older_rows_fall_back_to_their_bounds(demo_book):
    scenes, rosters, _ = book_frames(demo_book)
    last, end, arrival = _last_scene(demo_book, rosters)
    assert "presence_spans" in rosters.columns
    away = _with_presence(rosters, MARA, last, [(arrival, arrival + 300), (arrival + 900, end)])
    assert presence_spans(away, MARA)[last] == [(arrival, arrival + 300), (arrival + 900, end)]
    [presence] = [p for p in episodic.present_scenes(scenes, away, MARA) if p.scene_id == last]
    assert presence.spans == ((arrival, arrival + 300), (arrival + 900, end))
    assert (presence.source_start, presence.source_end) == (arrival, end)
    # rows without the column (older tables, `character_scenes`) or with it empty: present_start..present_end
    older = away.drop("presence_spans")
    assert presence_spans(older, MARA)[last] == [(arrival, end)]
    emptied = away.with_columns(presence_spans=pl.lit([], dtype=rosters.schema["presence_spans"]))
    assert presence_spans(emptied, MARA) == presence_spans(older, MARA)
    # and a present row with no offsets at all stands for the whole scene
    bare = older.with_columns(present_start=pl.lit(None, pl.Int64), present_end=pl.lit(None, pl.Int64))
    scene_start = int(rosters.filter(pl.col("scene_id") == last)["scene_start"][0])
    assert presence_spans(bare, MARA)[last] == [(scene_start, end)]


def test_a_note_starts_where_presence_starts_and_holds_nothing_from_before(demo_book):
    scenes, rosters, utterances = book_frames(demo_book)
    last, end, arrival = _last_scene(demo_book, rosters)
    late = _with_presence(rosters, MARA, last, [(arrival, end)])
    offline = build_episodes(demo_book, scenes, late, utterances, MARA, open_model("none")).episodes[-1]
    model = _marking_model()
    build_episodes(demo_book, scenes, late, utterances, MARA, model.handle())
    assert offline.presence.source_start == arrival and offline.presence.scene_start < arrival
    note = _note_text(offline)
    assert ARRIVAL in note and not any(phrase in note for phrase in BEFORE_DAWN)
    [passage] = [c.inputs["passage"] for c in model.calls if ARRIVAL in c.inputs["passage"]]  # the last scene's
    assert passage.startswith(ARRIVAL) and not any(phrase in passage for phrase in BEFORE_DAWN)
    assert offline.row(demo_book.slug, MARA)["source_start"] == arrival


def test_a_character_who_leaves_and_returns_remembers_only_the_stretches_they_were_there(demo_book):
    scenes, rosters, utterances = book_frames(demo_book)
    last, end, arrival = _last_scene(demo_book, rosters)
    gap_start = demo_book.text.index('"Master Harrow stood beside him')
    gap_end = demo_book.text.index("She did not say what she had seen")
    away = _with_presence(rosters, MARA, last, [(arrival, gap_start), (gap_end, end)])
    model = _marking_model()
    build_episodes(demo_book, scenes, away, utterances, MARA, model.handle())
    passage = next(c.inputs["passage"] for c in model.calls if c.inputs["passage"].startswith(ARRIVAL))  # the last scene
    assert "[...]" in passage and "withdrawn my complaint" not in passage and "Captain Dask's name" not in passage
    assert passage.split("\n\n")[0].startswith(ARRIVAL) and "keeping a lamp the other could not see" in passage
    offline = build_episodes(demo_book, scenes, away, utterances, MARA, open_model("none")).episodes[-1]
    assert "withdrawn my complaint" not in _note_text(offline)
    assert "And the Grey Heron?" not in _note_text(offline)  # her line in the gap is not remembered either
    assert "Master Harrow told me he would." in offline.summary.my_actions  # her line before it is
    assert (offline.presence.source_start, offline.presence.source_end) == (arrival, end)


def test_maras_note_of_quarter_day_opens_at_dusk_not_with_vanes_walk_before_dawn(demo_book):
    scenes, rosters, utterances = book_frames(demo_book)
    last, _, arrival = _last_scene(demo_book, rosters)
    built = build_episodes(demo_book, scenes, rosters, utterances, MARA, open_model("none"))
    episode = next(e for e in built.episodes if e.scene_id == last)
    note = _note_text(episode)
    assert not any(phrase in note for phrase in BEFORE_DAWN), note
    assert episode.presence.source_start >= arrival


def test_no_episode_holds_a_fact_outside_its_characters_boundary(built_demo):
    """A note is made of the character's presence passages, less what the Semantic layer gives to nobody
    there but another (a thought, backstory nobody present perceives): nothing in it is outside F_c."""
    from reveriemem.core.errors import StorageError
    from reveriemem.core.registry import load_book
    from reveriemem.core.storage import MemoryStore, PartitionRef

    store = MemoryStore.for_home()
    facts = store.read("facts", PartitionRef(built_demo)).drop("vector").to_dicts()
    assert any(not f["visibility"] for f in facts)  # the demo has sentences known to nobody

    def plain(text: str) -> str:
        return " ".join(text.split())

    for character in load_book(built_demo).characters:
        try:
            notes = plain(" ".join(store.read("episodes", PartitionRef(built_demo, character.slug))["text"]))
        except StorageError:
            continue  # no scene of this character's
        outside = [f["fact_id"] for f in facts if len(plain(f["text"])) >= 40
                   and character.slug not in f["visibility"] and plain(f["text"]) in notes]
        assert outside == [], character.slug
