"""The Semantic layer: per-scene extraction, canonical entities, deduplicated SPOCV facts.

Three stages, each usable alone:
1. `extract_scene_graphs`: per scene, per passage of at most `PASSAGE_WORDS`
   words, the model's entities, relations and reported accounts (or, with no
   model, nothing: the offline path makes evidence units instead). Quotations
   are located in the source so every fact keeps its offsets.
2. `canonical_entities`: aliases unified across scenes (focus characters by
   their character file; other entities by normalised names and aliases).
3. `build_facts`: relations deduplicated against the canonical entity table,
   then visibility assigned by `reveriemem.source_to_memory.visibility` from the rosters'
   presence intervals, reported accounts and the membership graph.

The offline path (`evidence_units`) turns every sentence of a scene into a
visibility-tagged evidence unit: its speaker or acting characters lived it,
those present when it is said or narrated observed it.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import polars as pl

from reveriemem.core.errors import ModelOutputError
from reveriemem.core.registry import Book
from reveriemem.core.text import Paragraph, split_paragraphs
from reveriemem.models import ModelHandle, run_program
from reveriemem.source_to_memory.clauses import is_action_subject
from reveriemem.source_to_memory.dialogue import in_spans, quote_spans
from reveriemem.source_to_memory.mentions import AliasMatcher
from reveriemem.source_to_memory.visibility import (
    Account,
    FactEvidence,
    Grant,
    Membership,
    MembershipGraph,
    Presence,
    PresenceIndex,
    Statement,
    assign,
    strongest,
    visible_from,
)

PASSAGE_WORDS = 2500
EXTRACTION_VERSION = "kg-v1"
EVIDENCE_METHOD = "heuristic:evidence-units-v1"
_ARTICLES = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)
_POSSESSIVE = re.compile(r"['’]s\b")
_SPACE = re.compile(r"\s+")
_QUOTES = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'", "—": "-", "–": "-"})
_SENTENCE = re.compile(r"[^.!?]+(?:[.!?]+[\"'”’)]*|$)")
# A narrator's private reflection, or narration reaching back years: nobody present perceives it.
_REFLECTION = re.compile(
    r"\bI\s+(?:think|thought|know|knew|wonder(?:ed)?|remember(?:ed)?|pray(?:ed)?|believe[d]?|suppose[d]?|"
    r"feel|felt|fear(?:ed)?|hope[d]?|doubt(?:ed)?)\b"
)
_LONG_AGO = re.compile(r"\b(?:\w+\s+years\s+(?:ago|before|earlier)|long\s+ago|in\s+(?:his|her|their)\s+youth)\b",
                       re.IGNORECASE)


# ---------------------------------------------------------------- extraction


@dataclass
class Passage:
    scene_id: int
    index: int
    start: int
    end: int


@dataclass
class SceneGraph:
    """What one passage yielded: raw entities, relations and accounts, located in the source."""

    scene_id: int
    passage: int
    start: int
    end: int
    method: str
    error: str | None = None
    entities: list[dict[str, Any]] = field(default_factory=list)
    relations: list[dict[str, Any]] = field(default_factory=list)  # with evidence_start/evidence_end
    accounts: list[dict[str, Any]] = field(default_factory=list)  # with source_start/source_end/offset

    @property
    def failed(self) -> bool:
        return self.error is not None

    def payload(self) -> str:
        return json.dumps({"entities": self.entities, "relations": self.relations, "accounts": self.accounts},
                          ensure_ascii=False)


def scene_passages(text: str, scene_id: int, start: int, end: int, limit: int = PASSAGE_WORDS) -> list[Passage]:
    """Split a scene into passages of whole paragraphs, at most `limit` words where paragraphs allow."""
    pieces = [piece for p in split_paragraphs(text, start, end) for piece in _split_long(text, p.start, p.end, limit)]
    if not pieces:
        pieces = [(start, end)]
    passages: list[Passage] = []
    first, last, words = pieces[0][0], pieces[0][0], 0
    for a, b in pieces:
        n = len(text[a:b].split())
        if words and words + n > limit:
            passages.append(Passage(scene_id, len(passages), first, last))
            first, words = a, 0
        last = b
        words += n
    passages.append(Passage(scene_id, len(passages), first, last))
    return passages


def _split_long(text: str, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """A paragraph longer than `limit` words, cut after sentence ends (or anywhere past twice the limit)."""
    if len(text[start:end].split()) <= limit:
        return [(start, end)]
    pieces: list[tuple[int, int]] = []
    cursor, count = start, 0
    for match in re.finditer(r"\S+", text[start:end]):
        count += 1
        if count >= limit and (re.search(r"[.!?][\"'”’)]*$", match.group()) or count >= 2 * limit):
            pieces.append((cursor, start + match.end()))
            cursor, count = start + match.end(), 0
    if text[cursor:end].strip():
        pieces.append((cursor, end))
    return pieces


def character_labels(book: Book) -> list[str]:
    return [f"{c.name} ({', '.join(c.aliases)})" if c.aliases else c.name for c in book.characters]


def extract_scene_graphs(
    book: Book,
    scenes: Sequence[tuple[int, int, int]],
    handle: ModelHandle,
    on_scene_done: Any = None,
) -> list[SceneGraph]:
    """Run the extraction program over every passage of every (scene_id, start, end)."""
    from dspy_programs.knowledge import scene_graph_program

    program = scene_graph_program()
    labels = character_labels(book)
    graphs: list[SceneGraph] = []
    for scene_id, start, end in scenes:
        for passage in scene_passages(book.text, scene_id, start, end):
            method = f"model:{handle.name}"
            try:
                prediction = run_program(handle, program, passage=book.text[passage.start:passage.end],
                                         focus_characters=labels)
            except ModelOutputError as exc:
                graphs.append(SceneGraph(scene_id, passage.index, passage.start, passage.end,
                                         method=f"failed:{handle.name}", error=str(exc)))
                continue
            graphs.append(locate_graph(book.text, passage, prediction, method))
        if on_scene_done is not None:
            on_scene_done(scene_id)
    return graphs


def locate_graph(text: str, passage: Passage, prediction: Any, method: str) -> SceneGraph:
    """Turn a prediction into a SceneGraph with source offsets; relations whose quote is not found keep the passage."""
    graph = SceneGraph(passage.scene_id, passage.index, passage.start, passage.end, method=method)
    for entity in prediction.entities or []:
        graph.entities.append(_dump(entity))
    for relation in prediction.relations or []:
        record = _dump(relation)
        span = locate(text, str(record.get("evidence", "")), passage.start, passage.end)
        record["located"] = span is not None
        record["evidence_start"], record["evidence_end"] = span or (passage.start, passage.end)
        graph.relations.append(record)
    for account in prediction.accounts or []:
        record = _dump(account)
        here = locate(text, str(record.get("evidence", "")), passage.start, passage.end)
        source = locate(text, str(record.get("source_opening", "")), 0, passage.end)
        if here is None or source is None or source[0] >= here[0]:
            continue  # an account must point back to an earlier passage we can find
        closing = locate(text, str(record.get("source_closing", "")), source[1], here[0]) if record.get(
            "source_closing") else None
        record["offset"] = here[0]
        record["source_start"] = source[0]
        record["source_end"] = closing[1] if closing else _scene_end_guess(text, source[0], here[0])
        graph.accounts.append(record)
    return graph


def _scene_end_guess(text: str, start: int, limit: int) -> int:
    """Without a closing quotation an account runs to the next scene break or heading before `limit`."""
    match = re.search(r"\n\s*(?:\*\s*){3,}\s*\n|\n\s*(?:CHAPTER|Chapter|BOOK|PART)\b", text[start:limit])
    return start + match.start() if match else limit


def _dump(value: Any) -> dict[str, Any]:
    if hasattr(value, "model_dump"):
        return dict(value.model_dump())
    return dict(value)


def _normal_with_map(text: str) -> tuple[str, list[int]]:
    """Lower-cased text with quotes unified and whitespace collapsed, and each character's source index."""
    out: list[str] = []
    where: list[int] = []
    previous_space = False
    for i, ch in enumerate(text.translate(_QUOTES)):
        if ch.isspace():
            if previous_space:
                continue
            previous_space = True
            out.append(" ")
        else:
            previous_space = False
            out.append(ch.lower())
        where.append(i)
    return "".join(out), where


def locate(text: str, quote: str, lo: int, hi: int) -> tuple[int, int] | None:
    """Source offsets of `quote` within text[lo:hi]: exact, then normalised, then the closest sentence."""
    quote = quote.strip().strip("\"'“”‘’").strip()
    if len(quote) < 3:
        return None
    found = text.find(quote, lo, hi)
    if found >= 0:
        return found, found + len(quote)
    window, where = _normal_with_map(text[lo:hi])
    needle, _ = _normal_with_map(quote)
    needle = needle.strip()
    found = window.find(needle)
    if found >= 0:
        return lo + where[found], lo + where[found + len(needle) - 1] + 1
    best, best_ratio = None, 0.0
    for match in _SENTENCE.finditer(text, lo, hi):
        sentence = match.group().strip()
        if not sentence:
            continue
        ratio = difflib.SequenceMatcher(None, needle, _normal_with_map(sentence)[0]).ratio()
        if ratio > best_ratio:
            best, best_ratio = match, ratio
    if best is not None and best_ratio >= 0.6:
        begin = best.start() + len(best.group()) - len(best.group().lstrip())
        return begin, best.end()
    return None


# ---------------------------------------------------------------- entities


def normal_key(name: str) -> str:
    name = _SPACE.sub(" ", name.translate(_QUOTES)).strip().strip(".,;:!?\"'").strip()
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


# ---------------------------------------------------------------- facts


@dataclass
class Fact:
    subject: str
    predicate: str
    object: str
    cause: str
    evidence: str
    subject_entity: str | None
    object_entity: str | None
    evidence_start: int
    evidence_end: int
    scene_id: int
    method: str
    evidence_facts: FactEvidence
    shared_orgs: set[str] = field(default_factory=set)
    error: str | None = None
    grants: list[Grant] = field(default_factory=list)

    @property
    def text(self) -> str:
        if not self.predicate:
            return self.evidence
        core = " ".join(p for p in (self.subject, self.predicate, self.object) if p)
        return f"{core} (because {self.cause})" if self.cause else core


def presences_from_rosters(rosters: pl.DataFrame) -> list[Presence]:
    present = rosters.filter(pl.col("status").str.starts_with("present") & pl.col("present_start").is_not_null())
    return [Presence(r["character"], int(r["scene_id"]), int(r["present_start"]), int(r["present_end"]))
            for r in present.iter_rows(named=True)]


class SpanFacts:
    """Spoken/private judgements of a source offset, from quotation marks and narrator spans."""

    def __init__(self, book: Book):
        self.text = book.text
        self._paragraphs = split_paragraphs(book.text, book.body_start, book.body_end)
        self._starts = [p.start for p in self._paragraphs]
        self._spans: dict[int, list[tuple[int, int]]] = {}
        self._narrated: list[tuple[int, int]] = []
        self._narrators: list[tuple[int, int, str]] = []
        for character in book.characters:
            self._narrated += [(int(a), int(b)) for a, b in character.narrator_spans]
            self._narrators += [(int(a), int(b), character.slug) for a, b in character.narrator_spans]

    def _paragraph(self, offset: int) -> Paragraph | None:
        import bisect

        i = bisect.bisect_right(self._starts, offset) - 1
        if i < 0:
            return None
        paragraph = self._paragraphs[i]
        return paragraph if paragraph.start <= offset < paragraph.end else None

    def spoken(self, offset: int) -> bool:
        paragraph = self._paragraph(offset)
        if paragraph is None:
            return False
        if paragraph.start not in self._spans:
            self._spans[paragraph.start] = quote_spans(paragraph)[0]
        return in_spans(offset, self._spans[paragraph.start])

    def narrator(self, start: int) -> str | None:
        """The first-person narrator who tells this narration (not speech): they know what they tell."""
        if self.spoken(start):
            return None
        return next((slug for a, b, slug in self._narrators if a <= start < b), None)

    def private(self, start: int, end: int) -> bool:
        """Narration nobody present perceives: a first-person narrator's reflection, or an aside reaching back years."""
        if self.spoken(start):
            return False
        sentence = self.sentence(start, end)
        if _LONG_AGO.search(sentence):
            return True
        return any(a <= start < b for a, b in self._narrated) and bool(_REFLECTION.search(sentence))

    def sentence(self, start: int, end: int) -> str:
        paragraph = self._paragraph(start)
        if paragraph is None:
            return self.text[start:end]
        before = self.text[paragraph.start:start]
        ends = [m.end() for m in re.finditer(r"[.!?][\"'”’]?\s", before)]
        begin = paragraph.start + (ends[-1] if ends else 0)
        after = re.search(r"[.!?]", self.text[end:paragraph.end])
        return self.text[begin:end + (after.end() if after else paragraph.end - end)]


def relation_facts(book: Book, table: EntityTable, graphs: Sequence[SceneGraph]) -> list[Fact]:
    """Relations of every passage as facts, deduplicated against the canonical entity table."""
    spans = SpanFacts(book)
    merged: dict[tuple[str, str, str], Fact] = {}
    order: list[tuple[str, str, str]] = []
    for graph in graphs:
        for raw in graph.relations:
            subject, predicate, obj = (str(raw.get(k, "")).strip() for k in ("subject", "predicate", "object"))
            if not subject or not predicate:
                continue
            start, end = int(raw["evidence_start"]), int(raw["evidence_end"])
            subject_id, object_id = table.resolve(subject), table.resolve(obj) if obj else None
            key = (subject_id or normal_key(subject), normal_key(predicate), object_id or normal_key(obj))
            statement = Statement(graph.scene_id, start, end, spoken=spans.spoken(start),
                                  private=bool(raw.get("private")) or spans.private(start, end))
            participants = {c for n in raw.get("participants", []) if (c := table.character_of(str(n)))}
            participants |= table.characters_in(subject) | (table.characters_in(obj) if obj else set())
            narrator = spans.narrator(start)
            if narrator:
                participants.add(narrator)
            witnesses = {c for n in raw.get("witnesses", []) if (c := table.character_of(str(n)))}
            orgs = {o for n in raw.get("shared_with", []) if (o := table.lookup(str(n)))}
            fact = merged.get(key)
            if fact is None:
                fact = Fact(subject, predicate, obj, str(raw.get("cause") or "").strip(), str(raw.get("evidence", "")),
                            subject_id, object_id, start, end, graph.scene_id, graph.method,
                            FactEvidence([], set(), set(), set(), False))
                merged[key] = fact
                order.append(key)
            evidence = fact.evidence_facts
            evidence.statements.append(statement)
            evidence.participants |= participants
            evidence.witnesses |= witnesses
            evidence.shared_with |= orgs
            evidence.common = evidence.common or bool(raw.get("common"))
            fact.shared_orgs |= orgs
            if not fact.cause and raw.get("cause"):
                fact.cause = str(raw["cause"]).strip()
    return [merged[k] for k in order]


def evidence_units(book: Book, scenes: Sequence[tuple[int, int, int]], utterance_speakers: dict[int, str],
                   method: str = EVIDENCE_METHOD, error: str | None = None) -> list[Fact]:
    """The offline Semantic layer: each sentence of a scene as a visibility-tagged evidence unit.

    `utterance_speakers` maps a quotation's start offset to its attributed focus speaker.
    The speaker of a quoted sentence and the characters acting in a narrated one lived it.
    """
    spans = SpanFacts(book)
    matcher = AliasMatcher(book.characters)
    speaker_starts = sorted(utterance_speakers)
    import bisect

    facts: list[Fact] = []
    for scene_id, start, end in scenes:
        for paragraph in split_paragraphs(book.text, start, end):
            quotes = quote_spans(paragraph)[0]
            for match in _SENTENCE.finditer(book.text, paragraph.start, paragraph.end):
                sentence = match.group()
                stripped = sentence.strip()
                if len(stripped.split()) < 4:
                    continue
                s_start = match.start() + len(sentence) - len(sentence.lstrip())
                s_end = s_start + len(stripped)
                spoken = in_spans(s_start, quotes) or in_spans(s_start + 1, quotes)
                participants: set[str] = set()
                speaker = ""
                if spoken:
                    i = bisect.bisect_right(speaker_starts, s_start) - 1
                    if i >= 0 and paragraph.start <= speaker_starts[i] and utterance_speakers[speaker_starts[i]]:
                        speaker = utterance_speakers[speaker_starts[i]]
                        participants.add(speaker)
                narrator = spans.narrator(s_start)
                if narrator:
                    participants.add(narrator)
                for mention in matcher.find(book.text, s_start, s_end):
                    if not in_spans(mention.start, quotes) and _acts(book.text, mention, s_start):
                        participants.add(mention.character)
                statement = Statement(scene_id, s_start, s_end, spoken=spoken, private=spans.private(s_start, s_end))
                facts.append(Fact(speaker, "", "", "", stripped, f"person:{speaker}" if speaker else None, None,
                                  s_start, s_end, scene_id, method, FactEvidence([statement], participants),
                                  error=error))
    return facts


_AUXILIARY_VERB = re.compile(r"^\s+(?:had|has|have|would|could|will|might|must|did)\s+(?:not\s+|never\s+)?[a-z]{3,}")
_OPENS_CLAUSE = re.compile(r"(?:^|[,;:]\s+|\b(?:and|then|while|when|as|but)\s+)$")


def _acts(text: str, mention: Any, sentence_start: int) -> bool:
    """Is the named character the acting subject here ("Tobin said", "Harrow had unlocked")?"""
    if is_action_subject(text, mention, sentence_start):
        return True
    before = text[sentence_start:mention.start]
    return bool(_OPENS_CLAUSE.search(before) and _AUXILIARY_VERB.match(text[mention.end:mention.end + 40]))


def assign_visibility(
    facts: Sequence[Fact],
    presences: Sequence[Presence],
    accounts: Sequence[Account],
    member_statements: Sequence[Membership],
    characters: Sequence[str],
) -> None:
    index = PresenceIndex(presences)
    graph = MembershipGraph(member_statements)
    for fact in facts:
        fact.grants = assign(fact.evidence_facts, index, accounts, graph, characters)


def accounts_of(graphs: Sequence[SceneGraph]) -> list[Account]:
    return [Account(int(a["source_start"]), int(a["source_end"]), g.scene_id, int(a["offset"]))
            for g in graphs for a in g.accounts]


def fact_rows(book: Book, facts: Sequence[Fact], table: EntityTable | None) -> list[dict[str, Any]]:
    """Rows of the `facts` table (without vectors), in story order with stable ids."""
    rows = []
    ordered = sorted(facts, key=lambda f: (f.evidence_start, f.evidence_end))
    org_names = {e.entity_id: e.name for e in table.entities.values()} if table else {}
    for n, fact in enumerate(ordered, start=1):
        best = strongest(fact.grants)
        since = visible_from(fact.grants)
        characters = sorted(best, key=lambda c: (since[c], c))
        rows.append({
            "book": book.slug, "character": "", "fact_id": f"{book.slug}:f{n:05d}", "scene_id": fact.scene_id,
            "subject": fact.subject, "predicate": fact.predicate, "object": fact.object, "cause": fact.cause,
            "subject_entity": fact.subject_entity, "object_entity": fact.object_entity, "text": fact.text,
            "evidence": fact.evidence, "source_start": fact.evidence_start, "source_end": fact.evidence_end,
            "statements": [asdict(s) for s in sorted(fact.evidence_facts.statements, key=lambda s: s.start)],
            "visibility": characters, "routes": [best[c].route for c in characters],
            "visible_from": [since[c] for c in characters],
            "grants": [{"character": g.character, "route": g.route, "scene_id": g.scene_id, "offset": g.offset}
                       for g in fact.grants],
            "organisations": sorted(org_names.get(o, o) for o in fact.shared_orgs),
            "common": fact.evidence_facts.common, "method": fact.method, "error": fact.error,
        })
    return rows


# ---------------------------------------------------------------- offline entities

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
               "Inspector", "Professor", "Madame", "Monsieur", "Mr.", "Mrs.", "Dr."}
_NOT_NAMES = {"I", "The", "A", "An", "He", "She", "It", "We", "They", "You", "His", "Her", "Their", "Our", "My", "But",
              "And", "Then", "There", "This", "That", "What", "When", "Where", "Who", "Why", "How", "Yes", "No", "Oh",
              "God", "CHAPTER", "Chapter", "Well", "Now", "If", "So", "As", "In", "On", "At", "Of", "For", "To"}
OFFLINE_ENTITY_METHOD = "heuristic:proper-nouns-v1"


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
    """Focus characters plus capitalised names used at least `min_count` times, typed by their head word."""
    table = EntityTable(book)
    seen: dict[str, list[int]] = defaultdict(list)
    for scene_id, start, end in scenes:
        for match in _PROPER.finditer(book.text, start, end):
            name = match.group(1).strip()
            first = name.split()[0]
            if first in _NOT_NAMES or len(name) < 3:
                continue
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


def graphs_from_rows(rows: Iterable[dict[str, Any]]) -> list[SceneGraph]:
    """SceneGraphs back from stored `scene_graphs` rows."""
    graphs = []
    for row in rows:
        payload = json.loads(row["payload"] or "{}")
        graphs.append(SceneGraph(int(row["scene_id"]), int(row["passage"]), int(row["start"]), int(row["end"]),
                                 method=row["method"], error=row["error"], entities=payload.get("entities", []),
                                 relations=payload.get("relations", []), accounts=payload.get("accounts", [])))
    return sorted(graphs, key=lambda g: (g.scene_id, g.passage))


def graph_rows(book: Book, graphs: Sequence[SceneGraph]) -> list[dict[str, Any]]:
    return [{"book": book.slug, "scene_id": g.scene_id, "passage": g.passage, "start": g.start, "end": g.end,
             "method": g.method, "error": g.error, "entities": len(g.entities), "relations": len(g.relations),
             "accounts": len(g.accounts), "payload": g.payload()} for g in graphs]
