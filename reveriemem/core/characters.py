"""Focus characters: the character file, its validation against a book, and
the narrator spans and deaths it declares.

A `dies:` entry is a literal text that occurs exactly once in the story: the
character dies where it begins, and knows nothing from there on. `dies: never`
declares that the character does not die (it turns off death detection).
"""

from __future__ import annotations

import difflib
import hashlib
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from reveriemem.core.errors import CharacterFileError
from reveriemem.core.text import find_all_text, find_text

# A descriptor whose referent depends on who speaks or on context ("my companion", "his master"): it names
# no one character by itself (`mentions.is_relational`, `Book.character`).
RELATIONAL_DESCRIPTOR = re.compile(r"^(?:my|his|her|our|their|your)\s", re.IGNORECASE)

GENDERS = ("male", "female", "other")
FILE_KEYS = ("title", "characters")
ENTRY_KEYS = ("name", "aliases", "descriptors", "gender", "narrator_spans", "dies")
SPAN_KEYS = ("start", "end")


@dataclass(frozen=True)
class NarratorSpanSpec:
    start: str
    end: str | None = None


@dataclass
class Character:
    """A focus character as the project uses it after validation."""

    name: str
    slug: str
    aliases: list[str]
    descriptors: list[str] = field(default_factory=list)
    gender: str = "other"
    narrator_all: bool = False
    narrator_span_specs: list[NarratorSpanSpec] = field(default_factory=list)
    narrator_spans: list[tuple[int, int]] = field(default_factory=list)
    death_marker: str | None = None  # the `dies:` literal, or "never"
    death_offset: int | None = None  # where the declared death begins in the book text

    @property
    def death_declared(self) -> bool:
        """Does the character file say where (or that never) this character dies?"""
        return self.death_marker is not None

    @property
    def surface_forms(self) -> list[str]:
        """The canonical name and its aliases, longest first, without repeats."""
        forms = {self.name, *self.aliases}
        return sorted(forms, key=lambda f: (-len(f), f))

    def to_record(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "slug": self.slug,
            "aliases": list(self.aliases),
            "descriptors": list(self.descriptors),
            "gender": self.gender,
            "narrator_spans": [list(span) for span in self.narrator_spans],
            "death_marker": self.death_marker,
            "death_offset": self.death_offset,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Character:
        return cls(
            name=record["name"],
            slug=record["slug"],
            aliases=list(record.get("aliases", [])),
            descriptors=list(record.get("descriptors", [])),
            gender=record.get("gender", "other"),
            narrator_spans=[(int(a), int(b)) for a, b in record.get("narrator_spans", [])],
            death_marker=record.get("death_marker"),
            death_offset=None if record.get("death_offset") is None else int(record["death_offset"]),
        )


# Letters with no decomposition to an ASCII letter that readers of Latin scripts spell out all the same.
_SPELLED = str.maketrans({"ß": "ss", "æ": "ae", "œ": "oe", "ø": "o", "ł": "l", "đ": "d", "ð": "d", "þ": "th",
                          "ı": "i", "ħ": "h"})


def folded(text: str) -> str:
    """Text in lower case without its accents, as a name is looked up ("Zoë" and "zoe" are one): letters of
    other scripts are kept ("李白" stays)."""
    decomposed = unicodedata.normalize("NFKD", text.casefold().translate(_SPELLED))
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if not unicodedata.combining(c)))


def slugify(name: str) -> str:
    """A partition-safe key: lower case ASCII letters, digits and hyphens. Accents fold to their letters
    ("Zoë Laurent": zoe-laurent); letters of a script with no ASCII letters add a stable short hash of the
    name's words ("李白": c-<8 hex>), so two such names do not share a key."""
    words = re.findall(r"[^\W_]+", folded(name))
    if not words:
        raise CharacterFileError(f"The name {name!r} has no letters or digits to make a key from.")
    ascii_words = [w.encode("ascii", "ignore").decode() for w in words]
    slug = "-".join(w for w in ascii_words if w)
    if ascii_words != words:  # a letter kept no ASCII form
        digest = hashlib.sha256(" ".join(words).encode("utf-8")).hexdigest()[:8]
        slug = f"{slug or 'c'}-{digest}"
    return slug


def load_character_file(path: Path) -> tuple[str | None, list[Character]]:
    """Parse a character file; returns (title, characters). Structure only, no book."""
    if not path.exists():
        raise CharacterFileError(f"The character file {path} does not exist.")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise CharacterFileError(f"The character file {path} is not valid YAML: {exc}") from exc
    return parse_character_data(data, str(path))


def parse_character_data(data: Any, source: str) -> tuple[str | None, list[Character]]:
    if not isinstance(data, dict) or not isinstance(data.get("characters"), list):
        raise CharacterFileError(f"The character file {source} needs a top-level `characters:` list.")
    _check_keys(data, FILE_KEYS, f"the top level of {source}")
    if not data["characters"]:
        raise CharacterFileError(f"The character file {source} lists no characters.")
    title = data.get("title")
    characters: list[Character] = []
    seen: dict[str, str] = {}
    for position, entry in enumerate(data["characters"], start=1):
        character = _parse_entry(entry, position, source)
        if character.slug in seen:
            raise CharacterFileError(
                f"The character file {source} names {character.name!r} twice "
                f"(or two names with the same key {character.slug!r})."
            )
        seen[character.slug] = character.name
        characters.append(character)
    return (str(title) if title else None), characters


def _parse_entry(entry: Any, position: int, source: str) -> Character:
    where = f"character #{position} of {source}"
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"].strip():
        raise CharacterFileError(f"The {where} needs a non-empty `name`.")
    name = entry["name"].strip()
    _check_keys(entry, ENTRY_KEYS, f"{name!r} in {source}")
    aliases = _string_list(entry.get("aliases", []), f"`aliases` of {name!r} in {source}")
    descriptors = _string_list(entry.get("descriptors", []), f"`descriptors` of {name!r} in {source}")
    gender = str(entry.get("gender", "other")).lower()
    if gender not in GENDERS:
        raise CharacterFileError(f"The `gender` of {name!r} in {source} must be one of {', '.join(GENDERS)}.")
    spans_raw = entry.get("narrator_spans", [])
    narrator_all = spans_raw == "all"
    specs: list[NarratorSpanSpec] = []
    if not narrator_all:
        if not isinstance(spans_raw, list):
            raise CharacterFileError(f"The `narrator_spans` of {name!r} in {source} must be a list or `all`.")
        for span in spans_raw:
            if not isinstance(span, dict) or not isinstance(span.get("start"), str) or not span["start"]:
                raise CharacterFileError(
                    f"Each narrator span of {name!r} in {source} needs a literal `start` text."
                )
            _check_keys(span, SPAN_KEYS, f"a narrator span of {name!r} in {source}")
            end = span.get("end")
            specs.append(NarratorSpanSpec(start=span["start"], end=str(end) if end else None))
    dies = entry.get("dies")
    if dies is not None and (not isinstance(dies, str) or not dies.strip()):
        raise CharacterFileError(
            f"The `dies` of {name!r} in {source} must be a literal text from the book where the character "
            f"dies, or `never`."
        )
    return Character(
        name=name,
        slug=slugify(name),
        aliases=list(dict.fromkeys(a for a in aliases if " ".join(a.split()) != " ".join(name.split()))),
        descriptors=descriptors,
        gender=gender,
        narrator_all=narrator_all,
        narrator_span_specs=specs,
        death_marker=dies.strip() if dies else None,
    )


def _check_keys(entry: dict[Any, Any], known: tuple[str, ...], where: str) -> None:
    """Refuse a key the file format does not know (a misspelt key would otherwise be dropped silently)."""
    for key in entry:
        if str(key) in known:
            continue
        close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
        hint = f"did you mean `{close[0]}`?" if close else f"the known keys are {', '.join(known)}."
        raise CharacterFileError(f"Unknown key `{key}` in {where}; {hint}")


def _string_list(value: Any, what: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise CharacterFileError(f"The {what} must be a list of non-empty strings.")
    return [v.strip() for v in value]


def surface_pattern(form: str, *, flexible_case: bool = False) -> re.Pattern[str]:
    """A word-bounded pattern for a literal name; spaces match any whitespace run."""
    words = [re.escape(w) for w in form.split()]
    if flexible_case and words:
        first = form.split()[0]
        words[0] = f"[{first[0].upper()}{first[0].lower()}]" + re.escape(first[1:])
    return re.compile(r"(?<![^\W_])" + r"\s+".join(words) + r"(?![^\W_])")


def validate_characters(
    characters: list[Character], text: str, body: tuple[int, int], source: str
) -> list[str]:
    """Check the characters against the book; fill narrator spans. Returns warnings."""
    start, end = body
    warnings: list[str] = []
    for character in characters:
        found_any = False
        for form in character.surface_forms:
            if surface_pattern(form).search(text, start, end):
                found_any = True
            elif form == character.name:  # the canonical name is no alias of itself
                warnings.append(f"The name {form!r} itself never occurs in {source}; only the aliases find it.")
            else:
                warnings.append(f"The alias {form!r} of {character.name} never occurs in {source}.")
        for descriptor in character.descriptors:
            if surface_pattern(descriptor, flexible_case=True).search(text, start, end):
                found_any = True
            else:
                warnings.append(f"The descriptor {descriptor!r} of {character.name} never occurs in {source}.")
        if not found_any:
            raise CharacterFileError(
                f"None of the names of {character.name} ({', '.join(character.surface_forms)}) "
                f"occurs in {source}; check the spelling or the book."
            )
    resolve_narrator_spans(characters, text, body, source)
    resolve_deaths(characters, text, body, source)
    return warnings


def resolve_deaths(characters: list[Character], text: str, body: tuple[int, int], source: str) -> None:
    """Turn each declared `dies:` literal into the offset where it occurs, once, in the story body."""
    start, end = body
    for character in characters:
        marker = character.death_marker
        if marker is None or marker == "never":
            character.death_offset = None
            continue
        occurrences = find_all_text(text, marker, start, end)
        if not occurrences:
            raise CharacterFileError(f"The `dies` text {marker!r} of {character.name} never occurs in {source}.")
        if len(occurrences) > 1:
            raise CharacterFileError(
                f"The `dies` text {marker!r} of {character.name} occurs more than once in {source}; lengthen it."
            )
        character.death_offset = occurrences[0]


def resolve_narrator_spans(
    characters: list[Character], text: str, body: tuple[int, int], source: str
) -> None:
    """Turn each character's narrator span markers into (start, end) offsets.

    A span opens at each occurrence of its `start` text and closes at the first
    later occurrence of its `end` text, where another narrator's span opens,
    or at the end of the body.
    """
    start, end = body
    openings: list[tuple[int, Character, NarratorSpanSpec]] = []
    for character in characters:
        if character.narrator_all:
            character.narrator_spans = [(start, end)]
            continue
        for spec in character.narrator_span_specs:
            positions = [p - start for p in find_all_text(text, spec.start, start, end)]
            if not positions:
                raise CharacterFileError(
                    f"The narrator span start {spec.start!r} of {character.name} never occurs in {source}."
                )
            openings.extend((start + p, character, spec) for p in positions)
    openings.sort(key=lambda item: item[0])
    spans: dict[str, list[tuple[int, int]]] = {}
    for index, (opening, character, spec) in enumerate(openings):
        closing = openings[index + 1][0] if index + 1 < len(openings) else end
        if spec.end:
            found = find_text(text, spec.end, opening + len(spec.start), closing)
            if found != -1:
                closing = found
        spans.setdefault(character.slug, []).append((opening, closing))
    for character in characters:
        if not character.narrator_all:
            character.narrator_spans = spans.get(character.slug, [])
