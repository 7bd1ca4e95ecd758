"""The one text module: book files, paragraphs, sentences, tokens, function words, folding, token counts.

Every offset is a character offset into the decoded text (a UTF-8 byte-order
mark, when present, is dropped by decoding; line endings are kept as they
are, CRLF included), so any span can be cited from the original.

Sentences are cut in a few ways, each kept because a step depends on it:
`sentences_of` (a paragraph's sentences; abbreviations like "Mr." do not end
one), `sentence_spans` (cut only where a stop is followed by space),
`sentence_runs` (runs of text up to any stop but a title's), `split_sentences` (cut where a
stop is followed by a capital) and `sentence_around` (the sentence holding a
span). Words: `tokens` (folded lower-case words, the lexical view of
evaluation), `FUNCTION_WORDS` (words that carry no content for matching) and
`SPEECH_STOPWORDS` (words too common in speech to characterise a speaker).
`count_tokens` counts model tokens the same way for book text and prompts.
"""

from __future__ import annotations

import importlib.util
import os
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from reveriemem.core.errors import BookInputError
from reveriemem.core.layout import paragraph_break

MAX_BOOK_BYTES = 64 * 1024 * 1024
LARGE_BOOK_BYTES = 4 * 1024 * 1024  # above this a book is read, with a warning (about 700,000 words)
MAX_STRAY_BYTES = 100  # at most this many undecodable bytes in a UTF-8 book are replaced, with a warning

_START_RE = re.compile(
    r"^\*{3}\s*START OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK[^\n]*$", re.IGNORECASE | re.MULTILINE
)
_END_RE = re.compile(
    r"^(?:\*{3}\s*END OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK"
    r"|End of (?:the )?Project Gutenberg(?:'s)?\b)",
    re.IGNORECASE | re.MULTILINE,
)
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class DecodedText:
    text: str
    encoding: str
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Paragraph:
    """A block of text between blank lines, with its offsets in the book."""

    index: int
    start: int
    end: int
    text: str
    document: bool = False  # inside a document quoted whole: its opening quotation mark is the document's

    @property
    def words(self) -> int:
        return len(self.text.split())


_INSET_LINE = re.compile(r"[ \t]{3,}\S")


def is_inset(text: str, paragraph: Paragraph) -> bool:
    """Is the paragraph set in from the margin, every line of it (a letter, an inscription, a log or a verse
    quoted in the story: "     Dear Livesey--As I do not know...")? Such a block is a document read in the
    scene, not narration of it."""
    line_start = text.rfind("\n", 0, paragraph.start) + 1
    lines = [ln for ln in text[line_start:paragraph.end].splitlines() if ln.strip()]
    return bool(lines) and all(_INSET_LINE.match(ln) for ln in lines)


def decode_book_bytes(raw: bytes, source: str) -> DecodedText:
    """Decode a book's bytes as UTF-8 (BOM allowed; UTF-16 with its BOM too), else Windows-1252, else Latin-1.

    A text that is UTF-8 but for a few stray bytes (at most MAX_STRAY_BYTES, and
    no more than its well-formed non-ASCII characters) stays UTF-8: the stray
    bytes become U+FFFD and a warning names the first one's byte offset. Falling
    back to a legacy encoding is also said in a warning. Raises BookInputError
    for empty, binary or undecodable input.
    """
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16 with its byte-order mark (an odd last byte is dropped)
        raw = raw[: len(raw) // 2 * 2].decode("utf-16", errors="replace").encode("utf-8")
    if not raw.strip():
        raise BookInputError(f"The book file {source} is empty.")
    if b"\x00" in raw[:65536]:
        raise BookInputError(f"The book file {source} looks binary (it contains NUL bytes); give a plain-text file.")
    bad = _utf8_error_offsets(raw)
    if bad:
        mostly = raw.decode("utf-8-sig", errors="replace")
        well_formed = sum(1 for ch in mostly if ord(ch) > 127 and ch != "\ufffd")
        if len(bad) <= MAX_STRAY_BYTES and well_formed >= len(bad):
            count = f"{len(bad)} undecodable byte sequence{'s' if len(bad) > 1 else ''}"
            return DecodedText(text=mostly, encoding="utf-8", warnings=(
                f"The book file {source} is UTF-8 with {count} (the first at byte offset {bad[0]}), "
                f"read as U+FFFD; check the file if a name or word there matters.",))
    for encoding in ("cp1252", "latin-1") if bad else ("utf-8-sig", "cp1252", "latin-1"):
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError:
            continue
        controls = len(_CONTROL_RE.findall(text))
        if controls > max(2, len(text) // 1000):
            continue
        if encoding == "utf-8-sig":
            return DecodedText(text=text, encoding="utf-8")
        why = f"the first byte that is not is at offset {bad[0]}" if bad else "it has control characters"
        name = "Windows-1252" if encoding == "cp1252" else "Latin-1"
        return DecodedText(text=text, encoding=encoding, warnings=(
            f"The book file {source} is not UTF-8 ({why}); it was read as {name}.",))
    raise BookInputError(f"The book file {source} could not be decoded as UTF-8, Windows-1252 or Latin-1 text.")


def _utf8_error_offsets(raw: bytes, limit: int = MAX_STRAY_BYTES + 1) -> list[int]:
    """Byte offsets of the first `limit` sequences that are not UTF-8 (empty for valid UTF-8)."""
    offsets: list[int] = []
    position = 0
    while len(offsets) < limit:
        try:
            raw[position:].decode("utf-8")
            break
        except UnicodeDecodeError as exc:
            offsets.append(position + exc.start)
            position += exc.end
    return offsets


def book_shape_warnings(text: str, size: int, source: str) -> list[str]:
    """Warnings about a book file's shape: several Gutenberg books in one file, or a very large file."""
    warnings: list[str] = []
    starts = list(_START_RE.finditer(text))
    if len(starts) > 1:
        warnings.append(
            f"The book file {source} holds {len(starts)} Project Gutenberg books (START markers at characters "
            f"{', '.join(str(m.start()) for m in starts)}); only the first one is read, up to its END marker.")
    if size > LARGE_BOOK_BYTES:
        warnings.append(
            f"The book file {source} is {size / 1024 / 1024:.1f} MiB, more than {LARGE_BOOK_BYTES // 1024 // 1024} MiB "
            f"(a long novel is under 2); a build will take long: check it is one book.")
    return warnings


def check_book_path(path: Path) -> None:
    """Refuse a book path that does not exist or is not a file, in one sentence."""
    if not path.exists():
        raise BookInputError(f"The book file {path} does not exist.")
    if not path.is_file():
        raise BookInputError(f"The book path {path} is not a file.")


def read_book_file(path: Path) -> DecodedText:
    """Read and decode a book file, with one clear error for each bad input."""
    check_book_path(path)
    size = path.stat().st_size
    if size > MAX_BOOK_BYTES:
        raise BookInputError(
            f"The book file {path} is {size // (1024 * 1024)} MiB; the limit is "
            f"{MAX_BOOK_BYTES // (1024 * 1024)} MiB."
        )
    return decode_book_bytes(path.read_bytes(), str(path))


# "THE END" (or "Finis") alone on its line in the last part of a book closes the story: what follows
# it is back matter (a publisher's list of other titles, a transcriber's corrections), not the story.
# Printed as a closing line is printed: in capitals or title case, perhaps in italics or brackets. A
# transcriber's heading in capitals alone on its line ("ORIGINAL TRANSCRIBER'S NOTES:") there opens back
# matter the same way (not a bracketed note inside the story: "[Transcriber's Note: a leaf is missing]").
_THE_END_RE = re.compile(r"^[ \t\u00a0]*(?:[_\[]?(?:THE\s+END|The\s+End|FINIS|Finis)[.!]?[_\]]?"
                         r"|(?:ORIGINAL\s+)?TRANSCRIBER['’]S\s+NOTES?:?)[ \t\u00a0]*\r?$", re.MULTILINE)
_BACK_MATTER_SHARE = 0.2  # "THE END" closes the story only within this last share of the body
# ... and not when it is a chapter's title (the line before it is a heading: "CHAPTER XXX", "XXX.",
# "EPILOGUE") or a chapter follows it
_HEADING_LINE = re.compile(r"^[ \t]*(?:(?:chapter|book|part|canto)\s+(?:[ivxlc]+|\d+|the\s+last)\b[^\n]{0,60}"
                           r"|[ivxlc]{2,}\.?|\d{1,3}\.?|epilogue|prologue|conclusion|postscript)[ \t]*\r?$", re.IGNORECASE)
_CHAPTER_AFTER = re.compile(r"^[ \t]*(?:chapter|book|part)\s+(?:[ivxlc]+|\d+)\b", re.IGNORECASE | re.MULTILINE)


def _closes_story(text: str, at: int, start: int, end: int) -> bool:
    """Does the "THE END" line at `at` close the story: in the body's last part, not a chapter's title,
    and no chapter after it?"""
    if at < end - _BACK_MATTER_SHARE * (end - start):
        return False
    before = [line for line in text[start:at].splitlines() if line.strip()]
    if before and _HEADING_LINE.match(before[-1]):
        return False
    return _CHAPTER_AFTER.search(text, at, end) is None


def find_body(text: str) -> tuple[int, int]:
    """Offsets of the story body: inside the Gutenberg START/END markers if present, and before a
    closing "THE END" line in the body's last fifth (not "THE END OF THE FIRST BOOK", not a last
    chapter titled "The End"). A registered book keeps the body it was registered with."""
    start, end = 0, len(text)
    start_match = _START_RE.search(text)
    if start_match:
        start = start_match.end()
    end_match = _END_RE.search(text, start)
    if end_match:
        end = end_match.start()
    closing = [m.start() for m in _THE_END_RE.finditer(text, start, end) if _closes_story(text, m.start(), start, end)]
    if closing:
        end = closing[0]
    while start < end and text[start] in "\r\n":
        start += 1
    while end > start and text[end - 1] in " \t\r\n":
        end -= 1
    return start, end


def split_paragraphs(text: str, start: int = 0, end: int | None = None) -> list[Paragraph]:
    """Paragraphs of `text[start:end]`: blocks between blank lines, or lines (`core.layout.paragraph_break`)."""
    documents = quoted_documents(text)
    return [Paragraph(index=i, start=a, end=b, text=block, document=a in documents)
            for i, (a, b, block) in enumerate(_blocks(text, start, end))]


def _blocks(text: str, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int, str]]:
    """(start, end, stripped text) of each non-blank block of `text[start:end]` between paragraph breaks."""
    end = len(text) if end is None else end
    cursor = start
    for stop, following in [*((m.start(), m.end()) for m in paragraph_break(text).finditer(text, start, end)),
                            (end, end)]:
        block = text[cursor:stop]
        stripped = block.strip()
        if stripped:
            real_start = cursor + len(block) - len(block.lstrip())
            yield real_start, real_start + len(stripped), stripped
        cursor = following


# A document quoted whole (a letter or a telegram copied into a journal) opens with a quotation mark before its
# dateline in italics ('"_24 May_.'); each of its paragraphs opens with a quotation mark left open, and only
# its last paragraph closes it ('"LUCY."'). What is said inside it is in single quotes.
_QUOTED_DATELINE = re.compile(r'["“]_[^_\n]{1,80}_[.,]?(?:\s*$|--)')


@lru_cache(maxsize=4)
def quoted_documents(text: str) -> frozenset[int]:
    """Start offsets of the paragraphs of every document quoted whole in `text` (see `_QUOTED_DATELINE`):
    from a paragraph opened by a quoted dateline, on through each next paragraph that opens with a
    quotation mark while the one before left its own open."""
    starts: set[int] = set()
    inside = False
    for start, _, block in _blocks(text):
        left_open = (block.count('"') + block.count("“") - block.count("”")) % 2 == 1
        inside = block[0] in '"“' and (inside or (left_open and _QUOTED_DATELINE.match(block) is not None))
        if inside:
            starts.add(start)
            inside = left_open  # the next paragraph goes on with the document only if this one left it open
    return frozenset(starts)


# A paragraph's first word printed in capitals before lower case on the same line, the typesetter's small
# capitals at a chapter's opening ("WE rode hard all the way", "IN the year 1878", '"WELL, sir," said he'):
# read as the word it is, so rules written for "We" or "In" and names like "Jim" see it. Same length, same
# offsets. A heading, a signature ('"LUCY."') or a Roman numeral is left as it is.
_PARAGRAPH_OPENING = r"(?:(?<=\n\n)|(?<=\n\r\n)|\A)"
_SMALL_CAPS_OPENING = re.compile(_PARAGRAPH_OPENING + r"([\"“‘'_]?)(?![IVXLCDM]+\b)([A-Z])([A-Z]+)(?=[,;:.!?—-]*[ \t]+[a-z])")


def fold_small_caps(text: str) -> str:
    """`text` with each paragraph's opening word in capitals set in its ordinary case (see `_SMALL_CAPS_OPENING`);
    every offset is unchanged."""
    return _SMALL_CAPS_OPENING.sub(lambda m: m.group(1) + m.group(2) + m.group(3).lower(), text)


def find_all_text(text: str, marker: str, start: int = 0, end: int | None = None) -> list[int]:
    """Every offset where `marker`, copied from the book file, occurs in a book's text (`Book.text`, whose
    paragraph openings are `fold_small_caps`-ed), in order: as written anywhere, and with its own opening
    folded the same way where a paragraph opens ("IN the year 1878 I took my degree")."""
    end = len(text) if end is None else end
    found = {m.start() for m in re.compile(_loose(marker)).finditer(text, start, end)}
    folded = fold_small_caps(marker)
    if folded != marker:
        found |= {m.start() for m in re.compile(_PARAGRAPH_OPENING + _loose(folded)).finditer(text, start, end)}
    return sorted(found)


_QUOTE_CLASSES = dict.fromkeys("\"“”'‘’", "[\"“”'‘’]")  # speech in single marks is read as double (core.quotes)


def _loose(marker: str) -> str:
    """A pattern for `marker` as copied: any run of spaces or line breaks for its own, any quotation marks."""
    return r"\s+".join("".join(_QUOTE_CLASSES.get(ch) or re.escape(ch) for ch in word) for word in marker.split())


def find_text(text: str, marker: str, start: int = 0, end: int | None = None) -> int:
    """The first offset of `find_all_text`, or -1."""
    found = find_all_text(text, marker, start, end)
    return found[0] if found else -1


def normalise_space(text: str) -> str:
    """Collapse line breaks and runs of spaces, for analysis (not for offsets)."""
    return re.sub(r"\s+", " ", text).strip()


def word_count(text: str) -> int:
    return len(text.split())


# ---------------------------------------------------------------- sentences

_SENTENCE = re.compile(r"\S.*?(?:[.!?]+[\"”’')\]]*(?=\s|$)|$)", re.DOTALL)
_ABBREVIATION = re.compile(r"\b(?:Mr|Mrs|Ms|Dr|St|Mt|Capt|Col|Gen|Lt|Sgt|Rev|Prof|Messrs|No)\.$")
# Put before a stop: the stop does not end a sentence after a title ("said Mr. Fogg", "to Dr. Seward:--").
NOT_AFTER_TITLE = r"(?<!\bMr)(?<!\bMrs)(?<!\bMs)(?<!\bDr)(?<!\bSt)"
_SENTENCE_RUN = re.compile(r"[^.!?]+(?:[.!?]+[\"'”’)]*|$)")
_SPACED_STOP = re.compile(r"[.!?]+[\"'”’)]*\s+")
_STOP_BEFORE_CAPITAL = re.compile(r"(?<=[.!?])[\"'”’]?\s+(?=[\"'“‘]?[A-Z])")
_STOP = re.compile(r"[.!?]")
_STOP_THEN_SPACE = re.compile(r"[.!?][\"'”’]?\s")


@dataclass(frozen=True)
class Sentence:
    """A sentence with its offsets in the book; `text` has its spaces collapsed."""

    start: int
    end: int
    text: str


def sentences_of(paragraph: Paragraph) -> list[Sentence]:
    """A paragraph's sentences with book offsets; abbreviations like 'Mr.' do not end one."""
    found: list[Sentence] = []
    pending: tuple[int, int] | None = None
    for match in _SENTENCE.finditer(paragraph.text):
        if not match.group(0).strip():
            continue
        start = pending[0] if pending else match.start()
        end = match.end()
        if _ABBREVIATION.search(match.group(0)):
            pending = (start, end)
            continue
        pending = None
        found.append(Sentence(paragraph.start + start, paragraph.start + end,
                              normalise_space(paragraph.text[start:end])))
    if pending:
        start, end = pending
        found.append(Sentence(paragraph.start + start, paragraph.start + end,
                              normalise_space(paragraph.text[start:end])))
    return found


def sentence_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Offsets of the sentences of `text[start:end]`, cut only where a stop (and closing quotes) meets space.

    Each span ends at its stop or closing quote (the space after it is left out).
    """
    spans: list[tuple[int, int]] = []
    cursor = start
    for match in _SPACED_STOP.finditer(text, start, end):
        spans.append((cursor, match.end() - len(match.group(0)) + len(match.group(0).rstrip())))
        cursor = match.end()
    if cursor < end:
        spans.append((cursor, end))
    return spans


@dataclass(frozen=True)
class Run:
    """One run of `sentence_runs`: read like a match (`group`, `start`, `end`)."""

    text: str
    begin: int
    stop: int

    def group(self) -> str:
        return self.text[self.begin : self.stop]

    def start(self) -> int:
        return self.begin

    def end(self) -> int:
        return self.stop


# A title before a name ("Mr. Fogg", "Dr. Seward"), "No." before a number ("No. 7, Saville Row") or "Co." before
# a small letter ("Gregson, Lestrade, and Co. will pocket all the credit") ends no sentence.
_TITLE_STOP = re.compile(r"\b(?:(?P<title>Mr|Mrs|Ms|Dr|St|Mt|Capt|Col|Gen|Lt|Sgt|Rev|Prof|Messrs)|(?P<co>Co)|No)\.$")
_NAME_NEXT, _NUMBER_NEXT, _SMALL_NEXT = re.compile(r"\s+[A-Z]"), re.compile(r"\s+\d"), re.compile(r"\s+[a-z]")


def sentence_runs(text: str, start: int = 0, end: int | None = None) -> Iterator[Run]:
    """Runs of `text[start:end]` up to and including any stop (and closing quotes), or to the end.

    A run keeps the space before it; "3.5" ends a run too, but a title before a name does not
    ("following Mr. Fogg's tracks" is one run, not "following Mr." and "Fogg's tracks"), nor does "No." before a
    number ("at No. 7, Saville Row").
    """
    end = len(text) if end is None else end
    opened: int | None = None
    for match in _SENTENCE_RUN.finditer(text, start, end):
        begin = match.start() if opened is None else opened
        title = _TITLE_STOP.search(text, match.start(), match.end()) if match.end() < end else None
        if title and (_NAME_NEXT if title["title"] else _SMALL_NEXT if title["co"] else _NUMBER_NEXT).match(text, match.end(), end):
            opened = begin
            continue
        opened = None
        yield Run(text, begin, match.end())
    if opened is not None:
        yield Run(text, opened, end)


def split_sentences(text: str) -> list[str]:
    """Sentences of a short text, cut where a stop is followed by space and a capital (or opening quote)."""
    return [s for s in (part.strip() for part in _STOP_BEFORE_CAPITAL.split(text)) if s]


def sentence_around(text: str, start: int, end: int, lo: int, hi: int, *, stop_needs_space: bool = False,
                    ) -> tuple[int, int]:
    """Offsets of the sentence of `text[lo:hi]` (a paragraph) that holds the span `start:end`.

    It opens after the last stop before `start` (with `stop_needs_space`, only a stop followed by
    an optional closing quote and space counts) and closes at the first stop after `end`, else at `hi`.
    """
    opening = _STOP_THEN_SPACE if stop_needs_space else _STOP
    ends = [m.end() for m in opening.finditer(text[lo:start])]
    after = _STOP.search(text, end, hi)
    return lo + (ends[-1] if ends else 0), after.end() if after else hi


# ---------------------------------------------------------------- words

TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")  # a word of folded text, with one apostrophe part ("lamp's")
FUNCTION_WORDS = frozenset(["a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "aren't", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "cannot", "could", "couldn't", "did", "didn't", "do", "does", "doesn't", "doing", "don't", "down", "during", "each", "few", "for", "from", "further", "had", "hadn't", "has", "hasn't", "have", "haven't", "having", "he", "he'd", "he'll", "he's", "her", "here", "here's", "hers", "herself", "him", "himself", "his", "how", "how's", "i", "i'd", "i'll", "i'm", "i've", "if", "in", "into", "is", "isn't", "it", "it's", "its", "itself", "let's", "me", "more", "most", "mustn't", "my", "myself", "no", "nor", "not", "of", "off", "on", "once", "only", "or", "other", "ought", "our", "ours", "ourselves", "out", "over", "own", "same", "shan't", "she", "she'd", "she'll", "she's", "should", "shouldn't", "so", "some", "such", "than", "that", "that's", "the", "their", "theirs", "them", "themselves", "then", "there", "there's", "these", "they", "they'd", "they'll", "they're", "they've", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "wasn't", "we", "we'd", "we'll", "we're", "we've", "were", "weren't", "what", "what's", "when", "when's", "where", "where's", "which", "while", "who", "who's", "whom", "why", "why's", "with", "won't", "would", "wouldn't", "you", "you'd", "you'll", "you're", "you've", "your", "yours", "yourself", "yourselves", "upon", "shall", "will", "may", "might", "must", "one", "two", "also", "yet", "thus", "thee", "thou", "thy", "thine", "ye", "unto", "said", "says", "say", "tell", "told", "know", "knew", "known", "did", "does", "do", "you", "your", "yes", "sir", "mr", "mrs", "miss", "dr", "doctor"])
# Too common in speech to characterise a speaker's words (a different, wider list than FUNCTION_WORDS).
SPEECH_STOPWORDS = frozenset(str.split(
    "the a an and or but if then so of to in on at by for with from as is are was were be been being am it its it's "
    "this that these those there here i me my mine we us our you your yours he him his she her hers they them their "
    "what which who whom whose when where why how not no nor do does did done have has had having will would shall "
    "should can could may might must i'm i've i'll i'd you're you've you'll he's she's we're they're don't didn't "
    "can't won't isn't wasn't aren't weren't let's one all any some more most very just only also too than such "
    "now well yes oh ah out up down over into about again said say says tell told know see come go get got like "
    "man men sir upon much many own same other yet still ever never nothing anything something shall"
))

_LIGATURES = str.maketrans({"æ": "ae", "œ": "oe", "ß": "ss", "ø": "o", "đ": "d", "ł": "l", "’": "'", "‘": "'"})


def fold(text: str) -> str:
    """Case, curly quotes, ligatures and accents folded away: "Hæmoglobin" -> "haemoglobin",
    "Bohème" -> "boheme" (a question typed without the book's accents still meets it)."""
    decomposed = unicodedata.normalize("NFKD", text.casefold().translate(_LIGATURES))
    if decomposed.isascii():  # no combining marks to drop (most text: the per-character filter is slow)
        return decomposed
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def tokens(text: str) -> list[str]:
    """The words of a text, folded (`fold`), in order."""
    return TOKEN.findall(fold(text))


# ---------------------------------------------------------------- model tokens
# The `cl100k_base` BPE (the tokenizer of GPT-3.5/4-class models) from the copy bundled
# inside LiteLLM, so no download is needed; if it cannot be loaded, one token per four
# characters. Estimates and the build-cost benchmark say which counter they used.


@lru_cache(maxsize=1)
def _encoding() -> Any:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    bundled = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    if not bundled.is_dir():
        return None
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))
    try:
        import tiktoken

        return tiktoken.get_encoding("cl100k_base")
    except Exception:  # no tokenizer files: fall back to the character estimate
        return None


def counter_name() -> str:
    """The model-token counter in use: "cl100k_base" or "chars/4"."""
    return "cl100k_base" if _encoding() is not None else "chars/4"


def count_tokens(text: str) -> int:
    """Model tokens in `text`, by `counter_name()`."""
    encoding = _encoding()
    if encoding is None:
        return (len(text) + 3) // 4
    return len(encoding.encode(text, disallowed_special=()))
