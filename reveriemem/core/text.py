"""Reading a book file: decoding, Project Gutenberg framing, paragraphs.

Every offset is a character offset into the decoded text (a UTF-8 byte-order
mark, when present, is dropped by decoding; line endings are kept as they
are, CRLF included), so any span can be cited from the original.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from reveriemem.core.errors import BookInputError

MAX_BOOK_BYTES = 64 * 1024 * 1024

_START_RE = re.compile(
    r"^\*{3}\s*START OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK[^\n]*$", re.IGNORECASE | re.MULTILINE
)
_END_RE = re.compile(
    r"^(?:\*{3}\s*END OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK"
    r"|End of (?:the )?Project Gutenberg(?:'s)?\b)",
    re.IGNORECASE | re.MULTILINE,
)
_PARAGRAPH_BREAK_RE = re.compile(r"(?:[ \t]*\r?\n){2,}")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class DecodedText:
    text: str
    encoding: str


@dataclass(frozen=True)
class Paragraph:
    """A block of text between blank lines, with its offsets in the book."""

    index: int
    start: int
    end: int
    text: str

    @property
    def words(self) -> int:
        return len(self.text.split())


def decode_book_bytes(raw: bytes, source: str) -> DecodedText:
    """Decode a book's bytes as UTF-8 (BOM allowed), else Windows-1252, else Latin-1.

    Raises BookInputError for empty, binary or undecodable input.
    """
    if not raw.strip():
        raise BookInputError(f"The book file {source} is empty.")
    if b"\x00" in raw[:65536]:
        raise BookInputError(
            f"The book file {source} looks binary (it contains NUL bytes); give a plain-text file."
        )
    for encoding in ("utf-8-sig", "cp1252", "latin-1"):
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError:
            continue
        controls = len(_CONTROL_RE.findall(text))
        if controls <= max(2, len(text) // 1000):
            return DecodedText(text=text, encoding="utf-8" if encoding == "utf-8-sig" else encoding)
    raise BookInputError(
        f"The book file {source} could not be decoded as UTF-8, Windows-1252 or Latin-1 text."
    )


def read_book_file(path: Path) -> DecodedText:
    """Read and decode a book file, with one clear error for each bad input."""
    if not path.exists():
        raise BookInputError(f"The book file {path} does not exist.")
    if not path.is_file():
        raise BookInputError(f"The book path {path} is not a file.")
    size = path.stat().st_size
    if size > MAX_BOOK_BYTES:
        raise BookInputError(
            f"The book file {path} is {size // (1024 * 1024)} MiB; the limit is "
            f"{MAX_BOOK_BYTES // (1024 * 1024)} MiB."
        )
    return decode_book_bytes(path.read_bytes(), str(path))


def find_body(text: str) -> tuple[int, int]:
    """Offsets of the story body: inside the Gutenberg START/END markers if present."""
    start, end = 0, len(text)
    start_match = _START_RE.search(text)
    if start_match:
        start = start_match.end()
    end_match = _END_RE.search(text, start)
    if end_match:
        end = end_match.start()
    while start < end and text[start] in "\r\n":
        start += 1
    while end > start and text[end - 1] in " \t\r\n":
        end -= 1
    return start, end


def split_paragraphs(text: str, start: int = 0, end: int | None = None) -> list[Paragraph]:
    """Paragraphs of `text[start:end]`: blocks separated by blank lines."""
    end = len(text) if end is None else end
    paragraphs: list[Paragraph] = []
    cursor = start
    for match in _PARAGRAPH_BREAK_RE.finditer(text, start, end):
        _append_paragraph(paragraphs, text, cursor, match.start())
        cursor = match.end()
    _append_paragraph(paragraphs, text, cursor, end)
    return paragraphs


def _append_paragraph(out: list[Paragraph], text: str, start: int, end: int) -> None:
    block = text[start:end]
    stripped = block.strip()
    if not stripped:
        return
    lead = len(block) - len(block.lstrip())
    real_start = start + lead
    real_end = real_start + len(stripped)
    out.append(Paragraph(index=len(out), start=real_start, end=real_end, text=stripped))


def normalise_space(text: str) -> str:
    """Collapse line breaks and runs of spaces, for analysis (not for offsets)."""
    return re.sub(r"\s+", " ", text).strip()


def word_count(text: str) -> int:
    return len(text.split())
