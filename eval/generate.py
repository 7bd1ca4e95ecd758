"""Generating KBF-QA items from a built memory.

For each focus character c, facts in F_c become KRf items (gold among A-D) and
facts outside it (not common knowledge) become KR items (gold E, the queried
fact's true answer still among the options). Two makers:

- `cloze` (no model; method `heuristic:cloze-v1`), in the manner of the
  Children's Book Test: the fact's source sentence with one named entity
  blanked, put to the character in the second person; the options are that
  entity and three other entities of the same type from the same book.
- `model` (method `model:<name>`): the model drafts an in-world question
  addressed to the character from a SPOCV fact, its answer and three
  distractors (`dspy_programs.kbfqa.DraftKBFItem`). A draft that never parses
  or fails the filters falls back to the cloze item of the same fact.

Filters, for both: the answer is not given away by the question (no surface
form of it in the question); the five options are distinct; exactly one option
is true (no distractor occurs in the fact's sentence, and a distractor is never
an alias of the answer); a KR item's fact is not restated to the character (no
fact visible to c shares the answer and most of the sentence's terms), so its
gold E is sound. Items are spread across the story; each carries
`provenance.part`, "train" or "held-out" (a stable hash of its id, about half
each), so a threshold can be calibrated on one half and judged on the other.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from eval.items import LETTERS, REFUSAL_LETTER, REFUSAL_OPTION, ItemFileError, KBFItem, validate
from reveriemem.core.characters import Character
from reveriemem.core.registry import Book
from reveriemem.inference.offline_reader import overlap, term_set
from reveriemem.models import ModelHandle, run_or_fallback, run_program

CLOZE_METHOD = "heuristic:cloze-v1"
BLANK = "_____"
ANSWER_TYPES = ("person", "location", "organisation", "object", "event", "time")
MIN_CONTEXT_TERMS = 4  # content terms the question keeps besides the blank
MAX_SENTENCE_WORDS = 45
RESTATED_OVERLAP = 0.5  # a fact visible to c sharing this much of a KR sentence (and its answer) restates it
PARTS = ("train", "held-out")
_TITLES = frozenset(["mr", "mrs", "miss", "ms", "madame", "madam", "sir", "lord", "lady", "doctor", "dr", "inspector", "captain", "colonel", "sergeant", "constable", "elder", "brother", "sister", "father", "mother", "uncle", "aunt", "king", "queen", "prince", "princess", "master", "mistress", "young", "old", "saint", "st", "street", "lane", "road", "square", "hall", "house", "park", "river", "hill", "bay", "harbour", "walk", "station", "hotel", "church", "office", "yard", "club", "company"])  # titles and bare head words are not names
_NAME_NEXT = re.compile(r"^\s*(?:[A-Z][a-z]|&)")
_NAME_BEFORE = re.compile(r"(?:[A-Z][a-z]+\.?|&)\s*$")
_CUES = {
    "person": "Who belongs in the blank?",
    "location": "Which place belongs in the blank?",
    "organisation": "Which body or company belongs in the blank?",
    "object": "What belongs in the blank?",
    "event": "Which event belongs in the blank?",
    "time": "When was it? Fill the blank.",
}


@dataclass(frozen=True)
class Entity:
    entity_id: str
    name: str
    type: str
    forms: tuple[str, ...]  # name and aliases, longest first
    character: str | None  # focus character slug
    weight: int  # how often the book mentions it (scenes it appears in)


def entity_index(rows: Iterable[Mapping[str, Any]]) -> list[Entity]:
    out = []
    for row in rows:
        if row.get("type") not in ANSWER_TYPES:
            continue
        forms = {str(row["name"]), *[str(a) for a in (row.get("aliases") or [])]}
        forms = {f for f in forms if len(f) >= 3 and f[0].isupper() and f.casefold().strip(".") not in _TITLES}
        if not forms:
            continue
        out.append(Entity(str(row["entity_id"]), str(row["name"]), str(row["type"]),
                          tuple(sorted(forms, key=lambda f: (-len(f), f))), row.get("character") or None,
                          len(row.get("scene_ids") or []) or 1))
    return out


def _pattern(forms: Sequence[str]) -> re.Pattern[str]:
    return re.compile(r"(?<![\w])(?:" + "|".join(re.escape(f) for f in forms) + r")(?![\w])")


class _Mentions:
    def __init__(self, entities: Sequence[Entity]):
        self.entities = list(entities)
        self.patterns = {e.entity_id: _pattern(e.forms) for e in entities}

    def in_text(self, text: str) -> list[tuple[Entity, list[re.Match[str]]]]:
        found = []
        for entity in self.entities:
            matches = list(self.patterns[entity.entity_id].finditer(text))
            if matches:
                found.append((entity, matches))
        return found

    def mentions(self, entity: Entity, text: str) -> bool:
        return bool(self.patterns[entity.entity_id].search(text))


def part_of(item_id: str) -> str:
    """"train" or "held-out", stably from the item's id."""
    return PARTS[int(hashlib.sha256(item_id.encode()).hexdigest()[:8], 16) % 2]


def address(character: Character) -> str:
    """How an inquirer addresses the character: the shortest alias that is a name, or the name."""
    names = [a for a in [character.name, *character.aliases] if a[:1].isupper() and len(a) >= 3]
    return min(names, key=len) if names else character.name


def _options(answer: str, distractors: Sequence[str], rng: random.Random) -> tuple[dict[str, str], str]:
    texts = [answer, *distractors]
    rng.shuffle(texts)
    options = dict(zip(LETTERS[:4], texts))
    options[REFUSAL_LETTER] = REFUSAL_OPTION
    gold = next(letter for letter, text in options.items() if text == answer)
    return options, gold


def _distractors(entity: Entity, pool: Sequence[Entity], sentence: str, mentions: _Mentions,
                 rng: random.Random, asked: Character) -> list[str] | None:
    answer_forms = {f.casefold() for f in entity.forms}
    candidates = [e for e in pool if e.type == entity.type and e.entity_id != entity.entity_id
                  and e.character != asked.slug and not mentions.mentions(e, sentence)
                  and not answer_forms & {f.casefold() for f in e.forms}]
    if len(candidates) < 3:
        return None
    candidates.sort(key=lambda e: (-e.weight, e.entity_id))
    top = candidates[: max(12, len(candidates) // 3)]  # plausible: among the book's frequently named
    picked = rng.sample(top, 3)
    names = [e.name for e in picked]
    return names if len({n.casefold() for n in names} | {entity.name.casefold()}) == 4 else None


@dataclass
class _Fact:
    fact_id: str
    text: str
    visibility: frozenset[str]
    common: bool
    source_start: int
    scene_id: int
    terms: frozenset[str]


def _facts(rows: Iterable[Mapping[str, Any]]) -> list[_Fact]:
    out = []
    for row in rows:
        text = " ".join(str(row.get("evidence") or row.get("text") or "").split())
        if not text:
            continue
        out.append(_Fact(str(row["fact_id"]), text, frozenset(row.get("visibility") or []),
                         bool(row.get("common")), int(row.get("source_start") or 0), int(row.get("scene_id") or 0),
                         term_set(text)))
    return sorted(out, key=lambda f: f.source_start)


def _restated_to(fact: _Fact, entity: Entity, known: Sequence[_Fact], mentions: _Mentions) -> bool:
    return any(overlap(fact.terms, other.terms) >= RESTATED_OVERLAP and mentions.mentions(entity, other.text)
               for other in known if other.fact_id != fact.fact_id)


def cloze_item(book: Book, character: Character, fact: _Fact, split: str, entities: Sequence[Entity],
               mentions: _Mentions) -> KBFItem | None:
    """The cloze item of one fact for one character, or None when no entity makes a fair blank."""
    if len(fact.text.split()) > MAX_SENTENCE_WORDS:
        return None
    found = mentions.in_text(fact.text)
    found.sort(key=lambda pair: (pair[0].character is not None, -len(pair[0].name), pair[0].entity_id))
    for entity, matches in found:
        if entity.character == character.slug or len(matches) != 1:
            continue
        match = matches[0]
        if _NAME_NEXT.match(fact.text[match.end():]) or _NAME_BEFORE.search(fact.text[: match.start()]):
            continue  # part of a longer name ("the Jefferson Hopes", "Mr Drebber"): no fair blank
        question_text = fact.text[: match.start()] + BLANK + fact.text[match.end():]
        if mentions.mentions(entity, question_text):
            continue  # the answer is given away elsewhere in the sentence
        if len(term_set(question_text) - {"_____"}) < MIN_CONTEXT_TERMS:
            continue
        item_id = f"cloze:{fact.fact_id}:{character.slug}:{entity.entity_id}"
        rng = random.Random(item_id)
        distractors = _distractors(entity, entities, fact.text, mentions, rng, character)
        if distractors is None:
            continue
        options, gold = _options(entity.name, distractors, rng)
        question = f"{address(character)}, think back to these words: “{question_text}” {_CUES[entity.type]}"
        item = KBFItem(id=item_id, book=book.slug, character=character.name, split=split, question=question,
                       options=options, gold=gold if split == "KRf" else REFUSAL_LETTER, method=CLOZE_METHOD,
                       fact=fact.fact_id,
                       provenance={"part": part_of(item_id), "answer": entity.name, "answer_type": entity.type,
                                   "source_start": fact.source_start, "scene_id": fact.scene_id,
                                   "evidence": fact.text})
        try:
            validate(item)
        except ItemFileError:
            continue
        return item
    return None


def _spread(items: list[KBFItem], limit: int | None) -> list[KBFItem]:
    """At most `limit` items, evenly spread over the story order they come in."""
    if limit is None or len(items) <= limit:
        return items
    step = len(items) / limit
    return [items[int(i * step)] for i in range(limit)]


def generate_items(book: Book, character: Character, fact_rows: Sequence[Mapping[str, Any]],
                   entity_rows: Sequence[Mapping[str, Any]], *, per_split: int | None = 60,
                   handle: ModelHandle | None = None) -> list[KBFItem]:
    """KRf and KR items for one character (at most `per_split` of each), story order within a split.

    With a model (`handle.lm` set) SPOCV facts are drafted by the model first; every
    other fact, and every draft the filters reject, gets a cloze item.
    """
    facts = _facts(fact_rows)
    entities = entity_index(entity_rows)
    mentions = _Mentions(entities)
    known = [f for f in facts if character.slug in f.visibility]
    by_split: dict[str, list[KBFItem]] = defaultdict(list)
    for fact in facts:
        visible = character.slug in fact.visibility
        if not visible and (fact.common or not fact.visibility):
            continue
        split = "KRf" if visible else "KR"
        cloze = partial(cloze_item, book, character, fact, split, entities, mentions)
        row = next((r for r in fact_rows if r.get("fact_id") == fact.fact_id), None) \
            if handle is not None and handle.lm is not None else None
        if handle is not None and row is not None and row.get("predicate"):
            drafted = run_or_fallback(handle, partial(model_item, book, character, row, split, mentions), cloze,
                                      fallback_method=CLOZE_METHOD)
            item = cloze() if drafted.by_model and drafted.value is None else drafted.value  # None: a rejected draft
        else:
            item = cloze()
        if item is None:
            continue
        if split == "KR":
            answer = next(e for e in entities if e.name == item.provenance.get("answer")) \
                if item.method == CLOZE_METHOD else None
            if answer is not None and _restated_to(fact, answer, known, mentions):
                continue
        by_split[split].append(item)
    return _spread(by_split["KRf"], per_split) + _spread(by_split["KR"], per_split)


def book_items(book: Book, fact_rows: Sequence[Mapping[str, Any]], entity_rows: Sequence[Mapping[str, Any]],
               part: str | None = None) -> list[KBFItem]:
    """The generated (cloze) items of every focus character of `book`, of one `part` when given:
    the train part is what the offline readers calibrate on."""
    items = [item for character in book.characters
             for item in generate_items(book, character, fact_rows, entity_rows)]
    return items if part is None else [item for item in items if item.provenance.get("part") == part]


def model_item(book: Book, character: Character, row: Mapping[str, Any], split: str, mentions: _Mentions,
               handle: ModelHandle) -> KBFItem | None:
    """A model-drafted item for a SPOCV fact, or None when the draft fails a filter.

    Raises ModelOutputError when the draft never parses (`generate_items` then takes the cloze item)."""
    from dspy_programs.kbfqa import draft_item_program

    draft = run_program(handle, draft_item_program(), character=f"{character.name} ({address(character)})",
                        fact=str(row.get("text") or ""), evidence=str(row.get("evidence") or ""))
    answer = " ".join(str(draft.answer).split())
    distractors = [" ".join(str(d).split()) for d in list(draft.distractors)[:3]]
    question = " ".join(str(draft.question).split())
    if not answer or len(distractors) < 3 or not question:
        return None
    if answer.casefold() in question.casefold():
        return None
    evidence = str(row.get("evidence") or row.get("text") or "").casefold()
    if answer.casefold() not in evidence and answer.casefold() not in str(row.get("text") or "").casefold():
        return None  # the answer must be the fact's own
    if any(d.casefold() in evidence for d in distractors):
        return None  # a distractor that the fact also states would be a second true option
    item_id = f"model:{row['fact_id']}:{character.slug}"
    rng = random.Random(item_id)
    options, gold = _options(answer, distractors, rng)
    item = KBFItem(id=item_id, book=book.slug, character=character.name, split=split, question=question,
                   options=options, gold=gold if split == "KRf" else REFUSAL_LETTER,
                   method=f"model:{handle.name}", fact=str(row["fact_id"]),
                   provenance={"part": part_of(item_id), "answer": answer, "evidence": str(row.get("evidence") or ""),
                               "source_start": int(row.get("source_start") or 0)})
    try:
        validate(item)
    except ItemFileError:
        return None
    return item
