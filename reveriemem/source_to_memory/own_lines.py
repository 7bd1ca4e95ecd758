"""The character's own quotes: which quoted speech of a paragraph the character speaks.

Dialogue attribution gives a paragraph's quoted speech to one speaker; a
paragraph can hold two speakers' turns. Each quote takes the speaker of its
own tag (the clause before or after it), of the action beat before it, or of
the turn it continues; only the character's turn is theirs. Where the rules
cannot decide, a quote is withheld, never given to the character.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from reveriemem.core.text import NOT_AFTER_TITLE, Paragraph, normalise_space
from reveriemem.source_to_memory.dialogue import narration_fragments, quote_spans
from reveriemem.source_to_memory.speech_tags import SPEECH_VERBS

WORD = re.compile(r"[A-Za-z][A-Za-z'’]+")

_VERB = rf"(?:{SPEECH_VERBS})"
_TITLE = (r"(?:Mr|Mrs|Miss|Dr|Doctor|Captain|Professor|Lord|Lady|Sir|Madam|Father|Mother|Aunt|Uncle|Colonel|"
          r"Inspector|Sergeant|Squire)\.?\s+")
_NAME = rf"(?:{_TITLE})?[A-Z][a-z'’]+(?:\s+[A-Z][a-z'’]+)?"
_DESCRIPTOR = r"(?:the|my|our|his|her|their)\s+(?:[a-z]+\s+)?[a-z]+"
_SUBJECT = rf"(?:\b(?:he|she|I)\b|{_DESCRIPTOR}|(?:the\s+)?{_NAME})"
_ADVERB = r"(?:\w+ly\s+)?"
# the clause right after a quote: `, said Mara` / `, Mara said` / `, he continued`
_TAG_AFTER = (re.compile(rf"^[\s,;:—–-]*{_ADVERB}{_VERB}\s+({_SUBJECT})"),
              re.compile(rf"^[\s,;:—–-]*({_SUBJECT})\s+{_ADVERB}{_VERB}\b"))
# the clause right before a quote: `Mara said, ` / `said Mara: `
_TAG_BEFORE = (re.compile(rf"({_SUBJECT})\s+{_ADVERB}{_VERB}[\s,:—–-]*$"),
               re.compile(rf"\b{_VERB}\s+({_SUBJECT})[\s,:—–-]*$"))
# after a quote closed by a comma, ! or ?, any `Subject verbed` is its tag (`"Already?" I remonstrated`)
_LOOSE_TAG_AFTER = (re.compile(rf"^[\s—–-]*({_SUBJECT})\s+{_ADVERB}[a-z]+ed\b"),)
# an action beat: a sentence whose subject is a name or a pronoun (`Tobin shook his head.`)
_BEAT = re.compile(rf"^\s*((?:\b(?:He|She|I)\b)|(?:The\s+)?{_NAME})\s+(?:did\s+not\s+|had\s+|was\s+)?[a-z]+")
_NOT_SUBJECTS = {
    "It", "They", "We", "You", "The", "A", "An", "And", "But", "Then", "So", "Yes", "No", "Oh", "Well", "Now",
    "There", "Here", "This", "That", "What", "Why", "How", "When", "Who", "His", "Her", "My", "Our", "Your",
    "Their", "As", "At", "In", "On", "If", "For", "With", "After", "Before", "Still", "Again", "At last",
}
_PRONOUN_GENDER = {"he": "male", "she": "female"}
SELF = "<self>"


def _first_clause(text: str, a: int, b: int) -> str:
    stop = re.search(rf"{NOT_AFTER_TITLE}[.!?;:]", text[a:b])
    return text[a:a + (stop.start() if stop else b - a)]


def _last_clause(text: str, a: int, b: int) -> str:
    fragment = text[a:b].rstrip()
    starts = [m.end() for m in re.finditer(rf"{NOT_AFTER_TITLE}[.!?;]\s", fragment)]
    return fragment[starts[-1] if starts else 0:]


def _tag_subject(clause: str, patterns: Sequence[re.Pattern[str]]) -> str | None:
    for pattern in patterns:
        found = pattern.search(clause)
        if found:
            subject = normalise_space(found.group(1))
            words = subject.split()
            if words[0] in _NOT_SUBJECTS and words[0] not in ("The",):
                continue
            if words[0] == "The" and len(words) == 1:
                continue
            return subject
    return None


def _beat_subject(text: str, a: int, b: int) -> str | None:
    """The subject of the last sentence of a narration fragment, when it is a beat by a person."""
    sentence = _last_clause(text, a, b)
    found = _BEAT.match(sentence)
    if not found:
        return None
    subject = normalise_space(found.group(1))
    if subject.split()[0] in _NOT_SUBJECTS:
        return None
    return subject


def _name_words(name: str) -> set[str]:
    titles = re.compile(rf"^{_TITLE}$")
    return {w.lower() for w in WORD.findall(name) if not titles.match(w + " ") and len(w) > 1}


def _key(subject: str, own: set[str], others: dict[str, set[str]]) -> str:
    """Who a tag's subject is: `SELF`, `other:<slug>` (another focus character by name), or the subject itself."""
    if subject in ("he", "she", "I", "He", "She"):
        return subject.lower() if subject != "I" else "I"
    words = {w.lower() for w in WORD.findall(re.sub(rf"^(?:the\s+)?{_TITLE}", "", subject))}
    if words & own:
        return SELF
    for slug, name in others.items():
        if words & name:
            return f"other:{slug}"
    return subject.lower()


def own_quote_spans(text: str, paragraph: Paragraph, start: int, end: int, name: str | None = None,
                    gender: str | None = None, names: dict[str, str] | None = None) -> list[tuple[int, int]]:
    """The quotes of a paragraph inside `[start, end)` that the character speaks.

    Each quote takes the subject of its own speech tag (the clause right
    before it, else the clause right after it), or of an action beat in the
    narration just before it; an untagged quote continues the turn before it
    (the first ones, the first tagged turn), and a he/she tag continues the
    turn before it unless its gender is not the character's. With one
    speaker in the paragraph every quote is theirs; with more, only the turn
    naming the character (`name`), else the first tagged turn not naming
    another focus character (`names`, slug -> name), is kept.
    """
    found = quote_spans(paragraph)[0]
    if not found:  # a poem's speech, printed without quotation marks (`verse_speech`): the utterance is the line
        return [(start, end)] if start < end else []
    spans = [(a, b) for a, b in found if a >= start and b <= end]
    if len(spans) < 2:
        return spans
    fragments = narration_fragments(paragraph, spans)
    after = {a: (a, b) for a, b in fragments}  # fragment starting where a quote ends
    before = {b: (a, b) for a, b in fragments}  # fragment ending where a quote starts
    own = _name_words(name) if name else set()
    others = {slug: _name_words(n) for slug, n in (names or {}).items() if not name or n != name}
    others = {slug: words - own for slug, words in others.items() if words - own}
    subjects: list[str | None] = []
    for i, (a, b) in enumerate(spans):
        subject = None
        lead = before.get(a)
        if lead is not None:
            first_clause_used = i > 0 and _tag_subject(_first_clause(text, *lead), _TAG_AFTER) is not None
            last = _last_clause(text, *lead)
            if not (first_clause_used and last.strip() == _first_clause(text, *lead).strip()):
                subject = _tag_subject(last, _TAG_BEFORE)
        if subject is None and b in after:
            clause = _first_clause(text, *after[b])
            subject = _tag_subject(clause, _TAG_AFTER)
            if subject is None and re.search(r"[,!?—–-]\s*[\"”’']*$", text[a:b]):
                subject = _tag_subject(clause, _LOOSE_TAG_AFTER)
        if subject is None and lead is not None and re.search(r"[.!?]", text[lead[0]:lead[1]]):
            subject = _beat_subject(text, *lead)
        subjects.append(subject)
    keys: list[str | None] = []
    current: str | None = None
    for subject in subjects:
        if subject is not None:
            key = _key(subject, own, others)
            wanted = _PRONOUN_GENDER.get(key)
            if wanted is not None and current is not None:
                if current == SELF and gender in ("male", "female") and gender != wanted:
                    key = f"other:{key}"
                elif current in _PRONOUN_GENDER and current != key:
                    pass  # he after she: a second speaker
                else:
                    key = current
            current = key
        keys.append(current)
    tagged = [k for k in keys if k is not None]
    if len(set(tagged)) <= 1:
        return spans
    filled = [k if k is not None else tagged[0] for k in keys]
    owner = SELF if SELF in filled else next((k for k in filled if not k.startswith("other:")), None)
    return [span for span, key in zip(spans, filled) if key == owner]


# -- excerpts ------------------------------------------------------------


