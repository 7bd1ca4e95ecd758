"""The Semantic layer, step two: canonical entities.

Aliases are unified across scenes: a focus character by their character file
(name, aliases, descriptors), any other entity by its normalised name
(`normal_key`: quotes unified, articles and possessives dropped, lower case)
and the aliases the model gave. An entity's type is its most frequent
extracted type. Without a model, `offline_entities` takes capitalised names
used at least twice, typed by their head word.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reveriemem.core.errors import RegistryError
from reveriemem.core.registry import Book
from reveriemem.source_to_memory.mentions import AliasMatcher
from reveriemem.source_to_memory.semantic import QUOTES, SceneGraph
from reveriemem.source_to_memory.visibility import Membership

_ARTICLES = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)
_POSSESSIVE = re.compile(r"['’]s\b")
_POSSESSIVE_END = re.compile(r"['’]s$")
_SPACE = re.compile(r"\s+")


def normal_key(name: str) -> str:
    name = _SPACE.sub(" ", name.translate(QUOTES)).strip().strip(".,;:!?\"'").strip()
    name = _POSSESSIVE.sub("", name)
    return _ARTICLES.sub("", name).lower()


@dataclass
class Entity:
    entity_id: str
    name: str
    type: str
    aliases: set[str] = field(default_factory=set)
    scenes: set[int] = field(default_factory=set)
    character: str | None = None  # focus character slug


class EntityTable:
    """Canonical entities of a book: lookups from any normalised name or alias."""

    def __init__(self, book: Book):
        self.book = book
        self.entities: dict[str, Entity] = {}
        self._by_key: dict[str, str] = {}
        self._matcher = AliasMatcher(book.characters)
        for character in book.characters:
            entity = Entity(f"person:{character.slug}", character.name, "person", {character.name, *character.aliases},
                            character=character.slug)
            self.entities[entity.entity_id] = entity
            for form in (*entity.aliases, *character.descriptors, character.slug):
                self._by_key.setdefault(normal_key(form), entity.entity_id)

    def character_of(self, name: str) -> str | None:
        """The focus character a name denotes, or None."""
        entity_id = self._by_key.get(normal_key(name))
        if entity_id and self.entities[entity_id].character:
            return self.entities[entity_id].character
        mentions = self._matcher.find(name)
        if len(mentions) == 1 and mentions[0].end - mentions[0].start >= 0.6 * len(name.strip()):
            return mentions[0].character
        if mentions:  # a title the text gives a character ("Master Silver", "Captain Silver"), if it fits
            try:
                return self.book.character(_SPACE.sub(" ", name).strip()).slug
            except RegistryError:
                return None
        return None

    def characters_in(self, phrase: str) -> set[str]:
        """Focus characters named anywhere in a phrase (a fact's subject or object)."""
        found = {m.character for m in self._matcher.find(phrase) if m.kind == "name" and not m.ambiguous}
        whole = self.character_of(phrase)
        return found | ({whole} if whole else set())

    def lookup(self, name: str) -> str | None:
        return self._by_key.get(normal_key(name))

    def add(self, name: str, type_: str, aliases: Iterable[str], scene_id: int) -> str:
        names = [n for n in (name, *aliases) if normal_key(n)]
        if not names:
            return ""
        character = self.character_of(name)
        if character:
            entity_id = f"person:{character}"
        else:
            entity_id = next((self._by_key[normal_key(n)] for n in names if normal_key(n) in self._by_key), "")
        if not entity_id:
            entity_id = f"{type_}:{_slug(normal_key(name))}"
            while entity_id in self.entities:
                entity_id += "-2"
            self.entities[entity_id] = Entity(entity_id, name.strip(), type_)
        entity = self.entities[entity_id]
        entity.aliases.update(n.strip() for n in names)
        entity.scenes.add(scene_id)
        for n in names:
            self._by_key.setdefault(normal_key(n), entity_id)
        return entity_id

    def resolve(self, phrase: str) -> str | None:
        """The entity a subject/object phrase denotes: its whole name, else the longest entity name inside it."""
        exact = self.lookup(phrase)
        if exact:
            return exact
        key = normal_key(phrase)
        best, best_len = None, 0
        for alias_key, entity_id in self._by_key.items():
            if len(alias_key) > best_len and len(alias_key) >= 3 and re.search(
                    r"(?<![\w])" + re.escape(alias_key) + r"(?![\w])", key):
                best, best_len = entity_id, len(alias_key)
        return best


def _slug(key: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", key).strip("-")[:60] or "unnamed"


def canonical_entities(book: Book, graphs: Sequence[SceneGraph]) -> EntityTable:
    """Unify entity mentions across scenes; the type of an entity is its most frequent extracted type."""
    table = EntityTable(book)
    votes: dict[str, Counter[str]] = defaultdict(Counter)
    for graph in graphs:
        for raw in graph.entities:
            entity_id = table.add(str(raw.get("name", "")), str(raw.get("type", "concept")),
                                  [str(a) for a in raw.get("aliases", [])], graph.scene_id)
            if entity_id:
                votes[entity_id][str(raw.get("type", "concept"))] += 1
            for org in [*raw.get("affiliations", []), *raw.get("former_affiliations", [])]:
                org_id = table.add(str(org), "organisation", [], graph.scene_id)
                votes[org_id]["organisation"] += 1
    for entity_id, counter in votes.items():
        entity = table.entities[entity_id]
        if entity.character is None:
            entity.type = counter.most_common(1)[0][0]
    return table


def memberships(table: EntityTable, graphs: Sequence[SceneGraph]) -> list[tuple[Membership, int]]:
    """Membership statements (with their scene) from the persons' affiliations in each passage."""
    out: list[tuple[Membership, int]] = []
    for graph in graphs:
        for raw in graph.entities:
            character = table.character_of(str(raw.get("name", "")))
            if character is None:
                continue
            for org, member in [(o, True) for o in raw.get("affiliations", [])] + [
                    (o, False) for o in raw.get("former_affiliations", [])]:
                org_id = table.lookup(str(org))
                if org_id:
                    out.append((Membership(character, org_id, graph.start, member), graph.scene_id))
    return out




_PROPER = re.compile(r"(?<![.!?\"“‘'])\s((?:[A-Z][a-z'’]+|[A-Z]\.)(?:\s+(?:of\s+(?:the\s+)?)?[A-Z][a-z'’]+){0,3})")
_ORG_WORDS = {"Guild", "Council", "Company", "Office", "Yard", "Church", "Society", "Club", "Army", "Navy", "Regiment",
              "Bank", "Police", "Brotherhood", "Order", "Government", "Parliament", "Service", "Crew", "Board"}
_PLACE_WORDS = {"Street", "Lane", "Road", "Square", "Hall", "House", "Park", "River", "Hill", "Bay", "Harbour", "Walk",
                "Steps", "Place", "Station", "Hotel", "Inn", "Castle", "Island", "City", "Town", "Pier", "Roads",
                "Valley", "Mountains", "Lake", "Terrace", "Gardens", "Bridge", "Gate", "Abbey", "Asylum", "Hospital"}
_TIME_WORDS = {"January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
               "November", "December", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
               "Day", "Candlemas", "Michaelmas", "Christmas", "Easter", "Midsummer"}
_HONORIFICS = {"Mr", "Mrs", "Miss", "Dr", "Doctor", "Captain", "Master", "Mistress", "Lady", "Lord", "Sir", "Colonel",
               "Inspector", "Professor", "Madame", "Monsieur", "Squire", "Mr.", "Mrs.", "Dr."}
_NOT_NAMES = {"I", "The", "A", "An", "He", "She", "It", "We", "They", "You", "His", "Her", "Their", "Our", "My", "But",
              "And", "Then", "There", "This", "That", "What", "When", "Where", "Who", "Why", "How", "Yes", "No", "Oh",
              "God", "CHAPTER", "Chapter", "Well", "Now", "If", "So", "As", "In", "On", "At", "Of", "For", "To", "Let"}
OFFLINE_ENTITY_METHOD = "heuristic:proper-nouns-v2"  # v2: names on one line, no possessive; titled focus names


def offline_entity_type(name: str) -> str:
    words = name.replace(".", "").split()
    if words[-1] in _ORG_WORDS:
        return "organisation"
    if words[-1] in _PLACE_WORDS:
        return "location"
    if words[-1] in _TIME_WORDS or words[0] in _TIME_WORDS:
        return "time"
    if words[0] in _HONORIFICS or name.split()[0] in _HONORIFICS:
        return "person"
    return "concept"


def offline_entities(book: Book, scenes: Sequence[tuple[int, int, int]], min_count: int = 2) -> EntityTable:
    """Focus characters plus capitalised names used at least `min_count` times, typed by their head word.

    A name is counted and shown as a reader writes it: on one line, without a possessive ("Captain Kidd's"
    and "Captain Kidd" are one name; "Master Silver" broken over two lines is "Master Silver")."""
    table = EntityTable(book)
    seen: dict[str, list[int]] = defaultdict(list)
    for scene_id, start, end in scenes:
        for match in _PROPER.finditer(book.text, start, end):
            name = _POSSESSIVE_END.sub("", _SPACE.sub(" ", match.group(1)).strip())
            first = name.split()[0]
            if first in _NOT_NAMES or len(name) < 3 or name in _HONORIFICS:
                continue  # a title alone ("Mrs" of "Mrs. Crossley") names no one
            seen[name].append(scene_id)
    for name, scene_ids in seen.items():
        if len(scene_ids) < min_count or table.character_of(name):
            continue
        for scene_id in sorted(set(scene_ids)):
            table.add(name, offline_entity_type(name), [], scene_id)
    return table


def entity_rows(book: Book, table: EntityTable, method: str) -> list[dict[str, Any]]:
    return [{"book": book.slug, "entity_id": e.entity_id, "name": e.name, "type": e.type,
             "aliases": sorted(e.aliases), "scene_ids": sorted(e.scenes), "character": e.character,
             "method": "characters-file" if e.character else method}
            for e in sorted(table.entities.values(), key=lambda e: e.entity_id)]


