"""Speech in a poem printed without quotation marks: an epic's speeches, told by their formulas.

Paradise Lost prints no quotation mark at all. A speech follows the sentence that introduces it, a
sentence ending on the verb of speaking ("To whom th’ Arch-Enemy ... Breaking the horrid silence thus
began.", "Whereto with speedy words th’ Arch-fiend reply’d.", "To whom thus _Eve_ repli’d.") or an
elliptical "To whom the Angel."; it runs until the narration takes up again ("So spake th’ Apostate
Angel", "He ended", "So saying") or the next speech is introduced. The speaker is the one focus
character the introducing sentence names, else the one the closing formula names ("So spake the
Son"); a speaker who is no focus character (Beelzebub, "his bold Compeer") is recorded as unknown,
so the line is never given to a focus character.

A speech told inside another is part of it: Raphael's story of the war in Heaven, told to Adam, holds
the words of Satan and of the Son, each introduced and closed by the same formulas. The speeches are
read as a stack. A formula that introduces a speech while a story is being told (the open speech so
far tells of others, "he" and "they", more than it speaks to someone, "thou" and "ye") opens a speech
inside it; while any other speech is open, or when it introduces an answer ("To whom ... repli’d"),
the speech open is over (its closing formula was missed, or it was answered). A closing formula
closes the innermost speech, but not an outermost one whose speaker it does not name ("So spake the
Son" inside Raphael's story closes a speech of the Son's the formulas missed, not Raphael's). Only
the outermost speeches are the poem's dialogue: what is told inside one is quoted, so no one named in
a story told is read as present where it is told.

`speeches` gives them as (speaker, start, end); `attribute_dialogue` reads them as the quoted speech
of a book `reads_as_verse` (lines opening on capitals, no quotation marks). One utterance is kept per paragraph
(the first speech in it), as for quoted speech.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from reveriemem.core.text import Paragraph
from reveriemem.source_to_memory.mentions import Mention

_VERB = (r"(?:began|repli[’']?d|reply[’']?d|replied|answer[’']?d|answerd|answered|return[’']?d|returnd|"
         r"spake|spoke|said|cri[’']?d|cry[’']?d|call[’']?d)")
_SENTENCE = re.compile(r"[^.!?]+(?:[.!?]|$)")  # the last one may end on a colon
_ENDS_ON_VERB = re.compile(rf"\b{_VERB}\s*[.:]$")
_OPENS_REPLY = re.compile(r"^(?:To|T[’'])\s+whom\b|^(?:Whereto|To\s+which)\b|^(?:And\s+)?(?:[Hh]im|[Hh]er|[Tt]hem)\s+thus\b")
_THUS = re.compile(r"\bthus\b")
# A closing formula names the speaker of a speech no longer than this (some sixty lines): a longer one may
# run on past a formula missed, and the name would be another's.
_NAMED_AFTER = 3_000
_CLOSES = re.compile(r"^(?:(?:So|Thus)\s+(?:spake|spoke|saying|said|talk[’']?d)|(?:He|She)\s+(?:ended|ceas[’']?d|said)|"
                     r"(?:He|She)\s+scarce\s+had|Thus\s+while\s+(?:he|she)\s+spake|"
                     r"Thus\s+_?[A-Z][\w’']*_?\s+(?:\w+ing|with\s+words))\b(?!\s+not\b)")
# Who a passage is about: a speech speaks to someone ("thou", "ye"), a story told speaks of others ("he",
# "they"). A speech that so far says "he" and "they" more often than "thou" and "ye" is a story, and the
# speeches told in it are its own; in any other, a new speech means the one open ended unmarked.
_TO_SOMEONE = re.compile(r"\b(?:thou|thee|thy|thine|ye|you|your|yours)\b", re.IGNORECASE)
_OF_OTHERS = re.compile(r"\b(?:he|him|his|she|her|hers|they|them|their|theirs)\b", re.IGNORECASE)


def reads_as_verse(paragraphs: Sequence[Paragraph]) -> bool:
    """Is the book a poem whose speech has no quotation marks? Four in five of the lines that carry a
    paragraph on start with a capital (a verse line does, a wrapped prose line seldom: 8-13% in the
    novels here, whatever the wrap width), and hardly a paragraph opens a double quotation (one in a
    hundred: a stray mark does not make a poem prose). Its speech is then read by the formulas here."""
    carried = [line.lstrip() for paragraph in paragraphs for line in paragraph.text.splitlines()[1:] if line.strip()]
    quoted = sum(any(mark in paragraph.text for mark in '"“') for paragraph in paragraphs)
    return (bool(carried) and quoted <= 0.01 * len(paragraphs)
            and sum(bool(_VERSE_LINE.match(line)) for line in carried) >= 0.8 * len(carried))


_VERSE_LINE = re.compile(r"[_'‘’(]*[A-Z]")  # a line opening on a capital ("_Eve_", "’Twixt", "'Tis")


def speeches(text: str, paragraphs: Sequence[Paragraph], mentions: Sequence[Mention],
             genders: Mapping[str, str]) -> list[tuple[str | None, int, int]]:
    """(speaker, start, end) of each speech told in the poem's own narration; a speech told inside another
    (a story one tells, with the words of those in it) is part of the teller's."""
    sentences = [(paragraph.start + m.start(), paragraph.start + m.end())
                 for paragraph in paragraphs for m in _SENTENCE.finditer(paragraph.text)]
    # running counts of the words that tell of others and that speak to someone, sentence by sentence: a
    # speech's share is read in constant time however long it has run
    of_others, to_someone = [0], [0]
    for start, end in sentences:
        of_others.append(of_others[-1] + len(_OF_OTHERS.findall(text, start, end)))
        to_someone.append(to_someone[-1] + len(_TO_SOMEONE.findall(text, start, end)))
    # a heading left out between two paragraphs (a new Book) closes every speech: a speech or a story told
    # runs on across one only when no formula is missed, which a poem this long does not promise
    breaks = {paragraph.start for before, paragraph in zip(paragraphs, paragraphs[1:])
              if paragraph.index > before.index + 1}
    found: list[tuple[str | None, int, int]] = []
    stack: list[tuple[str | None, int, int]] = []  # open speeches, outermost first: (speaker, where its words
    # begin, the index of the sentence they begin with)

    def close(at: int, closing: tuple[int, int] | None) -> None:
        speaker, begun, _ = stack.pop()
        if not stack:
            if speaker is None and closing is not None and at - begun <= _NAMED_AFTER:
                speaker = _closer(text, mentions, *closing)  # "So spake the Son": the name right after the formula
            found.append((speaker, begun, at))

    for k, (start, end) in enumerate(sentences):
        if start in breaks:
            while stack:
                close(start, None)
        sentence = " ".join(text[start:end].split())
        if stack and _CLOSES.match(sentence):
            named = _closer(text, mentions, start, end)
            if named is None or stack[-1][0] in (None, named) or len(stack) > 1:
                close(start, (start, end))  # not when it names another than the one speaking: a speech we missed
        if _introduces(sentence):  # also right after a close ("He ended; and thus _Adam_ last reply’d.")
            told = stack and of_others[k] - of_others[stack[-1][2]] > to_someone[k] - to_someone[stack[-1][2]]
            if stack and (_OPENS_REPLY.match(sentence) or not told):
                close(start, None)  # an answer, or a speech that tells no story: the one open is over
            stack.append((_speaker(text, mentions, start, end, genders), end, k + 1))
    while stack:
        close(paragraphs[-1].end if paragraphs else 0, None)
    return found


def _introduces(sentence: str) -> bool:
    if _ENDS_ON_VERB.search(sentence):
        return bool(_THUS.search(sentence) or _OPENS_REPLY.match(sentence))
    return bool(_OPENS_REPLY.match(sentence)) and len(sentence.split()) <= 7  # "To whom the Angel."


# A name after a preposition is spoken to or of, not the speaker ("thus to _Eve_ repli’d", "On _Adam_, whom
# imbracing, thus she spake", "the Throne of God").
_NOT_SUBJECT = re.compile(r"\b(?:to|of|on|upon|unto|at|with|from|by|for|toward|towards|against|before|behind|"
                          r"his|her|their)\s+$", re.IGNORECASE)
_EXCEPTED = re.compile(r"\s*,?\s*(?:except|save)\b", re.IGNORECASE)  # "then whom, _Satan_ except, none higher sat"
_PRONOUN = re.compile(r"\b(?:thus\s+(he|she)\b|(he|she)\s+(?:\w+\s+){0,3}?" + _VERB + r")")


def _speaker(text: str, mentions: Sequence[Mention], start: int, end: int, genders: Mapping[str, str]) -> str | None:
    """The one focus character the introducing sentence names as its subject, when a pronoun that says who
    speaks ("thus she spake") does not contradict them."""
    named = _named(text, mentions, start, end)
    pronoun = _PRONOUN.search(" ".join(text[start:end].split()))
    if named and pronoun and genders.get(named) != {"he": "male", "she": "female"}[pronoun.group(1) or pronoun.group(2)]:
        return None
    return named


def _closer(text: str, mentions: Sequence[Mention], start: int, end: int) -> str | None:
    """The focus character named right after a closing formula ("So spake th’ Apostate Angel"), or None."""
    sentence = text[start:end]
    formula = _CLOSES.match(sentence.lstrip())
    if formula is None:
        return None
    after = start + len(sentence) - len(sentence.lstrip()) + formula.end() + 1
    return next((m.character for m in mentions if after <= m.start < end and not m.ambiguous
                 and re.fullmatch(r"\s*(?:(?:the|th[’'])\s*)?", text[after:m.start], re.IGNORECASE)), None)


def _named(text: str, mentions: Sequence[Mention], start: int, end: int) -> str | None:
    """The one focus character named in text[start:end] not after a preposition, or None (nobody, or more
    than one)."""
    named = [m.character for m in mentions if start <= m.start < end and not m.ambiguous
             and not _NOT_SUBJECT.search(text, max(start, m.start - 12), m.start) and not _EXCEPTED.match(text, m.end)]
    return named[0] if len(set(named)) == 1 else None
