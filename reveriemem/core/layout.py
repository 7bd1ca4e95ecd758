"""Where a book's paragraphs break: at blank lines, or, in a book with one paragraph to a line, at every line end.

Project Gutenberg texts wrap their lines at some seventy characters and leave a blank line between
paragraphs. A text exported from an e-book or a word processor often puts each paragraph on one long
line with no blank line between: read by blank lines, a whole chapter (or the whole book) would be one
paragraph, and its speech, its speakers and who is present would be read as one. Such a text is read
with a paragraph at every line end.

A text is read so when blank lines part fewer than one in twenty of its lines and at least one line in
ten is longer than a wrapped line ever is (`LONG_LINE` characters; dialogue makes many lines short).
Wrapped text with almost no blank line at all (fewer than one in fifty lines; a poem's stanzas
are parted by more) whose paragraphs are marked by indentation alone, as old electronic texts print
them, breaks before each indented line when some of its lines are indented and not (nearly) all.
"""

from __future__ import annotations

import re
from functools import lru_cache

LONG_LINE = 120
BLANK_LINES = re.compile(r"(?:[ \t]*\r?\n){2,}")
LINE_ENDS = re.compile(r"(?:[ \t]*\r?\n)+")
INDENTED = re.compile(r"(?:[ \t]*\r?\n)+(?=[ \t]+\S)|(?:[ \t]*\r?\n){2,}")


@lru_cache(maxsize=8)
def paragraph_break(text: str) -> re.Pattern[str]:
    """The pattern of a paragraph break in `text`: `BLANK_LINES`; `LINE_ENDS` for one paragraph to a line;
    `INDENTED` for wrapped lines with paragraphs opening on an indented one."""
    lines = [line for line in text.splitlines() if line.strip()]
    blank = len(BLANK_LINES.findall(text))
    if not lines or blank * 20 >= len(lines):
        return BLANK_LINES
    if sum(len(line.strip()) > LONG_LINE for line in lines) * 10 >= len(lines):
        return LINE_ENDS
    indented = sum(line[:1] in " \t" for line in lines)
    return INDENTED if blank * 50 < len(lines) and 0.05 * len(lines) <= indented <= 0.95 * len(lines) else BLANK_LINES


LAYOUT_NAMES = {BLANK_LINES: "blank lines", LINE_ENDS: "one to a line", INDENTED: "indented first lines"}


def layout_name(text: str) -> str:
    """How `text`'s paragraphs are told apart, in words: "blank lines", "one to a line", "indented first lines"."""
    return LAYOUT_NAMES[paragraph_break(text)]
