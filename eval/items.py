"""KBF-QA items: the documented JSONL format, reading, writing and validation.

One item per line (see docs/formats.md, "KBF-QA items"):

    {"id": "q01", "book": "a-study-in-scarlet", "character": "Watson", "split": "KRf",
     "question": "...", "options": {"A": "...", "B": "...", "C": "...", "D": "...",
     "E": "I cannot answer this from my own knowledge."}, "gold": "B",
     "method": "heuristic:cloze-v1", "fact": "...", "provenance": {...}}

`split` is `KRf` (the queried fact is visible to the character; gold among A-D)
or `KR` (it is not; gold E). `book` may be omitted when the file is read for a
named book. The character may be named by any alias of the book's character
file; it is stored by canonical name. Unknown extra fields are ignored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reveriemem.core.errors import ReverieMemError
from reveriemem.core.registry import Book

LETTERS = ("A", "B", "C", "D", "E")
ANSWER_LETTERS = LETTERS[:4]
REFUSAL_LETTER = "E"
REFUSAL_OPTION = "I cannot answer this from my own knowledge."
SPLITS = ("KRf", "KR")


class ItemFileError(ReverieMemError):
    """An item file is missing, malformed, or names a character the book does not have."""


@dataclass(frozen=True)
class KBFItem:
    """One multiple-choice question put to one character of one book."""

    id: str
    book: str
    character: str  # canonical name from the book's character file
    split: str  # "KRf" or "KR"
    question: str
    options: dict[str, str]  # A..E; E is the refusal option
    gold: str
    method: str = "hand-written"  # what made the item: "heuristic:cloze-v1", "model:<name>", ...
    fact: str | None = None  # the fact (or evidence unit) the item asks about, when known
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def visible(self) -> bool:
        return self.split == "KRf"

    def to_record(self) -> dict[str, Any]:
        record = asdict(self)
        if record["fact"] is None:
            del record["fact"]
        if not record["provenance"]:
            del record["provenance"]
        return record


def validate(item: KBFItem) -> None:
    """Raise ItemFileError unless the item is well formed."""
    where = f"item {item.id!r}"
    if item.split not in SPLITS:
        raise ItemFileError(f"{where}: split must be KRf or KR, not {item.split!r}.")
    if sorted(item.options) != list(LETTERS):
        raise ItemFileError(f"{where}: options must be exactly A, B, C, D and E.")
    texts = [" ".join(item.options[letter].lower().split()) for letter in LETTERS]
    if any(not text for text in texts):
        raise ItemFileError(f"{where}: every option needs a text.")
    if len(set(texts)) != len(texts):
        raise ItemFileError(f"{where}: two options say the same thing.")
    if item.gold not in LETTERS:
        raise ItemFileError(f"{where}: gold must be one of A to E, not {item.gold!r}.")
    if item.split == "KR" and item.gold != REFUSAL_LETTER:
        raise ItemFileError(f"{where}: a KR item's gold is E.")
    if item.split == "KRf" and item.gold == REFUSAL_LETTER:
        raise ItemFileError(f"{where}: a KRf item's gold is one of A to D.")
    if not item.question.strip():
        raise ItemFileError(f"{where}: the question is empty.")


def item_from_record(record: dict[str, Any], book: Book, *, where: str = "") -> KBFItem:
    """An item from a JSON object; the character named by any alias; extra fields ignored."""
    prefix = f"{where}: " if where else ""
    missing = [k for k in ("id", "character", "split", "question", "options", "gold") if k not in record]
    if missing:
        raise ItemFileError(f"{prefix}missing field(s) {', '.join(missing)}.")
    if record.get("book") not in (None, "", book.slug):
        raise ItemFileError(f"{prefix}the item is for book {record['book']!r}, not {book.slug!r}.")
    options = record["options"]
    if isinstance(options, list) and len(options) == len(LETTERS):
        options = dict(zip(LETTERS, options))
    if not isinstance(options, dict):
        raise ItemFileError(f"{prefix}options must be an object with keys A to E.")
    try:
        character = book.character(str(record["character"]))
    except ReverieMemError as exc:
        raise ItemFileError(f"{prefix}{exc}") from exc
    item = KBFItem(
        id=str(record["id"]), book=book.slug, character=character.name,
        split={s.lower(): s for s in SPLITS}.get(str(record["split"]).strip().lower(), str(record["split"])),
        question=" ".join(str(record["question"]).split()),
        options={str(k).strip().upper(): " ".join(str(v).split()) for k, v in options.items()},
        gold=str(record["gold"]).strip().upper(), method=str(record.get("method") or "hand-written"),
        fact=None if record.get("fact") is None else str(record["fact"]),
        provenance=dict(record.get("provenance") or {}),
    )
    try:
        validate(item)
    except ItemFileError as exc:
        raise ItemFileError(f"{prefix}{exc}") from exc
    return item


def read_items(path: Path, book: Book) -> list[KBFItem]:
    """Read a JSONL item file for `book`; one clear error naming the line for a bad item."""
    if not path.is_file():
        raise ItemFileError(f"The item file {path} does not exist.")
    items: list[KBFItem] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path.name}, line {number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ItemFileError(f"{where} is not JSON ({exc.msg}).") from exc
            if not isinstance(record, dict):
                raise ItemFileError(f"{where} is not a JSON object.")
            item = item_from_record(record, book, where=where)
            if item.id in seen:
                raise ItemFileError(f"{where}: the id {item.id!r} is used twice.")
            seen.add(item.id)
            items.append(item)
    if not items:
        raise ItemFileError(f"The item file {path} holds no items.")
    return items


def write_items(path: Path, items: Iterable[KBFItem]) -> int:
    """Write items as JSONL (atomically); returns how many."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    count = 0
    with tmp.open("w", encoding="utf-8") as handle:
        for item in items:
            handle.write(json.dumps(item.to_record(), ensure_ascii=False) + "\n")
            count += 1
    tmp.replace(path)
    return count


def gold_items(book: Book, records: Sequence[dict[str, Any]]) -> list[KBFItem]:
    """Items from a gold file's `items` list (the demo story's gold)."""
    return [item_from_record({**r, "method": r.get("method", "hand-written")}, book, where=f"gold item {r.get('id')}")
            for r in records]


def render_question(item: KBFItem) -> str:
    """The question and its five options, as put to a method that reads text."""
    lines = [item.question, ""]
    lines += [f"({letter}) {item.options[letter]}" for letter in LETTERS]
    return "\n".join(lines)


def by_character(items: Iterable[KBFItem]) -> Iterator[tuple[str, list[KBFItem]]]:
    groups: dict[str, list[KBFItem]] = {}
    for item in items:
        groups.setdefault(item.character, []).append(item)
    yield from groups.items()
