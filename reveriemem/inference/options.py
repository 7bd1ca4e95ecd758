"""A question as a user types it: the question, and its options when it carries them.

Options are read in the forms users type them: "A) ...", "(A) ...", "A. ...", "A: ...", with capital
letters, small letters or numbers (up to 26: A-Z, a-z, 1-26), on one line or several. They are keyed A, B, C...
whatever their marks, and the reply names an option by the mark the user typed (`Question.label`). An
option that is itself a refusal ("I cannot answer this", "I don't know") is the question's `refusal`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# An option's marker, typed as "A)", "(A)", "A." or "A:", with capitals, small letters or numbers.
_MARKERS = tuple(re.compile(rf"(?:(?<=\s)|^)(?:\(({labels})\)|({labels})([).:]))(?=\s)")
                 for labels in ("[A-Z]", "[a-z]", "2[0-6]|1[0-9]|[1-9]"))
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_FIRST_PERSON = re.compile(r"\W*(?:I\b|None\b|No idea\b|Not known\b)", re.IGNORECASE)
_REFUSING = re.compile(r"\b(?:can ?not|can't|cannot|don't|do not|couldn't|could not)\s+(?:answer|know|say|tell)\b"
                       r"|\bno idea\b|\bnot know\b|\bnone of (?:these|the above)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Question:
    text: str  # the question without its options
    options: dict[str, str] = field(default_factory=dict)  # letter (A, B, ...) -> option, in order
    refusal: str | None = None  # the option that is itself a refusal, if any
    labels: dict[str, str] = field(default_factory=dict)  # letter -> the label as typed ("a", "1"), when not the letter

    @property
    def answers(self) -> dict[str, str]:
        """The options read against memory (the refusal option is not one)."""
        return {k: v for k, v in self.options.items() if k != self.refusal}

    def label(self, letter: str) -> str:
        """The option's label as the user typed it: "(b)" answers "b) Tobin", "(2)" answers "2. Tobin"."""
        return self.labels.get(letter, letter)


def parse_options(text: str) -> Question:
    """The question and its options when it carries at least two, marked in order from A, a or 1 (the
    first of those that marks two where options can stand); the options are keyed A, B, C... whatever
    their marks. One mark may be skipped: a refusal typed "E)" after "C)" is an option of its own, not the
    end of option C. Options stand after the question's end ("Who lit it? 1. Mara 2. Tobin") or each at the
    start of a line, not inside a sentence ("Did he pay 1. or 2. crowns?", "Prof. A. Smith and Dr. B.
    Jones"); capitals closed by a bracket ("Who lit it A) Mara B) Tobin") stand anywhere. Numbered
    questions ("1. Who lit it? 2. When?", "1) who lit it, and 2) when?") are one question, not options, and so
    is a question whose marks repeat ("A) cart A) cask B) ..."). A question typed after the options, when none
    comes before them, is the question, not the end of the last option ("A) x B) I don't know. Which cask?")."""
    lines = "\n".join(" ".join(line.split()) for line in text.splitlines() if line.strip())
    for marker in _MARKERS:
        found, bracketed = _marks(lines, marker, skip=True)
        if _gaps(found) and not _REFUSING.search(lines[found[-1][2]:]):
            found, bracketed = _marks(lines, marker, skip=False)  # a skip only before a refusal that ends them
        if len(found) < 2:
            continue
        first = found[0][1]
        if (marker is _MARKERS[0] and bracketed) or _ends_question(lines[:first]) or lines[first - 1:first] == "\n":
            break
    else:
        return Question(" ".join(text.split()))
    if _repeated(lines, marker, found):  # "A) cart A) cask B) ...": which A is meant is not ours to guess
        return Question(" ".join(text.split()))
    before = lines[:found[0][1]]
    ending = len(lines)
    if not before.strip() or (_ends_question(before) and "?" not in before):  # the question may follow the options
        ending = found[-1][2] + _question_after(lines[found[-1][2]:])
    options = {}
    for i, (label, _, end) in enumerate(found):
        stop = found[i + 1][1] if i + 1 < len(found) else ending
        options[_letter(label)] = " ".join(lines[end:stop].split())
    numbered = marker is not _MARKERS[0]
    if any(not v for v in options.values()) or (numbered and any(v.endswith("?") for v in options.values())):
        return Question(" ".join(text.split()))
    # the refusal is the last option that refuses in the first person ("I don't know", "None of these"), else
    # the last that refuses at all: "He did not know what to do with it" may be an answer
    refusing = [k for k, v in options.items() if _REFUSING.search(v)]
    refusal = next((k for k in reversed(refusing) if _FIRST_PERSON.match(options[k])), refusing[-1] if refusing else None)
    labels = {_letter(label): label for label, _, _ in found if label != _letter(label)}
    return Question(" ".join(f"{before} {lines[ending:]}".split()), options, refusal, labels)


def _question_after(last: str) -> int:
    """Where a question typed after the options starts in the last option's text (its length if none): after
    the option's first sentence, on a new line or after a stop that ends a sentence, the rest ending with "?"
    ("C) I don't know. Which cask did you fill?"; "C) Mr. Smith" ends at no stop)."""
    for cut in re.finditer(r"\n|(?<=[.!])[\"”’')]*\s+", last):
        rest = last[cut.end():].rstrip().rstrip("\"”’')")
        if rest.endswith("?") and (cut.group() == "\n" or (rest.lstrip("\"“‘'(")[:1].isupper()
                                                            and _ends_question(last[:cut.end()]))):
            return cut.end()
    return len(last)


def _marks(lines: str, marker: re.Pattern[str], skip: bool) -> tuple[list[tuple[str, int, int]], bool]:
    """The marks in order from the first (A, a or 1), each the next letter, or with `skip` the last one the
    letter after next ("A) ... B) ... C) ... E) I don't know"); and whether every mark is a letter closed by a
    bracket or set in brackets."""
    found: list[tuple[str, int, int]] = []
    bracketed = True
    for m in marker.finditer(lines):
        label = m.group(1) or m.group(2)
        index, last = LETTERS.index(_letter(label)), (LETTERS.index(_letter(found[-1][0])) if found else -1)
        if index == last + 1 or (skip and found and index == last + 2 and not _gaps(found)):
            found.append((label, m.start(), m.end()))
            bracketed = bracketed and m.group(3) in (None, ")")
    return found, bracketed


def _repeated(lines: str, marker: re.Pattern[str], found: list[tuple[str, int, int]]) -> bool:
    """Is a mark found typed again, in the same form and with text after it, after the first ("A) cart A) cask
    B) ...")? A mark in another form ("A) Plan A. B) Plan B.") or ending an option ("1. Plan 1.\n2. ...")
    repeats none."""
    def form(start: int, end: int) -> str:
        return "(" if lines[start] == "(" else lines[end - 1]
    marks = {(label, form(start, end)) for label, start, end in found}
    starts = [start for _, start, _ in found] + [len(lines)]
    return any((m.group(1) or m.group(2), form(m.start(), m.end())) in marks
               and lines[m.end():min(s for s in starts if s > m.start())].strip()
               for m in marker.finditer(lines, found[0][1]) if m.start() not in starts)


def _gaps(found: list[tuple[str, int, int]]) -> int:
    """How many marks were skipped between the marks found."""
    return sum(LETTERS.index(_letter(b[0])) - LETTERS.index(_letter(a[0])) > 1 for a, b in zip(found, found[1:]))


# Words a stop ends that end no sentence: titles and abbreviations before a name.
_TITLES = frozenset(("mr", "mrs", "ms", "dr", "st", "prof", "capt", "lieut", "col", "gen", "sgt", "rev", "messrs",
                     "mme", "mlle", "jr", "sr", "no", "vol", "ch", "mt", "ft"))


def _ends_question(before: str) -> bool:
    """Does the text before the first mark end a question or a sentence ("...?", "...:", '..."Go!"', "Pick one.")
    rather than stop at an initial or a title ("Mr.", "J.")?"""
    before = before.rstrip()
    if before.rstrip("\"”’')").endswith(("?", ":", "!")):
        return True
    last = before.rsplit(None, 1)[-1].rstrip(".").lower() if before else ""
    return before.endswith(".") and len(last) >= 2 and last not in _TITLES


def _letter(label: str) -> str:
    return LETTERS[int(label) - 1] if label.isdigit() else label.upper()
