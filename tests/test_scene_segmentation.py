"""Offline scene segmentation: headings and contents are not story text, scenes
split where the place or time changes, and settings name only marked places."""

from __future__ import annotations

from pathlib import Path

import pytest

from reveriemem.core.text import split_paragraphs
from reveriemem.source_to_memory.scenes import candidate_spans, heading_flags


def _words(n: int, word: str = "word") -> str:
    return " ".join([word] * n)


def test_a_title_line_under_a_numbered_heading_is_part_of_the_heading():
    text = "\n\n".join(["11", "What I Heard in the Apple Barrel", "“NO, not I,” said Silver. " + _words(80),
                       "12", "“Pieces of Eight”", _words(80)])
    spans = candidate_spans(split_paragraphs(text))
    assert [s.chapter_title for s in spans] == ["11 What I Heard in the Apple Barrel", "12 “Pieces of Eight”"]
    # a shout in capitals right under a heading stays speech
    flags = heading_flags(split_paragraphs("\n\n".join(["CHAPTER I", "“TOM!”", _words(80)])))
    assert flags == [True, False, False]


@pytest.mark.parametrize("headings", [["Chapter One", "Chapter Two", "Chapter Twenty-One"],
                                      ["# Chapter 1", "## Chapter 2", "### Chapter Three"]])
def test_chapters_numbered_in_words_or_marked_as_markdown_are_chapters(headings):
    text = "\n\n".join(part for heading in headings for part in (heading, "Ann rowed across. " + _words(80)))
    spans = candidate_spans(split_paragraphs(text))
    assert [s.chapter for s in spans] == [1, 2, 3]
    assert [s.chapter_title for s in spans] == headings
    # a number in words that runs on into a sentence is prose
    prose = "\n\n".join(["Chapter One", "Ann rowed. " + _words(80), "Part one of the plan went smoothly.",
                          "Chapter nineteen was the last he wrote before he died.", _words(80)])
    assert [s.chapter for s in candidate_spans(split_paragraphs(prose))] == [1]


def test_a_break_before_a_short_run_stays_when_a_change_of_place_follows_it():
    """"* * *", then 45 words at the bakery, then "Will came in through the back door": the break opens the bakery
    scene even though the change of place right after it opens too short a run to be kept on its own."""
    from reveriemem.source_to_memory.scenes import heuristic_boundaries

    text = "\n\n".join(["CHAPTER I", "Ann rowed across the harbour. " + _words(330), "* * *",
                       "On the other side of the town the bakery was already hot. " + _words(35),
                       "Will came in through the back door without knocking. " + _words(250)])
    spans = candidate_spans(split_paragraphs(text))
    assert [s.boundary for s in spans][1] == "break"
    assert heuristic_boundaries(spans)[1] is True


def test_a_sentence_opening_with_book_or_part_is_prose():
    paragraphs = split_paragraphs("\n\n".join([
        "CHAPTER I", _words(80), "Book and news dealers, sellers of edibles, drinkables, and cigars, walked the aisles.",
        _words(40),
    ]))
    assert heading_flags(paragraphs) == [True, False, False, False]
    assert len({s.chapter for s in candidate_spans(paragraphs)}) == 1


def test_contents_blocks_and_lists_of_illustrations_are_front_matter():
    contents = "\n".join(f"     {n}.  THE {w} OF THE STORY . . . . . . . .  {10 * n}" for n, w in
                         enumerate(["BEGINNING", "MIDDLE", "TURN", "END", "AFTERMATH", "RETURN", "CODA"], 1))
    illustrations = "\n\n".join(["ILLUSTRATIONS", "Tom at Home", "Aunt Polly Beguiled", "A Good Opportunity",
                                 "Who's Afraid", "Late Home"] * 5)
    text = "\n\n".join(["CONTENTS", "PART ONE\n     The Beginning", contents, "CHAPTER XXXV. The End", illustrations,
                        "PART ONE--The Beginning", "1", "The Old Sea-dog", "SQUIRE TRELAWNEY said. " + _words(100)])
    spans = candidate_spans(split_paragraphs(text))
    assert len(spans) == 1
    assert spans[0].chapter_title == "1 The Old Sea-dog" and spans[0].words == 103


def _shared_book(slug: str):
    from reveriemem.core.registry import prepare_book
    from reveriemem.source_to_memory.reading import BookReading
    from tests.conftest import SHARED_BOOKS

    path = SHARED_BOOKS / f"{slug}.txt"
    if not path.exists():
        pytest.skip("the shared books folder is not beside the checkout")
    characters = Path(__file__).resolve().parents[1] / "reveriemem" / "data" / "characters" / f"{slug}.yaml"
    book, _ = prepare_book(path, characters)
    return BookReading(book)


def test_no_evidence_unit_of_treasure_island_is_a_chapter_title_or_contents_line():
    from reveriemem.source_to_memory.facts import evidence_units

    reading = _shared_book("treasure-island")
    scenes = reading.heuristic_scenes()
    titles = {s.chapter_title.split(" ", 1)[1] for s in scenes if " " in s.chapter_title}
    assert "What I Heard in the Apple Barrel" in titles and len({s.chapter for s in scenes}) == 34
    triples = [(i, reading.paragraphs[s.first].start, reading.paragraphs[s.last].end)
               for i, s in enumerate(scenes, start=1)]
    units = evidence_units(reading.book, triples, {}, headings=reading.heading_spans)
    assert units
    # neither the title under "11" nor the contents line "11.  WHAT I HEARD IN THE APPLE BARREL . . .  70"
    assert not [u.evidence for u in units if u.evidence in titles or "HEARD IN THE APPLE BARREL" in u.evidence]
    # headings passed in are skipped even inside a scene's range
    first = triples[0]
    heading = next((a, b) for a, b in reading.heading_spans if a < first[1])
    inside = evidence_units(reading.book, [(1, heading[0], first[2])], {}, headings=[heading])
    assert inside and all(u.evidence_start >= heading[1] for u in inside)


def test_scenes_split_where_the_party_travels_or_time_moves_on():
    from reveriemem.source_to_memory.scenes import heuristic_boundaries, merge_spans

    text = "\n\n".join([
        "CHAPTER I.", _words(350),
        "“Get your hat,” he said. A minute later we were both in a hansom, driving for the Brixton Road.",
        "It was a foggy, cloudy morning at the house. " + _words(350),
        "He went to the window and looked out. " + _words(30),  # across the room: the scene goes on
        "He was now alone in the car, and the Elder reminded him that, two years after, a man came. "
        + _words(30),  # a time told, not a time shift
        "Still more shaken was he next morning. " + _words(350),
    ])
    paragraphs = split_paragraphs(text)
    spans = candidate_spans(paragraphs)
    assert [(s.boundary, s.cue) for s in spans] == [
        ("start", ""), ("place", "we were both in a hansom"), ("time", "next morning")]
    assert len(merge_spans(spans, heuristic_boundaries(spans))) == 3
    # a shift that would leave a fragment is not kept offline
    short = candidate_spans(split_paragraphs("\n\n".join(["CHAPTER I.", _words(100),
                                                          "Still more shaken was he next morning. " + _words(400)])))
    assert heuristic_boundaries(short) == [True, False]


@pytest.mark.parametrize("opening, cue", [
    ("Eleven days later, on the 3rd of December, the steamer entered the bay.", "Eleven days later"),
    ("On the ninth day after leaving Yokohama, the ship had crossed half the globe.", "On the ninth day"),
    ("It happened also, on the 23rd of November, that the servant made a discovery.", "on the 23rd of November"),
    ("On that very day, however, he met the servant face to face on the deck.", "On that very day"),
    ("When the three men had gone out to their tasks, the doctor asked for the diaries.",
     "When the three men had gone"),
    ("He had said, on the ninth of the month, that he would come.", ""),  # a time told inside the story
])
def test_a_count_of_days_an_ordinal_day_or_a_date_opens_a_candidate_span(opening, cue):
    paragraphs = split_paragraphs("\n\n".join(["CHAPTER I.", _words(80), opening + " " + _words(80)]))
    spans = candidate_spans(paragraphs)
    assert [s.cue for s in spans[1:]] == ([cue] if cue else [])


@pytest.mark.parametrize("opening, location", [
    ("We met next day and inspected the rooms at No. 221B, Baker Street.", "Baker Street"),
    ("He would never kneel in His presence again.", ""),
    ("All the evidence pointed at Sherlock Holmes.", ""),
    ("The pilgrims saw nothing of the Land for a day.", ""),
    ("I was standing at the Criterion Bar, when some one tapped me on the shoulder.", "the Criterion Bar"),
    ("“We shall meet at Paris,” he said, and sat down in the sitting-room.", "the sitting-room"),
    ("He went on in every way--the house was empty.", ""),
    ("Bad weather in May kept them at home.", ""),
    ("We met next day and inspected the rooms at No. 221B, [5] Baker Street.", "Baker Street"),  # a note number
    ("Victoria is a town in the island of Hong Kong. We landed at the quay.", "the quay"),  # a lecture: nobody there
    ("I walked with Mrs. Westenra in the garden.", "the garden"),  # a title's stop ends no sentence
    ("The papers had long accounts of the affair in America. Holmes read them at breakfast.", ""),  # nobody there
    ("He slept well in that city, and woke late.", ""),  # a place told elsewhere
    ("He stood in the Honourable M. Batulcar's troupe.", ""),  # a title, not a place
    ("I sat down to wait. " * 70 + "At last we reached the stockade.", ""),  # told long after the opening
])
def test_offline_locations_are_marked_places_or_empty(opening: str, location: str):
    from reveriemem.source_to_memory.reading import heuristic_setting

    assert heuristic_setting(opening, ["Sherlock Holmes", "Holmes", "Doctor Watson"]).location == location
