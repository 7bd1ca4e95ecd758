"""The narration history dialogue attribution reads: who is told of, and who acts, in each paragraph.

`narrated_at` lists a paragraph's narration mentions of focus characters (each marked when it is the acting
subject of its clause), the other persons acting there (slug ""), the persons told of by a common noun
(`SOMEONE` plus the noun's gender) and each acting "he"/"she" read as the one focus character of that gender
told of before it (`pronoun_acting`). `reveriemem.source_to_memory.dialogue` resolves a tag's pronoun
against it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reveriemem.core.text import Paragraph
from reveriemem.source_to_memory.clauses import (
    acting_pronouns,
    is_action_subject,
    other_subjects,
    persons_told,
    turns_to,
)
from reveriemem.source_to_memory.mentions import Mention


def in_spans(position: int, spans: Sequence[tuple[int, int]]) -> bool:
    return any(a <= position < b for a, b in spans)


def narration_fragments(paragraph: Paragraph, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of a paragraph outside its quotes, absolute offsets."""
    fragments: list[tuple[int, int]] = []
    cursor = paragraph.start
    for a, b in spans:
        if a > cursor:
            fragments.append((cursor, a))
        cursor = max(cursor, b)
    if cursor < paragraph.end:
        fragments.append((cursor, paragraph.end))
    return fragments


def narrated(
    text: str, paragraph: Paragraph, mentions: Sequence[Mention], spans: Sequence[tuple[int, int]],
    gender: Mapping[str, str],
) -> list[tuple[int, str, bool]]:
    """Narration mentions of a paragraph, each marked when it is the acting subject of its clause, in text
    order, with the other persons acting there (slug "": someone who is no focus character)."""
    return [entry for _, entry in narrated_at(text, paragraph, mentions, spans, gender)]


def narrated_at(
    text: str, paragraph: Paragraph, mentions: Sequence[Mention], spans: Sequence[tuple[int, int]],
    gender: Mapping[str, str],
) -> list[tuple[int, tuple[int, str, bool]]]:
    """`narrated`, each entry with its offset, and each acting "he"/"she" read as `pronoun_acting` does."""
    out = []
    topic = turns_to(text, paragraph.start, spans[0][0] if spans else paragraph.end)  # "As for |Passepartout, he"
    for mention in mentions:
        if in_spans(mention.start, spans):
            continue
        fragment_start = max([paragraph.start] + [b for a, b in spans if b <= mention.start])
        out.append((mention.start, (paragraph.index, mention.character,
                                    mention.start == topic or is_action_subject(text, mention, fragment_start))))
    named = [(m.start, m.end) for m in mentions]
    for a, b in narration_fragments(paragraph, spans):
        out += [(at, (paragraph.index, "", True)) for at in other_subjects(text, a, b)
                if not any(s <= at <= e for s, e in named)]
        out += [(at, (paragraph.index, SOMEONE + noun, False)) for at, noun in persons_told(text, a, b)
                if not any(s <= at < e for s, e in named)]
    out.sort(key=lambda pair: pair[0])
    acting = [(at, pronoun_acting(out, at, wanted, gender)) for a, b in narration_fragments(paragraph, spans)
              for at, wanted in acting_pronouns(text, a, b)]
    out += [(at, (paragraph.index, slug, True)) for at, slug in acting if slug]
    return sorted(out, key=lambda pair: pair[0])


def pronoun_acting(told: Sequence[tuple[int, tuple[int, str, bool]]], at: int, wanted: str,
                    gender: Mapping[str, str]) -> str | None:
    """Whom an acting "he"/"she" at `at` stands for ("Mina should be in full confidence. She herself agreed"): the
    one focus character of that gender told of before it in the paragraph, nobody else who may be of it since."""
    before = [entry[1] for offset, entry in told if offset < at]
    mine = {slug for slug in before if gender.get(slug) == wanted}
    if len(mine) != 1:
        return None
    since = before[max(i for i, slug in enumerate(before) if slug in mine) + 1:]
    if any(slug == "" or slug in (SOMEONE, SOMEONE + wanted) for slug in since):
        return None
    return mine.pop()


# A person who is no focus character told of by a common noun, as an entry of the narration history: slug
# SOMEONE plus the noun's gender ("male", "female", "" unknown).
SOMEONE = "~"


def acting_before(here: Sequence[tuple[int, tuple[int, str, bool]]], offset: int) -> list[tuple[int, str, bool]]:
    """The acting subjects told in the line's own paragraph before `offset`. One named there only as an object
    ("But he broke in, cursing the doctor. 'Doctors is all swabs,' he said") is not who "he" is."""
    return [entry for at, entry in here if at < offset and entry[2]]
