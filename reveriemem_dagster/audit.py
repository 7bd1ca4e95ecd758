"""What `reveriemem chapters` shows: a book's chapters with the numbers `--as-of-chapter` takes.

A built book's chapters are those of its stored scenes (the `chapter` column
that `cut_offset` reads), each with the scene ids it holds and the offset
`--as-of-chapter N` cuts at, asked of `cut_offset` itself. A book not built
yet gets the same numbering from the same detection the scene segmenter
fills that column with (`BookReading.candidates`), without scene ids or cut.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from reveriemem.core.registry import Book
from reveriemem.core.storage import MemoryStore, PartitionRef
from reveriemem.core.text import normalise_space
from reveriemem.inference.memory_reader import cut_offset
from reveriemem.source_to_memory.reading import BookReading
from reveriemem.source_to_memory.scenes import heading_flags


@dataclass
class Chapter:
    number: int  # what `--as-of-chapter` takes
    heading: str  # the heading lines before its first paragraph, as in the text; "" when none precede it
    start: int  # offset of the chapter's first prose paragraph
    end: int  # offset where its prose ends
    scene_ids: list[int] = field(default_factory=list)  # empty when the book is not built
    cut: int | None = None  # the offset `--as-of-chapter number` bounds memory at; None when not built


def list_chapters(book: Book, store: MemoryStore | None = None) -> list[Chapter]:
    """The chapters of `book`, from its stored scenes when it is built, else from the text."""
    store = store or MemoryStore.for_home()
    reading = BookReading(book)
    headings = _Headings(reading)
    if store.manifest(book.slug) is not None and store.stored_rows("scenes", PartitionRef(book.slug)):
        return _built_chapters(book.slug, store, headings)
    return _detected_chapters(reading, headings)


def _built_chapters(slug: str, store: MemoryStore, headings: _Headings) -> list[Chapter]:
    scenes = store.read("scenes", PartitionRef(slug)).sort("scene_id")
    chapters: dict[int, Chapter] = {}
    columns = ["scene_id", "chapter", "chapter_title", "start", "end", "first_paragraph"]
    for row in scenes.select(columns).iter_rows(named=True):
        number = int(row["chapter"])
        heading = headings.before(int(row["first_paragraph"])) or row["chapter_title"] or ""
        chapter = chapters.setdefault(number, Chapter(number, heading, int(row["start"]), int(row["end"])))
        chapter.start, chapter.end = min(chapter.start, int(row["start"])), max(chapter.end, int(row["end"]))
        chapter.scene_ids.append(int(row["scene_id"]))
    for chapter in chapters.values():
        chapter.cut = cut_offset(slug, chapter=chapter.number, uri=store.uri)
    return [chapters[n] for n in sorted(chapters)]


def _detected_chapters(reading: BookReading, headings: _Headings) -> list[Chapter]:
    by_index = {p.index: p for p in reading.paragraphs}
    chapters: dict[int, Chapter] = {}
    for span in reading.candidates:
        start, end = by_index[span.first].start, by_index[span.last].end
        heading = headings.before(span.first) or span.chapter_title
        chapter = chapters.setdefault(span.chapter, Chapter(span.chapter, heading, start, end))
        chapter.start, chapter.end = min(chapter.start, start), max(chapter.end, end)
    return [chapters[n] for n in sorted(chapters)]


class _Headings:
    """The segmenter's own heading test over a book's paragraphs, computed once."""

    def __init__(self, reading: BookReading):
        self.paragraphs = reading.paragraphs
        self.flags = heading_flags(self.paragraphs)

    def before(self, first_paragraph: int) -> str:
        """The run of heading paragraphs just before paragraph `first_paragraph`, joined as in the text,
        back to the first that is not a title: a contents page (more than `TITLE_LINES` lines) or a
        sentence of prose (a transcriber's note) ends it."""
        if not self.paragraphs:
            return ""
        position = first_paragraph - self.paragraphs[0].index - 1
        run: list[str] = []
        while 0 <= position < len(self.paragraphs) and self.flags[position]:
            text = self.paragraphs[position].text
            if run and not _title_like(text):
                break
            run.append(normalise_space(text))
            position -= 1
        return " ".join(reversed(run))


TITLE_LINES = 3  # a chapter's heading is a few short lines; a contents page is many
_PROSE_SENTENCE = re.compile(r"^(?:\S+\s+){8,}\S*[.!?][\"”’']?$")


def _title_like(text: str) -> bool:
    """A heading paragraph that may belong to a chapter's title: a few lines, not a sentence of prose."""
    lines = [line for line in text.splitlines() if line.strip()]
    return len(lines) <= TITLE_LINES and _PROSE_SENTENCE.match(normalise_space(text)) is None


def missing_numbers(chapters: list[Chapter]) -> list[int]:
    """Chapter numbers below the last listed one that hold no scene: heading runs the segmenter found
    with almost no prose after them (a title page, a table of contents, a part title), skipped as front matter."""
    listed = {c.number for c in chapters}
    return [n for n in range(1, max(listed, default=0)) if n not in listed]


def format_chapters(chapters: list[Chapter]) -> list[str]:
    """Tab-separated lines, a header first: number, start, end, cut, scenes, heading."""
    lines = ["chapter\tstart\tend\tas-of cut\tscenes\theading"]
    for c in chapters:
        scenes = _ids(c.scene_ids) or "-"
        cut = "-" if c.cut is None else str(c.cut)
        lines.append(f"{c.number}\t{c.start}\t{c.end}\t{cut}\t{scenes}\t{c.heading or '(before the first heading)'}")
    return lines


def _ids(ids: list[int]) -> str:
    if not ids:
        return ""
    if ids == list(range(ids[0], ids[-1] + 1)):
        return str(ids[0]) if len(ids) == 1 else f"{ids[0]}-{ids[-1]}"
    return ",".join(str(i) for i in ids)
