"""Speech printed in single quotation marks, read as the double ones every rule expects.

Many editions quote speech in single marks and a quotation inside speech in double ones ("'Not a
wink,' Bob answered. 'Cy wrote \"gone\" on the slate.'"). The project reads speech from double marks
(dialogue attribution, presence, spoken facts, own lines), so a book whose speech is in single marks
is read with the two kinds swapped: each single mark that opens or closes speech becomes a double
one, and each double mark a single one. An apostrophe ("don't", "the Smiths' boat", "'tis") is left
as it is. Every replacement is one character for one, so every offset is still the file's.

A book is read so when more of its paragraphs open on speech in single marks than hold a double mark at
all (twice as many, and at least five), in its body: a book quoting speech in double marks opens almost
no paragraph on a single one.
"""

from __future__ import annotations

import re

from reveriemem.core.text import find_body, split_paragraphs

# A single mark opens speech at a paragraph's start or after a space, a bracket or a dash, before a letter, a
# digit, an underscore (italics), a stop ("'...and then'") or another mark ("''Tis"), unless it stands for
# letters left out ("'tis", "'em", "'Change"). It closes speech after a stop, a comma, a dash or a double mark
# (a quotation inside speech ends with it), before a space, a dash, a bracket or another mark. An apostrophe
# inside a word ("don't") or after one ("Smiths' boat") does neither; nor does an opening inside a paragraph
# that nothing closes ("on 'Change", "'Cisco"): speech opened there would run on through the narration.
_ELIDED = (r"(?:tis|twas|twere|twill|twould|em|cause|bout|til|neath|prentice|change|gainst|mid|midst|twixt|"
           r"tween|scape|n)\b")
_OPENS = re.compile(rf"(?:(?<=^)|(?<=[\s(\[—–-]))['‘](?!{_ELIDED})(?=[\w.…'‘’\"“])", re.IGNORECASE)
_CLOSES = re.compile(r"(?<=[.,!?;:—–\-\"”])['’](?=\s|$|[)\]—–\-'’\"”])")
_DOUBLE = re.compile("[\"“”]")
_SWAPPED = str.maketrans({'"': "'", "“": "‘", "”": "’"})


def speech_in_single_quotes(text: str) -> bool:
    """Does the book quote speech in single marks (see the module's note)? Read in its body only (a licence
    quotes in double marks), counting a paragraph that opens on speech only where the speech also closes (a
    stanza opening "'Mid the heather" does not)."""
    start, end = find_body(text)
    opening = double = 0
    for paragraph in split_paragraphs(text, start, end):
        marks = speech_marks(paragraph.text)
        opening += len(marks) > 1 and marks[0] == (0, "open")
        double += _DOUBLE.search(paragraph.text) is not None
    return opening >= 5 and opening > 2 * double


def speech_marks(paragraph: str) -> list[tuple[int, str]]:
    """(offset in `paragraph`, "open" / "close") of each single mark that opens or closes speech; a speech
    still open at the paragraph's end goes on in the next paragraph, as with double marks."""
    marks: list[tuple[int, str]] = []
    at = 0
    while (opening := _OPENS.search(paragraph, at)) is not None:
        closing = _CLOSES.search(paragraph, opening.end())
        if closing is None:
            if opening.start() == 0:
                marks.append((0, "open"))
                break
            at = opening.end()  # an apostrophe after all ("on 'Change"): look on
            continue
        marks += [(opening.start(), "open"), (closing.start(), "close")]
        at = closing.end()
    return marks


def read_speech_quotes(text: str) -> str:
    """`text` as the rules read it: unchanged when its speech is in double marks; otherwise
    `swap_speech_marks`."""
    return swap_speech_marks(text) if speech_in_single_quotes(text) else text


def swap_speech_marks(text: str) -> str:
    """`text` with single and double marks swapped where they quote (same length, same offsets), for a book
    whose speech is in single marks."""
    chars = list(text.translate(_SWAPPED))
    for paragraph in split_paragraphs(text):
        for offset, kind in speech_marks(paragraph.text):
            chars[paragraph.start + offset] = "“" if kind == "open" else "”"
    return "".join(chars)
