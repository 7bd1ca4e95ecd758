"""Alias matching: where each focus character is named or referred to.

Names and aliases match case-sensitively on word boundaries, longest form
first (so `Mr. Holmes` is one mention, not two); descriptors ("the Count")
also match with a capital first letter at a sentence start. A form shared
by several characters goes to the one named most recently, and is flagged.
A descriptor opened by a possessive ("my companion", "his master") is
relational: its referent depends on who speaks or narrates and may change
over a book, so its users resolve it by context (`is_relational`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from reveriemem.core.characters import RELATIONAL_DESCRIPTOR, Character

MATCHER_VERSION = "alias-v2"  # v2: a name joined to a small word by a hyphen is no mention


@dataclass(frozen=True)
class Mention:
    character: str  # character slug
    start: int
    end: int
    form: str
    kind: str  # "name" or "descriptor"
    ambiguous: bool


def is_relational(mention: Mention) -> bool:
    """Is this a descriptor whose referent depends on context ("my companion", "his master")?"""
    return mention.kind == "descriptor" and RELATIONAL_DESCRIPTOR.match(mention.form) is not None


class AliasMatcher:
    """One compiled pattern for every surface form of a book's focus characters."""

    def __init__(self, characters: Sequence[Character]):
        self._owners: dict[str, list[str]] = {}
        self._kind: dict[str, str] = {}
        for character in characters:
            for form in character.surface_forms:
                self._add(form, character.slug, "name")
            for descriptor in character.descriptors:
                self._add(descriptor, character.slug, "descriptor")
                capital = descriptor[0].upper() + descriptor[1:]
                self._add(capital, character.slug, "descriptor")
        forms = sorted(self._owners, key=lambda f: (-len(f), f))
        alternation = "|".join(r"\s+".join(re.escape(w) for w in f.split()) for f in forms)
        # "Rose-coloured light" is a word of its own, not Rose: no name runs on into a hyphen and a small letter
        self._pattern = re.compile(r"(?<![^\W_])(?:" + alternation + r")(?![^\W_])(?![-‐][a-z])") if forms else None

    def _add(self, form: str, slug: str, kind: str) -> None:
        key = " ".join(form.split())
        owners = self._owners.setdefault(key, [])
        if slug not in owners:
            owners.append(slug)
        if self._kind.get(key) != "name":
            self._kind[key] = kind

    def find(self, text: str, start: int = 0, end: int | None = None) -> list[Mention]:
        """All mentions in `text[start:end]`, in order, offsets into `text`."""
        if self._pattern is None:
            return []
        end = len(text) if end is None else end
        mentions: list[Mention] = []
        last_seen: dict[str, int] = {}
        for match in self._pattern.finditer(text, start, end):
            form = " ".join(match.group(0).split())
            owners = self._owners[form]
            ambiguous = len(owners) > 1
            if ambiguous:
                slug = max(owners, key=lambda s: (last_seen.get(s, -1), -owners.index(s)))
            else:
                slug = owners[0]
            last_seen[slug] = match.start()
            mentions.append(
                Mention(
                    character=slug,
                    start=match.start(),
                    end=match.end(),
                    form=form,
                    kind=self._kind[form],
                    ambiguous=ambiguous,
                )
            )
        return mentions
