"""Speech printed in single quotation marks, read as the double ones every rule expects.

Many editions quote speech in single marks and a quotation inside speech in double ones ("'Not a
wink,' Bob answered. 'Cy wrote \"gone\" on the slate.'"). The project reads speech from double marks
(dialogue attribution, presence, spoken facts, own lines), so a book whose speech is in single marks
is read with the two kinds swapped: each single mark that opens or closes speech becomes a double
one, and each double mark a single one. An apostrophe ("don't", "the Smiths' boat", "'tis") is left
as it is. Every replacement is one character for one, so every offset is still the file's.

A book is read so when more of its paragraphs open on a single mark before a word than hold a double
mark at all (twice as many, and at least five): a book quoting speech in double marks opens almost no
paragraph on a single one.
"""

from __future__ import annotations

import re

from reveriemem.core.text import split_paragraphs

# A single mark opens speech at a paragraph's start or after a space, a bracket or a dash, before a letter,
# unless it stands for letters left out ("'tis", "'em"). It closes speech after a stop, a comma or a dash,
# before a space or the paragraph's end. An apostrophe inside a word ("don't") or after one ("Smiths'
# boat") does neither.
_ELIDED = r"(?:tis|twas|twere|twill|twould|em|cause|bout|til|neath|prentice)\b"
_OPENS = re.compile(rf"(?:(?<=^)|(?<=[\s(\[—–-]))['‘](?!{_ELIDED})(?=[A-Za-z])", re.IGNORECASE)
_CLOSES = re.compile(r"(?<=[.,!?;:—–-])['’](?=\s|$|\))")
_OPENS_PARAGRAPH = re.compile(rf"['‘](?!{_ELIDED})[A-Za-z]", re.IGNORECASE)
_DOUBLE = re.compile("[\"“”]")
_SWAPPED = str.maketrans({'"': "'", "“": "‘", "”": "’"})


def speech_in_single_quotes(text: str) -> bool:
    """Does the book quote speech in single marks (see the module's note)?"""
    opening = double = 0
    for paragraph in split_paragraphs(text):
        opening += _OPENS_PARAGRAPH.match(paragraph.text) is not None
        double += _DOUBLE.search(paragraph.text) is not None
    return opening >= 5 and opening > 2 * double


def speech_marks(paragraph: str) -> list[tuple[int, str]]:
    """(offset in `paragraph`, "open" / "close") of each single mark that opens or closes speech; a speech
    still open at the paragraph's end goes on in the next paragraph, as with double marks."""
    marks: list[tuple[int, str]] = []
    at = 0
    while (opening := _OPENS.search(paragraph, at)) is not None:
        marks.append((opening.start(), "open"))
        closing = _CLOSES.search(paragraph, opening.end())
        if closing is None:
            break
        marks.append((closing.start(), "close"))
        at = closing.end()
    return marks


def read_speech_quotes(text: str) -> str:
    """`text` as the rules read it: unchanged when its speech is in double marks; otherwise with single and
    double marks swapped where they quote (same length, same offsets)."""
    if not speech_in_single_quotes(text):
        return text
    chars = list(text.translate(_SWAPPED))
    for paragraph in split_paragraphs(text):
        for offset, kind in speech_marks(paragraph.text):
            chars[paragraph.start + offset] = "“" if kind == "open" else "”"
    return "".join(chars)
