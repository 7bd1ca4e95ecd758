"""Where a focus character dies: the character file's `dies:` marker, else a plain narrated statement.

A death ends knowledge: nothing is granted to a character from their death
on (`reveriemem.source_to_memory.visibility`), and their presence in a scene
ends there (`reveriemem.source_to_memory.rosters`).

Detection is deliberately narrow, since a false death would silence a living
character for the rest of the book. It reads narration only (speech may be
mistaken, a lie or a figure of speech), names only (a pronoun or descriptor
could mean anyone), and the forms in which a text states a death plainly:
"X was dead.", "X died", "X was killed", "the dead body of X", "X's corpse".
"Dead" must close its clause (so "dead tired", "dead asleep" are not
deaths); a negation, a modal or a conditional before the verb ("was not
dead", "would have died", "if X died", "nearly died") cancels it. A declared
`dies:` marker wins over detection; `dies: never` turns detection off for
that character.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from reveriemem.core.characters import Character
from reveriemem.core.text import split_paragraphs
from reveriemem.source_to_memory.dialogue import in_spans, quote_spans

DEATH_VERSION = "death-v1"

_STATED_AFTER_NAME = re.compile(
    r"(?:\s+(?:was|is|lay|lies)\s+(?:now\s+|already\s+|quite\s+|stone\s+|stark\s+)?(?:dead|lifeless)"
    r"(?=\s*(?:[.;!,—–]|--|$|\s+and\s|\s+in\s|\s+on\s|\s+upon\s|\s+at\s))"
    r"|\s+(?:had\s+)?died\b(?!\s+(?:away|down|out|of\s+laughing))"
    r"|\s+(?:was|had\s+been)\s+(?:killed|slain|murdered|shot\s+dead)\b)"
)
_BODY_OF = re.compile(r"\b(?:the\s+(?:dead\s+body|corpse)\s+of)\s+$")
_POSSESSIVE_BODY = re.compile(r"(?:'s|’s)\s+(?:dead\s+body|corpse)\b")
_CANCELS = re.compile(
    r"\b(?:not|never|if|unless|whether|would|could|should|might|may|must|nearly|almost|lest|"
    r"suppose|supposing|perhaps|feared|fear|thought|believed|as\s+if|as\s+though)\b[^.;!?]*$",
    re.IGNORECASE,
)


def declared_deaths(characters: Sequence[Character]) -> dict[str, int | None]:
    """Per character with a `dies:` entry: its resolved offset, or None for `dies: never`."""
    return {c.slug: c.death_offset for c in characters if c.death_declared}


def detected_deaths(text: str, characters: Sequence[Character], start: int = 0, end: int | None = None,
                    ) -> dict[str, int]:
    """Per character, the offset of the first sentence of narration stating their death plainly."""
    end = len(text) if end is None else end
    found: dict[str, int] = {}
    patterns = {c.slug: _name_pattern(c) for c in characters if c.surface_forms}
    for paragraph in split_paragraphs(text, start, end):
        spans = quote_spans(paragraph)[0]
        for slug, pattern in patterns.items():
            if slug in found:
                continue
            for match in pattern.finditer(text, paragraph.start, paragraph.end):
                if in_spans(match.start(), spans):
                    continue
                before = text[_clause_start(text, paragraph.start, match.start()):match.start()]
                stated = _STATED_AFTER_NAME.match(text, match.end()) or _POSSESSIVE_BODY.match(text, match.end())
                stated = stated or _BODY_OF.search(before)
                if stated and not _CANCELS.search(before):
                    found[slug] = _sentence_start(text, paragraph.start, match.start())
                    break
    return found


def death_offsets(text: str, characters: Sequence[Character], start: int = 0, end: int | None = None,
                  ) -> dict[str, int]:
    """Per focus character who dies: the offset from which they know nothing more.

    The character file's marker wins; otherwise the first plain statement in narration.
    """
    declared = declared_deaths(characters)
    detected = detected_deaths(text, [c for c in characters if c.slug not in declared], start, end)
    out = {slug: offset for slug, offset in declared.items() if offset is not None}
    out.update(detected)
    return out


def alive_at(deaths: Mapping[str, int], character: str, offset: int) -> bool:
    """Is `character` still alive at `offset` (not yet at or past their death)?"""
    death = deaths.get(character)
    return death is None or offset < death


def _name_pattern(character: Character) -> re.Pattern[str]:
    forms = sorted(character.surface_forms, key=lambda f: -len(f))
    alternation = "|".join(r"\s+".join(re.escape(w) for w in f.split()) for f in forms)
    return re.compile(r"(?<![^\W_])(?:" + alternation + r")(?![^\W_])")


def _clause_start(text: str, lo: int, offset: int) -> int:
    stops = [m.end() for m in re.finditer(r"[.!?;:][\"'”’]?\s+", text[lo:offset])]
    return lo + (stops[-1] if stops else 0)


def _sentence_start(text: str, lo: int, offset: int) -> int:
    stops = [m.end() for m in re.finditer(r"[.!?][\"'”’]?\s+", text[lo:offset])]
    return lo + (stops[-1] if stops else 0)
