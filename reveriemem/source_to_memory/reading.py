"""The deterministic reading of a book: paragraphs, mentions, narrator spans,
dialogue, candidate spans, scenes and rosters. Plain functions over a
registered `Book`; the Dagster assets and the LLM steps build on these."""

from __future__ import annotations

import bisect
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cached_property

from reveriemem.core.registry import Book
from reveriemem.core.text import FUNCTION_WORDS, Paragraph, normalise_space, sentence_runs, split_paragraphs
from reveriemem.source_to_memory.deaths import death_offsets
from reveriemem.source_to_memory.dialogue import ATTRIBUTION_VERSION, Utterance, attribute_dialogue
from reveriemem.source_to_memory.mentions import MATCHER_VERSION, AliasMatcher, Mention
from reveriemem.source_to_memory.rosters import ROSTER_VERSION, RosterEvidence, presence_bounds, scene_evidence
from reveriemem.source_to_memory.scenes import (
    SEGMENTER_VERSION,
    SHIFT_BOUNDARIES,
    Span,
    candidate_spans,
    heading_flags,
    heuristic_boundaries,
    inner_cues,
    is_break,
    merge_spans,
    narration,
    split_long,
)
from reveriemem.source_to_memory.verse_speech import reads_as_verse

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
        return candidate_spans(self.paragraphs, documents=self.document_openings)

    @cached_property
    def document_openings(self) -> set[int]:
        """Indices of the paragraphs where a first-person narrator's span opens or closes: another
        writer's document begins there (a diary after a letter, a newspaper cutting after a journal).
        A short line that a break or a heading ends at once is the closing document's sign-off
        ("M. Q."), not a document of its own."""
        edges = sorted({x for c in self.book.characters for span in c.narrator_spans for x in span})
        ends = [p.end for p in self.paragraphs]
        headings = heading_flags(self.paragraphs)
        out = set()
        for offset in edges:
            at = bisect.bisect_right(ends, offset)  # the paragraph holding the offset, or the next one
            if not 0 < at < len(self.paragraphs):
                continue
            paragraph, following = self.paragraphs[at], self.paragraphs[at + 1] if at + 1 < len(ends) else None
            if paragraph.words < 8 and (following is None or headings[at + 1] or is_break(following)):
                continue
            out.add(paragraph.index)
        return out

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
            self.narrator_at, scene_of, verse=self.unquoted,
        )

    def roster_evidence(self, scenes: Sequence[Span]) -> list[dict[str, RosterEvidence]]:
        by_paragraph = {u.paragraph: u for u in self.utterances(scenes)}
        slugs = [c.slug for c in self.book.characters]
        genders = {c.slug: c.gender for c in self.book.characters}
        names = {alias.lower(): c.slug for c in self.book.characters for alias in (c.name, *c.aliases)}
        return [
            scene_evidence(self.book.text, self.paragraphs, s.paragraphs, self.mentions_by_paragraph,
                           by_paragraph, self.narrator_at, slugs, deaths=self.deaths, genders=genders, names=names,
                           checkpoints=self._checkpoints(s, by_paragraph))
            for s in scenes
        ]

    def _checkpoints(self, scene: Span, utterances: dict[int, Utterance]) -> list[int]:
        """Where a scene's presence closes and opens again: its paragraphs that open on a change of time or
        place, and, in a poem without quotation marks (whose paragraphs run on for pages), its sentences that
        open on a transition cue outside speech."""
        marks = [self.paragraphs[p].start for p in scene.paragraphs[1:] if p in self.shifts]
        if self.unquoted:
            marks += [at for p in scene.paragraphs for at in inner_cues(
                self.paragraphs[p], utterances[p].quote_spans if p in utterances else ())]
        return sorted(marks)

    @cached_property
    def unquoted(self) -> bool:
        """A book whose speech has no quotation marks (a poem): its speeches are read by their formulas."""
        return reads_as_verse(self.paragraphs)

    @cached_property
    def shifts(self) -> set[int]:
        """Indices of the paragraphs where the text marks a change of time or place (a candidate scene
        boundary read from the text: a transition cue, a break, a time shift, an arrival or a departure;
        not a cut for length). Inside a scene they are the rosters' checkpoints."""
        return {c.first for c in self.candidates if c.boundary in SHIFT_BOUNDARIES}


_PLACE_WORDS = (
    r"(?:room|rooms|hall|office|house|street|road|station|laboratory|ship|inn|church|garden|gardens|harbour|quay|"
    r"wharf|court|castle|cabin|deck|study|parlour|kitchen|square|lane|yard|shop|bank|club|asylum|hotel|school|"
    r"cave|island|stockade|river|forest|wood|chapel|cellar|library|bar|tavern|hospital|prison|cottage|farm|"
    r"camp|village|town|city|port|bay|beach|shore|valley|mountain|plain|desert|train|car|steamer|schooner|"
    r"boat|cab|carriage|churchyard|graveyard|tomb|abbey|cathedral|theatre|consulate|pagoda|temple|market|"
    r"bridge|gate|tower|attic|bedroom|drawing-room|sitting-room|dining-room|chamber|ward|barn|mill)"
)
_WORD = r"[a-z][a-z'’]*(?:-[a-z]+)*"  # single hyphens only: "--" is a dash between words
_NAME = r"[A-Z][\w'’]*(?:-[A-Za-z]+)*"
# A preposition of place (and a house number: "at No. 221B, Baker Street"), then a place-word phrase
# or a capitalised name.
_PLACE_RE = re.compile(
    r"\b(?:in|at|into|inside|outside|on board|aboard|near|reached|entered)\s+(?:(?:No\.\s+)?\d+\w*,?\s+)?"
    rf"((?:(?:the|a|an|his|her|their|our|my)\s+)?(?:{_WORD}\s+){{0,2}}(?:{_WORD}-)?{_PLACE_WORDS}\b"
    rf"|(?:the\s+)?{_NAME}(?:\s+(?:of\s+(?:the\s+)?)?{_NAME})*)"
)
_CAPITALISED_PLACE_WORD = re.compile(rf"\b{_PLACE_WORDS.replace('(?:', '(?i:', 1)}$")
_POSSESSIVE = re.compile(r"['’]s?$")
# Capitalised words that open sentences, address or title people, or name no place.
_NOT_PLACES = {
    "I", "No", "Mr", "Mrs", "Miss", "Dr", "Sir", "Lord", "Lady", "Captain", "Colonel", "God", "English",
    "French", "German", "Latin", "Spanish", "Arabic", "Christian", "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December", "Monday", "Tuesday", "Wednesday",
    "Thursday", "Friday", "Saturday", "Sunday", "Christmas", "Yes", "Oh", "Honourable", "Honorable", "Reverend",
}
# A demonstrative or a quantifier points at a place told elsewhere ("in that city", "at every station").
_POINTING = frozenset(("that", "this", "these", "those", "which", "what", "each", "every", "any", "some", "such"))
_TIME_RE = re.compile(
    r"\b((?:early\s+|late\s+)?(?:next\s+|that\s+|this\s+|the\s+following\s+)?(?:morning|evening|night|"
    r"afternoon|dawn|dusk|midnight|noon|sunset|sunrise|daybreak)|\d{1,2}\s+(?:January|February|March|April|"
    r"May|June|July|August|September|October|November|December)|(?:January|February|March|April|May|June|"
    r"July|August|September|October|November|December)\s+\d{1,2}|\b1[6-9]\d\d\b)",
    re.IGNORECASE,
)


@dataclass
class Setting:
    location: str
    time: str
    atmosphere: str


def heuristic_setting(text: str, names: Collection[str] = ()) -> Setting:
    """A first guess at a scene's place and time from its opening; atmosphere needs a model.

    The location is a phrase the text marks as a place where the narration puts people: a preposition
    of place and a place-word ("the sitting-room", "the Admiral Benbow inn") or a capitalised name that
    is neither a function word, a character's name (`names`), a possessive nor a title ("No", "His",
    "Sherlock Holmes", "the Land" are not places), in a narrated sentence of the opening (its first
    `_SETTING_CHARS` characters, quotes left out) that has a person in it ("I", "we", "he", a character's
    name): the narrator's lecture ("Victoria is a town in the island of Hong Kong") puts nobody there.
    Empty when nothing qualifies: no location is better than a wrong one (`benchmarks/settings.py`
    measures both).
    """
    opening = narration(_FOOTNOTE_MARK.sub("", normalise_space(text[: 2 * _SETTING_CHARS])))[:_SETTING_CHARS]
    location = ""
    for match in _PLACE_RE.finditer(opening):
        phrase = match.group(1)
        sentence = _sentence_at(opening, match.start(), match.end())
        if is_place_phrase(phrase, names) and _has_person(sentence, names):
            location = phrase
            break
    time_match = _TIME_RE.search(normalise_space(text[:2500]))
    return Setting(location=location, time=time_match.group(1) if time_match else "", atmosphere="")


_SETTING_CHARS = 1200  # a scene's place is told in its opening, not in what it later speaks of
_FOOTNOTE_MARK = re.compile(r"\s*\[\d{1,3}\]")  # "at No. 221B, [5] Baker Street": an edition's note number
_PERSON = re.compile(r"\b(?:I|[Ww]e|[Hh]e|[Ss]he|[Tt]hey|me|us|him|her|them)\b")


def _sentence_at(text: str, start: int, end: int) -> str:
    """The sentence, or the clause between semicolons, of `text` holding text[start:end] (a title's stop ends
    none: "with Mrs. Westenra")."""
    run = next((r for r in sentence_runs(text) if r.start() <= start < r.end()), None)
    first, last = (run.start(), run.end()) if run else (start, end)
    stop = text.find(";", end, last)
    return text[max(first, text.rfind(";", first, start) + 1): stop if stop >= 0 else last]


def _has_person(sentence: str, names: Collection[str]) -> bool:
    return _PERSON.search(sentence) is not None or any(name in sentence for name in names if name)


def is_place_phrase(phrase: str, names: Collection[str] = ()) -> bool:
    """Is `phrase` (what follows a preposition of place) a place, by the rules of `heuristic_setting`?"""
    words = phrase.split()
    if words[0].lower() in _POINTING:
        return False
    if not words[-1][:1].isupper():
        return True  # a determiner and a lower-case place-word: the regex asked for one
    named = [_POSSESSIVE.sub("", w) for w in (words[1:] if words[0] in ("the", "a", "an") else words)]
    if not named or any(w in _NOT_PLACES for w in named):
        return False
    if named[0].lower() in FUNCTION_WORDS or phrase.endswith(("'s", "’s", "'", "’")):
        return False
    name_words = {w.lower() for n in names for w in n.split() if w[:1].isupper()}
    if any(w.lower() in name_words for w in named):
        return False  # a character ("Sherlock Holmes", "Harker")
    # "the Land", "the Prophet": a title, unless the name itself says place
    return not (words[0] == "the" and len(named) == 1 and not _CAPITALISED_PLACE_WORD.search(named[0]))


def presence_offsets(reading: BookReading, record: RosterEvidence, scene: Span) -> tuple[int | None, int | None]:
    """Source offsets from the start of a character's first presence span to the end of their last."""
    return presence_bounds(record)
