"""Deterministic scene segmentation: candidate spans and the offline scenes.

Chapter headings are hard boundaries; a title line under a heading, contents
blocks and front matter are not story text. Inside a chapter, explicit breaks
(`* * *`), transition cues at a paragraph's start ("The next morning",
"Meanwhile", a diary date) and changes of place or time read in narration (a
time shift or an arrival opening a paragraph, the narrating party setting off
on a journey at the end of the one before) open candidate spans. The paper's LLM step merges
contiguous candidates that belong to one dramatic unit; offline, a candidate
boundary is kept when both sides are long enough to be scenes of their own,
and over-long scenes are split at the paragraph nearest their middle.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from reveriemem.core.text import NOT_AFTER_TITLE, Paragraph, normalise_space

SEGMENTER_VERSION = "scenes-v14"  # v14: a number in words ends a heading; v13: a break is kept before a short run that a change of place follows; v12: chapter numbers in words in any case, Markdown heading marks; v10: "Mean while" (verse spelling) is a transition cue; v11: one paragraph to a line (core.layout)

_UNITS = "one|two|three|four|five|six|seven|eight|nine"
# A chapter's number in figures, Roman numerals or words, in any case ("Chapter One", "CHAPTER TWENTY-ONE").
# A number in words ends the heading or comes before its separator: "Part one of the plan went well" is prose.
_NUMBER = (rf"(?:[IVXLCDM]+|\d+|THE\s+\w+|(?i:(?:(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)"
           rf"(?:[-\s](?:{_UNITS}))?|{_UNITS}|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|"
           rf"nineteen)(?=\s*$|\s*[.:—–-])))")
_MARKDOWN_HEADING = re.compile(r"^#{1,6}\s+")  # "# Chapter 1", "## Chapter Two": the heading after its marks
# A heading word alone, or followed by its number ("Book and news dealers..." is prose).
_HEADING_RE = re.compile(
    rf"^(?:CHAPTER|Chapter|BOOK|Book|PART|Part|STAVE|Stave|VOLUME|Volume)\b\.?\s*(?:{_NUMBER}\b.*)?$"
)
_ROMAN_ONLY_RE = re.compile(r"^(?:[IVXLCDM]+|\d+)\.?$")
_ITALIC_RE = re.compile(r"_[^_]*_")
# A contents line that ends with its page number, or with dot leaders.
_CONTENTS_LINE_RE = re.compile(r"(?:\.\s*){3,}\d*\s*$|\s\d{1,4}\s*$")
# Words a title leaves in lower case ("What I Heard in the Apple Barrel").
_TITLE_SMALL_WORDS = {
    "a", "an", "the", "and", "or", "but", "nor", "of", "in", "on", "at", "to", "by", "for", "with", "from",
    "into", "upon", "as", "is", "was", "be", "his", "her", "its", "my", "our", "their", "that", "than", "off",
}
_BREAK_RE = re.compile(r"^[*#~_=•·\-\s]+$")
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
# A count of days or an ordinal ("Eleven days later", "On the ninth day after leaving Yokohama").
_COUNT = r"(?:One|Two|Three|Four|Five|Six|Seven|Eight|Nine|Ten|Eleven|Twelve|Fifteen|Twenty|Thirty|\d{1,3})"
_ORDINAL = (r"second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|fifteenth|twentieth|"
            r"\d{1,2}(?:st|nd|rd|th)")
_CUE_RE = re.compile(
    r"^[_\W]*(?:"
    r"(?:The\s+)?(?:next|following)\s+(?:morning|day|evening|night|afternoon|week)"
    r"|(?:That|This)\s+(?:same\s+)?(?:evening|night|afternoon|morning)"
    r"|Later(?:\s+on|\s+that|\s+in|[.,:])"
    rf"|(?:An|A\s+few|A\s+couple\s+of|{_COUNT}|Some|Several|Many|Half\s+an)\s+(?:hour|hours|day|days|week|weeks|month|months|minutes|years)\s+(?:later|afterwards|after)"
    r"|Mean\s?while|In\s+the\s+meantime|Early\s+(?:the\s+next|next|on\s+the\s+following)"
    r"|At\s+(?:dawn|daybreak|noon|midnight|nightfall|sunrise|sunset)"
    r"|When\s+(?:at\s+last\s+)?(?:I|we|he|she|they)\s+(?:reached|arrived|returned|got\s+back|came\s+back|awoke|woke)"
    # a departure told as the time of what follows ("When the three men had gone out to their tasks")
    r"|(?:When|After|As\s+soon\s+as)\s+(?:[\w.-]+\s+){1,4}?(?:had|have|has)\s+(?:gone|left|departed|retired|withdrawn)\b"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})\b|(?:{_MONTHS})\s+\d{{1,2}}\b"
    rf"|On\s+the\s+(?:{_ORDINAL})\s+(?:day|morning|evening|night)\b"
    r")",
)

# Where the place or time changes inside a chapter, read in narration (quotes removed):
# the first sentence of a paragraph names a time shift or an arrival, or the last
# sentence of the paragraph before sets the narrating party travelling.
_QUOTED_RE = re.compile(r"“[^”]*(?:”|$)|\"[^\"]*(?:\"|$)")
_SENTENCE_END_RE = re.compile(NOT_AFTER_TITLE + r"(?<!\bNo)[.!?]+[’'”\")\]]*\s+(?=[A-Z_(])")
_PARTY = r"(?:we|I|they|he|she|[A-Z][a-z]+(?:\s+and\s+(?:his|her|[A-Z][a-z]+)(?:\s+\w+)?)?)"
_VEHICLE = r"(?:cab|hansom|carriage|train|boat|brougham|four-wheeler|coach|gig|trap|wagon|skiff|canoe|steamer|sledge)"
_TIME_SHIFT_RE = re.compile(
    r"\b(?:(?:the\s+)?(?:next|following)\s+(?:morning|day|evening|night|afternoon)"
    r"|(?:that|this)\s+(?:same\s+)?(?:evening|night|afternoon)|(?:on\s+)?(?:that|this)\s+(?:very|same)\s+(?:day|morning)"
    rf"|(?:an?|{_COUNT}|some|several|few|half\s+an|many)\s+(?:hours?|days?|weeks?|months?|years?)"
    r"\s+(?:later|afterwards?|after|had\s+(?:passed|elapsed|gone\s+by))"
    r"|on\s+the\s+(?:morning|evening|day|night|afternoon)\s+(?:which|that)\s+followed"
    r"|on\s+the\s+(?:very|same|following|next)\s+(?:day|morning|evening|night|afternoon)"
    r"|it\s+was\s+(?:\w+\s+){0,3}o[’']clock\s+when"
    rf"|on\s+the\s+(?:{_ORDINAL})\s+(?:day|morning|evening|night)\b|on\s+the\s+\d{{1,2}}(?:st|nd|rd|th)\s+of\s+(?:{_MONTHS}))\b",
    re.IGNORECASE,
)
_ARRIVAL_RE = re.compile(
    rf"\b(?:{_PARTY}\s+(?:had\s+)?(?:arrived|came)\s+(?:at|in)\s|(?:arriving|on\s+arriving)\s+(?:at|in)\s"
    rf"|{_PARTY}\s+(?:\w+ly\s+)?(?:came\s+back\s+to|got\s+(?:back|home)\b|came\s+home\b|returned\s+(?:home\b|to\s+(?:the|my|our|his|her)\s))"
    rf"|(?:when|as\s+soon\s+as|on|after)\s+(?:{_PARTY}\s+)?(?:had\s+)?(?:reached|reaching|arrived|arriving|got\s+to)\b"
    r"|found\s+(?:ourselves|myself|themselves)\s+(?:once\s+more\s+)?(?:in|at|on|before)\b"
    r"|(?:drew|pulled)\s+up\s+(?:at|before|in\s+front\s+of)\b)"
)
_DEPARTURE_RE = re.compile(
    rf"\b(?:(?:we|I|they)\s+(?:were|was)\s+(?:both\s+|all\s+|soon\s+|once\s+more\s+)?(?:in|into|seated\s+in)\s+"
    rf"(?:a|the|our|an)\s+(?:\w+\s+)?{_VEHICLE}"
    rf"|{_PARTY}\s+(?:drove|rattled|rode|sailed|set\s+(?:off|out)|started)\s+(?:off\s+|away\s+|back\s+|on\s+)?(?:for|to|towards?)\b"
    rf"|{_PARTY}\s+(?:hurried|walked|went|made\s+(?:our|their|his|her)\s+way)\s+(?:off\s+|away\s+|back\s+|on\s+)?"
    r"(?:to|towards?|home)\b(?!\s+(?:the|his|her|my|our|a)\s+(?:window|door|table|fire|fireplace|desk|bed|chair|shelf|side))"
    r"(?!\s+(?:him|her|them|me|us|it)\b))"
)
_WALK_RE = re.compile(r"\b(?:hurried|walked|went|made)\b")  # going across the room or to someone: the scene goes on
_TIME_SHIFT_OPENS_WITHIN = 40  # characters into the first sentence: later on, a time is part of what is told


def narration(text: str) -> str:
    """`text` with its quoted speech removed, spaces normalised."""
    return normalise_space(_QUOTED_RE.sub(" ", text))


def shift_cue(paragraph: Paragraph, previous: Paragraph | None) -> tuple[str, str]:
    """(`time` or `place`, the words) when a paragraph opens a new time or
    place: a time shift, an arrival or the party travelling in its first
    sentence of narration, or the party setting off in the last sentence of
    the paragraph before it. A paragraph that opens with speech opens nothing."""
    text = normalise_space(paragraph.text)
    if text[:1] in "“\"'‘":
        return "", ""
    first = _SENTENCE_END_RE.split(narration(text), maxsplit=1)[0]
    match = _TIME_SHIFT_RE.search(first, 0, _TIME_SHIFT_OPENS_WITHIN + 40)
    if match and match.start() <= _TIME_SHIFT_OPENS_WITHIN:
        return "time", match.group(0).strip()
    match = _ARRIVAL_RE.search(first) or _DEPARTURE_RE.search(first)
    if match:
        return "place", match.group(0).strip()
    if previous is not None:
        last = _SENTENCE_END_RE.split(normalise_space(previous.text))[-1]
        match = _DEPARTURE_RE.search(narration(last)) if last[:1] not in "“\"'‘" else None
        if match and match.group(0).split()[0] in ("we", "I", "We") and not _WALK_RE.search(match.group(0)):
            return "place", match.group(0).strip()
    return "", ""


@dataclass
class Heading:
    paragraph: int
    title: str


# Boundaries no merge crosses: the book's start, a chapter, another writer's document.
HARD_BOUNDARIES = ("start", "chapter", "document")
# Boundaries read from the text as a change of time or place (not a cut for length): inside a scene they
# are the rosters' presence checkpoints.
SHIFT_BOUNDARIES = ("break", "cue", "time", "place")


@dataclass
class Span:
    """A run of contiguous prose paragraphs: a candidate scene or a scene."""

    chapter: int
    chapter_title: str
    first: int  # paragraph index
    last: int  # paragraph index, inclusive
    boundary: str  # what opens it: start | chapter | document | break | cue | length
    cue: str = ""
    words: int = 0
    paragraphs: list[int] = field(default_factory=list)


def heading_strength(paragraph: Paragraph) -> int:
    """2 for a numbered heading (`CHAPTER IV`, `BOOK II`, `XII`), 1 for a short
    capitals line (a chapter title, `DR. SEWARD'S DIARY`) or a block of
    contents lines (each a capitals line or an entry ending in its page
    number), 0 for prose."""
    strength = heading_strength_text(normalise_space(paragraph.text))
    if strength:
        return strength
    lines = [line.strip() for line in paragraph.text.splitlines() if line.strip()]
    if len(lines) >= 2 and all(heading_strength_text(line) or _CONTENTS_LINE_RE.search(line) for line in lines):
        return 1
    return 0


def heading_strength_text(text: str) -> int:
    if len(text) > 200:
        return 0
    text = _MARKDOWN_HEADING.sub("", text)
    if _HEADING_RE.match(text) or _ROMAN_ONLY_RE.match(text):
        return 2
    if text[:1] in '"“' or (any(q in text for q in '"“”') and len(text.split()) < 4):
        return 0  # a shout in capitals (“TOM!”) is speech
    letters = [c for c in _ITALIC_RE.sub("", text) if c.isalpha()]
    lower = sum(c.islower() for c in letters)
    if len(letters) >= 3 and lower <= len(letters) // 25 and len(text.split()) <= 30:
        return 1
    return 0


def is_title_line(text: str) -> bool:
    """A short line in title case with no sentence end: the title under a
    numbered heading ("What I Heard in the Apple Barrel", "“Pieces of Eight”")."""
    text = normalise_space(text)
    if text[:1] in "“\"" and text[-1:] in "”\"":
        text = text[1:-1]
    words = re.findall(r"[A-Za-z][\w'’-]*", text)
    if not words or len(words) > 15 or len(text) > 120 or any(q in text for q in '"“”'):
        return False
    if text.endswith((".", "!", "?", ",", ";", ":")) or not words[0][0].isupper():
        return False
    return all(w[0].isupper() or w.lower() in _TITLE_SMALL_WORDS for w in words)


def heading_flags(paragraphs: Sequence[Paragraph]) -> list[bool]:
    """Which paragraphs are headings: numbered ones, capitals lines and
    contents blocks next to them, and one title line right under a heading run."""
    strength = [heading_strength(p) for p in paragraphs]
    flags = [s == 2 for s in strength]
    for index, value in enumerate(strength):
        if value == 1:
            j = index - 1
            while j >= 0 and strength[j] == 1:
                j -= 1
            k = index + 1
            while k < len(strength) and strength[k] == 1:
                k += 1
            flags[index] = (j >= 0 and strength[j] == 2) or (k < len(strength) and strength[k] == 2)
    for index in range(1, len(paragraphs)):
        if flags[index - 1] and not flags[index] and strength[index - 1] == 2 and is_title_line(
            paragraphs[index].text
        ):
            flags[index] = True
    return flags


def is_break(paragraph: Paragraph) -> bool:
    text = paragraph.text.strip()
    return bool(_BREAK_RE.match(text)) and sum(c in "*#~_=•·-" for c in text) >= 3


def transition_cue(paragraph: Paragraph) -> str:
    match = _CUE_RE.match(normalise_space(paragraph.text))
    return match.group(0).strip("_ ") if match else ""


# A sentence inside a paragraph: in verse a paragraph runs on for pages, and a new scene may open mid-way
# ("...mixing intercession sweet. Meanwhile ere thus was sin’d and judg’d on Earth, Within the Gates of Hell").
_INNER_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z_])")


def inner_cues(paragraph: Paragraph, spans: Sequence[tuple[int, int]] = ()) -> list[int]:
    """Offsets of the sentences after a paragraph's first that open on a transition cue ("Meanwhile", "The
    next morning"), outside `spans` (speech)."""
    return [paragraph.start + m.end() for m in _INNER_SENTENCE.finditer(paragraph.text)
            if _CUE_RE.match(paragraph.text[m.end():]) and not any(a <= paragraph.start + m.end() < b for a, b in spans)]


def candidate_spans(
    paragraphs: Sequence[Paragraph], front_matter_words: int = 1000, chunk_words: int = 600,
    documents: Collection[int] = (),
) -> list[Span]:
    """Split a book's paragraphs into candidate spans (no merging yet).

    Runs of headings open chapters; a heading run followed by almost no prose
    (a table of contents) is skipped; text before the first real chapter is
    front matter when it is short. A paragraph in `documents` (by index) opens
    another document of the book, written by someone else (a diary after a
    letter, a newspaper cutting after a journal): a boundary as hard as a
    chapter's (`document`), since who is where changes with the writer. Spans
    longer than `chunk_words` are cut into chunks at paragraph boundaries
    (boundary `chunk`), so that a model can find scene changes that no cue marks.
    """
    chapter, title = 0, ""
    spans: list[Span] = []
    current: Span | None = None
    heading_run: list[str] = []
    pending_boundary = "start"
    headings = heading_flags(paragraphs)
    previous: Paragraph | None = None
    for paragraph in paragraphs:
        if headings[paragraph.index - paragraphs[0].index]:
            heading_run.append(normalise_space(paragraph.text))
            current, previous = None, None
            continue
        if heading_run:
            chapter += 1
            numbered = [i for i, h in enumerate(heading_run) if heading_strength_text(h) == 2]
            title = " ".join(heading_run[numbered[-1] if numbered else 0 :])
            heading_run = []
            pending_boundary = "chapter"
        if is_break(paragraph):
            current = None
            if pending_boundary != "chapter":
                pending_boundary = "break"
            continue
        cue, kind = transition_cue(paragraph), "cue"
        if not cue:
            kind, cue = shift_cue(paragraph, previous)
        previous = paragraph
        if paragraph.index in documents and pending_boundary not in HARD_BOUNDARIES:
            current, pending_boundary = None, "document"
        if current is not None and cue:
            current = None
            pending_boundary = kind
        elif current is not None and current.words >= chunk_words:
            current = None
            pending_boundary = "chunk"
        if current is None:
            current = Span(chapter=chapter, chapter_title=title, first=paragraph.index,
                           last=paragraph.index, boundary=pending_boundary, cue=cue)
            spans.append(current)
            pending_boundary = "chunk"
        current.last = paragraph.index
        current.paragraphs.append(paragraph.index)
        current.words += paragraph.words
    return _drop_front_matter(spans, front_matter_words)


def _drop_front_matter(spans: list[Span], front_matter_words: int) -> list[Span]:
    """Drop what precedes the first chapter with prose (title page, contents),
    unless untitled opening text is long enough to be the story itself."""
    chapter_words: dict[int, int] = {}
    chapter_paragraphs: dict[int, int] = {}
    for span in spans:
        chapter_words[span.chapter] = chapter_words.get(span.chapter, 0) + span.words
        chapter_paragraphs[span.chapter] = chapter_paragraphs.get(span.chapter, 0) + len(span.paragraphs)
    # A list of short lines (illustrations, a contents page set as paragraphs) is not prose.
    real = [c for c, w in chapter_words.items() if c > 0 and w >= 60 and w >= 8 * chapter_paragraphs[c]]
    if not real:
        return spans
    first_real = min(real)
    kept = [
        span for span in spans
        if span.chapter >= first_real or (span.chapter == 0 and chapter_words[0] >= front_matter_words)
    ]
    if kept and kept[0].boundary != "start":
        kept[0].boundary = "start"
    return kept


def merge_spans(spans: Sequence[Span], keep_boundary: Sequence[bool]) -> list[Span]:
    """Merge each span into the one before where `keep_boundary[i]` is False.

    Chapter openings are always kept. `keep_boundary` has one flag per span.
    """
    scenes: list[Span] = []
    for span, keep in zip(spans, keep_boundary):
        hard = span.boundary in HARD_BOUNDARIES
        if scenes and not hard and not keep and scenes[-1].chapter == span.chapter:
            last = scenes[-1]
            last.last = span.last
            last.words += span.words
            last.paragraphs.extend(span.paragraphs)
        else:
            scenes.append(Span(chapter=span.chapter, chapter_title=span.chapter_title, first=span.first,
                               last=span.last, boundary=span.boundary, cue=span.cue, words=span.words,
                               paragraphs=list(span.paragraphs)))
    return scenes


def heuristic_boundaries(spans: Sequence[Span], min_words: int = 300) -> list[bool]:
    """Offline policy: keep a soft boundary when both neighbours are scene-sized.

    An explicit break is kept unless a side is a fragment (under 60 words);
    a `chunk` boundary (cut for length only) is never kept.
    """
    keep: list[bool] = []
    for index, span in enumerate(spans):
        if span.boundary in HARD_BOUNDARIES:
            keep.append(True)
            continue
        if span.boundary == "chunk":
            keep.append(False)
            continue
        before = _words_since_boundary(spans, index)
        threshold = 60 if span.boundary == "break" else min_words
        # after a break, the words run on to the next break or chapter: a change of place or time that opens a short
        # run ("* * *" / 45 words / "Will Dunmore came in ...") may itself be merged, and must not take the break along
        ends = ("break", *HARD_BOUNDARIES) if span.boundary == "break" else None
        after = _words_until_next_boundary(spans, index, threshold, ends)
        keep.append(before >= threshold and after >= threshold)
    return keep


def _words_since_boundary(spans: Sequence[Span], index: int) -> int:
    total = 0
    for span in reversed(spans[:index]):
        total += span.words
        if span.boundary != "chunk":
            break
    return total


def _words_until_next_boundary(spans: Sequence[Span], index: int, threshold: int,
                               ends: Collection[str] | None = None) -> int:
    """Words from `index` to the next boundary that is not a `chunk` (or, given `ends`, that is one of them)."""
    total = 0
    for span in spans[index:]:
        if span is not spans[index] and (span.boundary in ends if ends is not None else span.boundary != "chunk"):
            break
        total += span.words
        if total >= threshold:
            break
    return total


def split_long(scenes: Sequence[Span], paragraphs: Sequence[Paragraph], max_words: int) -> list[Span]:
    """Split scenes longer than `max_words` at paragraph boundaries, as evenly as possible."""
    result: list[Span] = []
    for scene in scenes:
        if scene.words <= max_words or len(scene.paragraphs) < 2:
            result.append(scene)
            continue
        target = scene.words / -(-scene.words // max_words)
        chunk: list[int] = []
        words = 0
        first = True
        for index in scene.paragraphs:
            chunk.append(index)
            words += paragraphs[index].words
            if words >= target or index == scene.paragraphs[-1]:
                result.append(_span_of(scene, chunk, words, first))
                chunk, words, first = [], 0, False
    return result


def _span_of(scene: Span, chunk: list[int], words: int, first: bool) -> Span:
    return Span(chapter=scene.chapter, chapter_title=scene.chapter_title, first=chunk[0], last=chunk[-1],
                boundary=scene.boundary if first else "length", cue=scene.cue if first else "",
                words=words, paragraphs=list(chunk))
