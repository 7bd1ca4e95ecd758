"""The deterministic reading of a book: paragraphs, mentions, narrator spans,
dialogue, candidate spans, scenes and rosters. Plain functions over a
registered `Book`; the Dagster assets and the LLM steps build on these."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from reveriemem.core.registry import Book
from reveriemem.core.text import Paragraph, normalise_space, split_paragraphs
from reveriemem.source_to_memory.deaths import death_offsets
from reveriemem.source_to_memory.dialogue import ATTRIBUTION_VERSION, Utterance, attribute_dialogue
from reveriemem.source_to_memory.mentions import MATCHER_VERSION, AliasMatcher, Mention
from reveriemem.source_to_memory.rosters import ROSTER_VERSION, RosterEvidence, presence_bounds, scene_evidence
from reveriemem.source_to_memory.scenes import (
    SEGMENTER_VERSION,
    Span,
    candidate_spans,
    heuristic_boundaries,
    merge_spans,
    split_long,
)

HEURISTIC_METHOD = f"heuristic:{SEGMENTER_VERSION}"
ROSTER_METHOD = f"heuristic:{ROSTER_VERSION}+{ATTRIBUTION_VERSION}+{MATCHER_VERSION}"
MAX_SCENE_WORDS = 6000


class BookReading:
    """Lazily computed deterministic analyses of one book."""

    def __init__(self, book: Book):
        self.book = book

    @cached_property
    def paragraphs(self) -> list[Paragraph]:
        return split_paragraphs(self.book.text, self.book.body_start, self.book.body_end)

    @cached_property
    def mentions_by_paragraph(self) -> dict[int, list[Mention]]:
        matcher = AliasMatcher(self.book.characters)
        out: dict[int, list[Mention]] = {}
        for paragraph in self.paragraphs:
            found = matcher.find(self.book.text, paragraph.start, paragraph.end)
            if found:
                out[paragraph.index] = found
        return out

    @cached_property
    def narrator_at(self) -> dict[int, str]:
        """Paragraph index -> slug of the first-person narrator whose span covers it."""
        spans = [(a, b, c.slug) for c in self.book.characters for a, b in c.narrator_spans]
        out: dict[int, str] = {}
        for paragraph in self.paragraphs:
            for a, b, slug in spans:
                if a <= paragraph.start < b:
                    out[paragraph.index] = slug
                    break
        return out

    @cached_property
    def deaths(self) -> dict[str, int]:
        """Character slug -> offset of their death (declared or plainly narrated)."""
        return death_offsets(self.book.text, self.book.characters, self.book.body_start, self.book.body_end)

    @cached_property
    def candidates(self) -> list[Span]:
        return candidate_spans(self.paragraphs)

    @cached_property
    def heading_spans(self) -> list[tuple[int, int]]:
        """Offsets of the paragraphs outside every candidate span: headings, chapter titles,
        tables of contents, front matter and section breaks. No evidence unit is made of them."""
        in_story = {index for span in self.candidates for index in span.paragraphs}
        return [(p.start, p.end) for p in self.paragraphs if p.index not in in_story]

    def heuristic_scenes(self) -> list[Span]:
        keep = heuristic_boundaries(self.candidates)
        return split_long(merge_spans(self.candidates, keep), self.paragraphs, MAX_SCENE_WORDS)

    def utterances(self, scenes: Sequence[Span]) -> list[Utterance]:
        scene_of = {p: i for i, s in enumerate(scenes) for p in s.paragraphs}
        in_scene = [self.paragraphs[p] for s in scenes for p in s.paragraphs]
        return attribute_dialogue(
            self.book.text, in_scene, self.mentions_by_paragraph, self.book.characters,
            self.narrator_at, scene_of,
        )

    def roster_evidence(self, scenes: Sequence[Span]) -> list[dict[str, RosterEvidence]]:
        by_paragraph = {u.paragraph: u for u in self.utterances(scenes)}
        slugs = [c.slug for c in self.book.characters]
        return [
            scene_evidence(self.book.text, self.paragraphs, s.paragraphs, self.mentions_by_paragraph,
                           by_paragraph, self.narrator_at, slugs, deaths=self.deaths)
            for s in scenes
        ]


_PLACE_RE = re.compile(
    r"\b(?:in|at|into|inside|on board|aboard|outside)\s+((?:the\s+)?(?:[A-Z][\w'’-]+(?:\s+(?:of\s+)?[A-Z][\w'’-]+)*"
    r"|[a-z]+\s+(?:room|hall|office|house|street|station|laboratory|ship|inn|church|garden|road|harbour|"
    r"quay|wharf|court|castle|cabin|deck|study|parlour|kitchen|square|lane|yard|shop|bank|club|asylum|"
    r"hotel|school|cave|island|stockade|river|forest|wood|chapel|cellar|library)))"
)
_TIME_RE = re.compile(
    r"\b((?:early\s+|late\s+)?(?:next\s+|that\s+|this\s+|the\s+following\s+)?(?:morning|evening|night|"
    r"afternoon|dawn|dusk|midnight|noon|sunset|sunrise|daybreak)|\d{1,2}\s+(?:January|February|March|April|"
    r"May|June|July|August|September|October|November|December)|(?:January|February|March|April|May|June|"
    r"July|August|September|October|November|December)\s+\d{1,2}|\b1[6-9]\d\d\b)",
    re.IGNORECASE,
)
_SKIP_PLACES = {"I", "The", "He", "She", "It", "We", "They", "Mr", "Mrs", "Miss", "Dr"}


@dataclass
class Setting:
    location: str
    time: str
    atmosphere: str


def heuristic_setting(text: str) -> Setting:
    """A first guess at a scene's place and time from its opening; atmosphere needs a model."""
    opening = normalise_space(text[:2500])
    location = ""
    for match in _PLACE_RE.finditer(opening):
        candidate = match.group(1)
        if candidate.split()[0] not in _SKIP_PLACES:
            location = candidate
            break
    time_match = _TIME_RE.search(opening)
    return Setting(location=location, time=time_match.group(1) if time_match else "", atmosphere="")


def presence_offsets(reading: BookReading, record: RosterEvidence, scene: Span) -> tuple[int | None, int | None]:
    """Source offsets from the start of a character's first presence span to the end of their last."""
    return presence_bounds(record)
