"""Boundary precision scoring (eval/boundary.py): passages located by marker, leaks and recall."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eval.boundary import (
    PresenceAnnotationError,
    PresencePassage,
    format_boundary,
    gold_scene_passages,
    load_presence_annotation,
    locate_passages,
    passage_at,
    score_book_boundary,
    score_boundary,
    score_demo_gold,
)
from reveriemem.core.characters import Character
from reveriemem.core.demo import demo_gold
from reveriemem.core.registry import Book

FRAME = "HEADER\n\n"
STORY = ("Ann sat alone and thought of her childhood. "
         "Bob came in and spoke to Ann. "
         "Cal walked on the hill, far away. "
         "Bob wrote to Cal about Ann.")


def tale() -> Book:
    text = FRAME + STORY + "\n\nFOOTER"
    start = len(FRAME)
    characters = [Character("Ann Lee", "ann-lee", ["Ann"]), Character("Bob Roe", "bob-roe", ["Bob"]),
                  Character("Cal Day", "cal-day", ["Cal"])]
    return Book(slug="tale", title="Tale", text=text, body_start=start, body_end=start + len(STORY),
                characters=characters, info={})


def passages() -> list[PresencePassage]:
    return [PresencePassage("p1", "Ann sat alone", ("Ann Lee",), private=True, private_to="Ann Lee"),
            PresencePassage("p2", "Bob came in", ("Ann", "Bob Roe")),
            PresencePassage("p3", "Cal walked", ("Cal Day",)),
            PresencePassage("p4", "Bob wrote", ("Bob Roe",), private=True, private_to=None)]


def at(book: Book, phrase: str) -> int:
    return book.text.index(phrase)


def fact(book: Book, phrase: str, grants: list[tuple[str, str]], offset: int | None = None) -> dict[str, Any]:
    start = at(book, phrase)
    return {"source_start": start, "visibility": [c for c, _ in grants], "routes": [r for _, r in grants],
            "grants": [{"character": c, "route": r, "scene_id": 0, "offset": start if offset is None else offset}
                       for c, r in grants]}


def test_passages_run_from_marker_to_marker_and_the_last_to_the_body_end():
    book = tale()
    located = locate_passages(book, passages())
    assert [(p.start, p.end) for p in located] == [
        (at(book, "Ann sat"), at(book, "Bob came")), (at(book, "Bob came"), at(book, "Cal walked")),
        (at(book, "Cal walked"), at(book, "Bob wrote")), (at(book, "Bob wrote"), book.body_end)]
    assert located[1].present == {"ann-lee", "bob-roe"}  # an alias maps to the slug
    assert located[0].knowers == {"ann-lee"}
    assert located[3].knowers == frozenset() and located[3].present == {"bob-roe"}
    assert passage_at(located, at(book, "spoke")) is located[1]
    assert passage_at(located, book.body_end) is None
    assert passage_at(located, 0) is None


@pytest.mark.parametrize("marker, message", [("Dan rode", "not in the story text"),
                                             ("Ann", "more than once"), ("HEADER", "not in the story text")])
def test_a_missing_or_repeated_marker_is_an_error_naming_the_passage(marker, message):
    bad = [*passages()[:2], PresencePassage("p9", marker, ())]
    with pytest.raises(PresenceAnnotationError, match=f"passage p9.*{message}"):
        locate_passages(tale(), bad)


def test_a_passage_marked_in_the_back_matter_after_the_story_is_left_out():
    book = tale()  # "FOOTER" follows the story: a transcriber's notes the book reader does not read as story
    located = locate_passages(book, [*passages(), PresencePassage("notes", "FOOTER", (), unannotated=True)])
    assert [p.id for p in located] == ["p1", "p2", "p3", "p4"] and located[-1].end == book.body_end
    for bad in ([*passages()[:2], PresencePassage("notes", "FOOTER", (), unannotated=True), passages()[2]],
                [*passages()[:2], PresencePassage("pX", "FOOTER", ("Bob Roe",))]):  # story after it, or annotated
        with pytest.raises(PresenceAnnotationError, match="not in the story text"):
            locate_passages(book, bad)


def test_a_marker_copied_in_a_chapter_openings_small_capitals_is_found(tmp_path: Path):
    from reveriemem.core.registry import prepare_book

    (tmp_path / "tale.txt").write_text("CHAPTER I.\n\nANN sat alone by the fire all evening and thought of home.\n\n"
                                       "Bob came in from the yard and spoke to Ann about the grey mare.\n",
                                       encoding="utf-8")
    (tmp_path / "cast.yaml").write_text("characters:\n  - name: Ann Lee\n    aliases: [Ann]\n"
                                        "    dies: \"ANN sat alone\"\n  - name: Bob Roe\n    aliases: [Bob]\n",
                                        encoding="utf-8")
    book, _ = prepare_book(tmp_path / "tale.txt", tmp_path / "cast.yaml")
    assert book.text.startswith("CHAPTER I.\n\nAnn sat alone")  # read as the name, at the file's offsets
    assert book.character("Ann Lee").death_offset == len("CHAPTER I.\n\n")
    located = locate_passages(book, [PresencePassage("p1", "ANN sat alone by the fire", ("Ann Lee",)),
                                     PresencePassage("p2", "Bob came in", ("Ann Lee", "Bob Roe"))])
    assert [p.start for p in located] == [len("CHAPTER I.\n\n"), book.text.index("Bob came in")]


def test_markers_out_of_story_order_and_unknown_names_are_errors():
    book = tale()
    with pytest.raises(PresenceAnnotationError, match="p2 comes before"):
        locate_passages(book, [PresencePassage("p1", "Cal walked", ()), PresencePassage("p2", "Bob came", ())])
    with pytest.raises(PresenceAnnotationError, match="p1 names 'Dan'"):
        locate_passages(book, [PresencePassage("p1", "Ann sat", ("Dan",))])


def test_an_unannotated_record_leaves_its_stretch_out_of_the_score(tmp_path: Path):
    book = tale()
    lines = [{"id": "p1", "marker": "Ann sat alone", "present": ["Ann Lee"]},
             {"id": "gap", "marker": "Bob came in", "unannotated": True},
             {"id": "p3", "marker": "Cal walked", "present": ["Cal Day"]},
             {"id": "end", "marker": "Bob wrote", "unannotated": True}]
    path = tmp_path / "tale.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
    located = locate_passages(book, load_presence_annotation([path]))
    assert [(p.id, p.start, p.end) for p in located] == [
        ("p1", at(book, "Ann sat"), at(book, "Bob came")), ("p3", at(book, "Cal walked"), at(book, "Bob wrote"))]
    rows = [fact(book, "Bob came", [("cal-day", "observation")]),  # in the gap: a leak if it were scored
            fact(book, "Bob wrote", [("ann-lee", "observation")]),  # after the end: the same
            fact(book, "far away", [("cal-day", "observation")])]
    score = score_book_boundary(book, rows, load_presence_annotation([path]))
    assert (score.facts_scored, score.facts_outside) == (1, 2)
    assert (score.overall.grants, score.overall.leaks, score.overall.recall) == (1, 0, 1.0)


def test_leaks_and_recall_arithmetic_per_character_and_overall():
    book = tale()
    rows = [
        # private narration of Ann: Bob's observation leaks, Ann's own does not; no recall pairs
        fact(book, "Ann sat", [("ann-lee", "direct"), ("bob-roe", "observation")]),
        # Ann and Bob present: Cal's observation leaks, Bob direct is not counted; recall 2/2
        fact(book, "Bob came", [("bob-roe", "direct"), ("ann-lee", "observation"), ("cal-day", "observation")]),
        # Cal present but not granted: recall 0/1; Ann by organisation leaks; a non-focus key is ignored
        fact(book, "far away", [("ann-lee", "organisation"), ("zed", "observation")]),
        # private to nobody: every non-direct grant leaks, even to the present Bob; a direct grant never does
        fact(book, "Bob wrote", [("bob-roe", "observation"), ("cal-day", "direct")]),
    ]
    score = score_book_boundary(book, rows, passages())
    ann, bob, cal = (score.characters[s] for s in ("ann-lee", "bob-roe", "cal-day"))
    assert (ann.grants, ann.leaks, ann.pairs, ann.recalled) == (2, 1, 1, 1)
    assert (bob.grants, bob.leaks, bob.pairs, bob.recalled) == (2, 2, 1, 1)
    assert (cal.grants, cal.leaks, cal.pairs, cal.recalled) == (1, 1, 1, 0)
    overall = score.overall
    assert (overall.grants, overall.leaks) == (5, 4)
    assert overall.leak_rate == pytest.approx(0.8)
    assert overall.recall == pytest.approx(2 / 3)
    assert score.leaks_by_route == {"observation": 3, "organisation": 1}
    assert score.facts_scored == 4 and score.facts_outside == 0
    assert [p.id for p in score.worst_passages()] == ["p1", "p2", "p3", "p4"]  # one leak each, story order
    assert "zed" not in score.characters


def test_a_grant_retold_later_is_judged_where_it_happens():
    book = tale()
    # a fact of p2 granted to Cal at an offset inside p3, where Cal is present: not a leak
    rows = [fact(book, "Bob came", [("bob-roe", "direct"), ("cal-day", "observation")]),
            fact(book, "spoke", [("cal-day", "observation")], offset=at(book, "Cal walked"))]
    rows[0]["grants"][1]["offset"] = at(book, "far away")
    score = score_boundary(rows, locate_passages(book, passages()), ["ann-lee", "bob-roe", "cal-day"])
    assert score.characters["cal-day"].grants == 2 and score.characters["cal-day"].leaks == 0
    assert score.moved_grants == 2
    # a fact before the first marker is outside the annotation
    outside = score_boundary([{"source_start": 0, "visibility": [], "grants": []}],
                             locate_passages(book, passages()), ["ann-lee"])
    assert outside.facts_outside == 1 and outside.facts_scored == 0


def test_worst_passages_and_the_report_name_the_passage_and_its_leaks():
    book = tale()
    rows = [fact(book, "Bob came", [("cal-day", "observation")]),
            fact(book, "spoke", [("cal-day", "observation"), ("ann-lee", "observation")])]
    score = score_book_boundary(book, rows, passages())
    worst = score.worst_passages()
    assert [(p.id, p.leaks, p.grants) for p in worst] == [("p2", 2, 3)]
    lines = format_boundary(score, {c.slug: c.name for c in book.characters})
    assert any(line.startswith("Cal Day") and "100.0%" in line for line in lines)
    assert any("p2" in line and "Cal Day 2" in line for line in lines)
    assert "leaks in private narration: 0; to someone not present: 2" in lines


def test_leaks_in_private_narration_are_told_apart_from_leaks_to_the_absent():
    book = tale()
    rows = [fact(book, "Ann sat alone", [("ann-lee", "direct"), ("bob-roe", "observation")]),
            fact(book, "spoke", [("cal-day", "observation")])]
    score = score_book_boundary(book, rows, passages())
    assert (score.overall.leaks, score.private_leaks) == (2, 1)  # Bob in Ann's private narration; Cal absent
    lines = format_boundary(score, {c.slug: c.name for c in book.characters})
    assert "leaks in private narration: 1; to someone not present: 1" in lines


def test_annotation_files_concatenate_in_order_and_reject_duplicates(tmp_path: Path):
    first, second = tmp_path / "a.part1.jsonl", tmp_path / "a.part2.jsonl"
    records = [{"id": p.id, "chapter": "I", "marker": p.marker, "present": list(p.present), "private": p.private,
                "private_to": p.private_to, "note": ""} for p in passages()]
    first.write_text("\n".join(json.dumps(r) for r in records[:2]) + "\n", encoding="utf-8")
    second.write_text("\n".join(json.dumps(r) for r in records[2:]) + "\n", encoding="utf-8")
    loaded = load_presence_annotation([first, second])
    assert [p.id for p in loaded] == ["p1", "p2", "p3", "p4"]
    assert loaded[0].private and loaded[0].private_to == "Ann Lee" and loaded[1].present == ("Ann", "Bob Roe")
    with pytest.raises(PresenceAnnotationError, match="p1 appears twice"):
        load_presence_annotation([first, first])
    (tmp_path / "bad.jsonl").write_text('{"id": "x1", "marker": "Ann sat"}\n', encoding="utf-8")
    with pytest.raises(PresenceAnnotationError, match="x1"):
        load_presence_annotation([tmp_path / "bad.jsonl"])


@pytest.mark.parametrize("slug, passages", [("around-the-world-in-80-days", 288), ("tom-sawyer", 221)])
def test_the_shipped_presence_annotations_locate_in_their_books(slug, passages):
    from reveriemem.core.demo import shipped_character_file
    from reveriemem.core.registry import prepare_book

    path = Path(__file__).resolve().parents[2] / "shared" / "books" / f"{slug}.txt"
    if not path.exists():
        pytest.skip(f"{path} is not here")
    character_file = shipped_character_file(slug)
    assert character_file is not None
    book, _ = prepare_book(path, character_file)
    files = sorted((Path(__file__).resolve().parents[1] / "eval" / "presence").glob(f"{slug}.*.jsonl"))
    located = locate_passages(book, load_presence_annotation(files))
    assert len(located) == passages and located[-1].end == book.body_end


def test_demo_gold_scenes_are_passages_with_present_characters(demo_book):
    located = locate_passages(demo_book, gold_scene_passages(demo_gold()))
    assert [p.id for p in located] == [str(s["id"]) for s in demo_gold()["scenes"]]
    first = demo_gold()["scenes"][0]["roster"]
    expected = {demo_book.character(n).slug for n, s in first.items() if s in ("present_active", "present_silent")}
    assert located[0].present == expected and located[0].knowers == expected


@pytest.mark.slow
def test_demo_gold_scoring_runs_on_the_built_demo(built_demo):
    from eval.memory import load_book_memory
    from reveriemem.core.registry import load_book

    book = load_book(built_demo)
    rows = load_book_memory(built_demo).facts
    score = score_demo_gold(book, rows, demo_gold())
    assert score.facts_scored == len(rows) > 0
    assert len(score.passages) == len(demo_gold()["scenes"])
    assert score.overall.grants > 0 and 0.0 < score.overall.recall <= 1.0
    assert set(score.characters) == {c.slug for c in book.characters}
