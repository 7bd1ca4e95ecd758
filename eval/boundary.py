"""Boundary precision: stored grants and visibility sets against a hand-made presence annotation.

A presence annotation (docs/formats.md, "Presence annotation") cuts a book's
story into consecutive passages, each opened by a literal marker, and says
which focus characters are physically present in each and whether the
passage is private narration. From it:

- the **expected knowers** of a passage are its present characters, except
  that a private passage reaches only its `private_to` character (nobody
  when that is null);
- a **leak** is a grant by a route other than `direct` to a focus character
  who is not an expected knower of the passage the grant happens in (the
  passage holding the grant's `offset`; the fact's `source_start` when the
  grant has none), for a fact whose `source_start` lies in an annotated
  passage;
- **recall** is, over facts in non-private passages, the share of (fact,
  present character) pairs where the character is in the fact's visibility.

Invariants: passages are located in the decoded text the stored offsets
refer to (`Book.text`, inside its body); a marker found nowhere or more than
once, or a name that is not a focus character, is an error naming the
passage. Only the book's focus characters count; grants to any other key are
ignored. Everything here is a pure function of its arguments.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reveriemem.core.errors import RegistryError, ReverieMemError
from reveriemem.core.registry import Book
from reveriemem.core.text import find_all_text

PRESENT_STATUSES = ("present_active", "present_silent")


class PresenceAnnotationError(ReverieMemError):
    """A presence annotation is malformed or does not fit its book."""


@dataclass(frozen=True)
class PresencePassage:
    """One annotated passage as written by hand: canonical names, not slugs."""

    id: str
    marker: str
    present: tuple[str, ...]
    private: bool = False
    private_to: str | None = None
    chapter: str = ""
    note: str = ""
    unannotated: bool = False  # a stretch left out of the annotation: its facts are not scored


@dataclass(frozen=True)
class LocatedPassage:
    """A passage as a span [start, end) of the book's text, with character slugs."""

    id: str
    chapter: str
    start: int
    end: int
    present: frozenset[str]
    knowers: frozenset[str]  # expected knowers: present, or {private_to} for private narration
    private: bool
    note: str = ""


@dataclass
class CharacterBoundary:
    """One character's figures; `grants` counts grants by routes other than `direct`."""

    character: str
    grants: int = 0
    leaks: int = 0
    pairs: int = 0  # (fact, present character) pairs in non-private passages
    recalled: int = 0  # of those, pairs where the character is in the fact's visibility

    @property
    def leak_rate(self) -> float:
        return self.leaks / self.grants if self.grants else 0.0

    @property
    def recall(self) -> float:
        return self.recalled / self.pairs if self.pairs else 1.0


@dataclass
class PassageBoundary:
    """One passage's figures, for reading the worst passages."""

    id: str
    chapter: str
    start: int
    end: int
    facts: int = 0
    grants: int = 0
    leaks: int = 0
    leaked_to: Counter[str] = field(default_factory=Counter)
    note: str = ""


@dataclass
class BoundaryScore:
    """Per character, per passage and overall figures of one memory against one annotation."""

    characters: dict[str, CharacterBoundary]  # by slug, in the book's order
    passages: list[PassageBoundary]  # in story order
    facts_scored: int  # facts whose source_start lies in an annotated passage
    facts_outside: int  # facts before the first marker or outside the body
    leaks_by_route: Counter[str] = field(default_factory=Counter)
    grants_by_route: Counter[str] = field(default_factory=Counter)
    moved_grants: int = 0  # grants judged in a passage other than their fact's (accounts retold later)
    private_leaks: int = 0  # of the leaks, those in passages of private narration (the rest: to someone absent)

    @property
    def overall(self) -> CharacterBoundary:
        total = CharacterBoundary("overall")
        for figures in self.characters.values():
            total.grants += figures.grants
            total.leaks += figures.leaks
            total.pairs += figures.pairs
            total.recalled += figures.recalled
        return total

    def worst_passages(self, count: int = 10) -> list[PassageBoundary]:
        """The passages with the most leaks (ties: story order), leak-free ones left out."""
        ranked = sorted((p for p in self.passages if p.leaks), key=lambda p: -p.leaks)
        return ranked[:count]


def parse_presence_record(record: Mapping[str, Any], where: str) -> PresencePassage:
    """One JSONL record as a passage; a missing or mistyped field is an error naming `where`."""
    if not isinstance(record, Mapping):
        raise PresenceAnnotationError(f"{where} is not a JSON object.")
    ident = record.get("id")
    marker = record.get("marker")
    present = record.get("present")
    if not isinstance(ident, str) or not ident:
        raise PresenceAnnotationError(f"{where} needs a non-empty string `id`.")
    if not isinstance(marker, str) or not marker.strip():
        raise PresenceAnnotationError(f"Passage {ident} ({where}) needs a non-empty `marker`.")
    if record.get("unannotated") is True:
        return PresencePassage(id=ident, marker=marker, present=(), chapter=str(record.get("chapter") or ""),
                               note=str(record.get("note") or ""), unannotated=True)
    if not isinstance(present, list) or not all(isinstance(n, str) for n in present):
        raise PresenceAnnotationError(f"Passage {ident} ({where}) needs `present` as a list of names.")
    private_to = record.get("private_to")
    if private_to is not None and not isinstance(private_to, str):
        raise PresenceAnnotationError(f"Passage {ident} ({where}) has a `private_to` that is not a name or null.")
    return PresencePassage(id=ident, marker=marker, present=tuple(present), private=bool(record.get("private")),
                           private_to=private_to, chapter=str(record.get("chapter") or ""),
                           note=str(record.get("note") or ""))


def load_presence_annotation(paths: Sequence[Path]) -> list[PresencePassage]:
    """Passages of one or several JSONL files, concatenated in the order given; ids must be unique."""
    passages: list[PresencePassage] = []
    for path in paths:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise PresenceAnnotationError(f"The presence annotation {path} cannot be read: {exc}") from exc
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"line {number} of {path}"
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise PresenceAnnotationError(f"{where} is not valid JSON: {exc}") from exc
            passages.append(parse_presence_record(record, where))
    seen: set[str] = set()
    for passage in passages:
        if passage.id in seen:
            raise PresenceAnnotationError(f"Passage id {passage.id} appears twice in the presence annotation.")
        seen.add(passage.id)
    if not passages:
        raise PresenceAnnotationError("The presence annotation holds no passages.")
    return passages


def gold_scene_passages(gold: Mapping[str, Any]) -> list[PresencePassage]:
    """The demo gold annotation's scenes as passages: present = present_active or present_silent."""
    return [PresencePassage(id=str(scene["id"]), marker=scene["start_marker"],
                            present=tuple(name for name, status in scene["roster"].items()
                                          if status in PRESENT_STATUSES),
                            chapter=str(scene.get("location") or ""))
            for scene in gold["scenes"]]


def _slug(book: Book, name: str, passage: PresencePassage) -> str:
    try:
        return book.character(name).slug
    except RegistryError as exc:
        raise PresenceAnnotationError(f"Passage {passage.id} names {name!r}, not a focus character of "
                                      f"{book.slug}.") from exc


def locate_passages(book: Book, passages: Sequence[PresencePassage]) -> list[LocatedPassage]:
    """Each passage as a span of `book.text`: from its marker to the next one's (the last: the body's end).
    An `unannotated` record only ends the passage before it: the text up to the next marker is left out.

    Markers are searched inside the story body; each must occur exactly once
    there, and the markers must follow the annotation's order. An unannotated record whose marker is in
    the back matter after the story ("ORIGINAL TRANSCRIBER'S NOTES:"), with every record after it, is
    left out, and the passage before it ends with the story; any other marker there is an error.
    """
    text, body_start, body_end = book.text, book.body_start, book.body_end
    starts: list[int] = []
    for number, passage in enumerate(passages):
        occurrences = find_all_text(text, passage.marker, body_start, body_end)
        found = occurrences[0] if occurrences else -1
        if found < 0 and passage.unannotated and all(
                find_all_text(text, later.marker, body_end, len(text)) for later in passages[number:]):
            passages = passages[:number]  # an unannotated stretch and all after it lie in the back matter
            break
        if found < 0:
            raise PresenceAnnotationError(f"The marker of passage {passage.id} ({passage.marker!r}) is not in "
                                          f"the story text of {book.slug}.")
        if len(occurrences) > 1:
            raise PresenceAnnotationError(f"The marker of passage {passage.id} ({passage.marker!r}) occurs more "
                                          f"than once in the story text of {book.slug}; lengthen it.")
        if starts and found <= starts[-1]:
            raise PresenceAnnotationError(f"The marker of passage {passage.id} comes before the previous "
                                          f"passage's marker; passages must be in story order.")
        starts.append(found)
    located = []
    for index, passage in enumerate(passages):
        if passage.unannotated:
            continue  # from its marker to the next passage's, nothing is scored
        end = starts[index + 1] if index + 1 < len(starts) else body_end
        present = frozenset(_slug(book, name, passage) for name in passage.present)
        if passage.private:
            knowers = frozenset([_slug(book, passage.private_to, passage)]) if passage.private_to else frozenset()
        else:
            knowers = present
        located.append(LocatedPassage(id=passage.id, chapter=passage.chapter, start=starts[index], end=end,
                                      present=present, knowers=knowers, private=passage.private,
                                      note=passage.note))
    return located


def passage_at(passages: Sequence[LocatedPassage], offset: int) -> LocatedPassage | None:
    """The located passage holding `offset`, or None outside every passage (passages in story order)."""
    return _at(passages, [p.start for p in passages], offset)


def score_boundary(rows: Iterable[Mapping[str, Any]], passages: Sequence[LocatedPassage],
                   focus: Sequence[str]) -> BoundaryScore:
    """Leaks and recall of fact rows (`source_start`, `visibility`, `grants`) against located passages.

    `focus` lists the focus characters' slugs (the report keeps their order);
    grants and visibility entries naming anyone else are ignored.
    """
    counted = set(focus)
    characters = {slug: CharacterBoundary(slug) for slug in focus}
    per_passage = {p.id: PassageBoundary(p.id, p.chapter, p.start, p.end, note=p.note) for p in passages}
    score = BoundaryScore(characters=characters, passages=list(per_passage.values()), facts_scored=0,
                          facts_outside=0)
    starts = [p.start for p in passages]
    for row in rows:
        home = _at(passages, starts, int(row["source_start"]))
        if home is None:
            score.facts_outside += 1
            continue
        score.facts_scored += 1
        per_passage[home.id].facts += 1
        for grant in row.get("grants") or []:
            character, route = grant["character"], grant["route"]
            if route == "direct" or character not in counted:
                continue
            offset = grant.get("offset")
            judged = _at(passages, starts, int(offset)) if offset is not None else None
            judged = judged or home
            score.moved_grants += judged.id != home.id
            figures, where = characters[character], per_passage[judged.id]
            figures.grants += 1
            where.grants += 1
            score.grants_by_route[route] += 1
            if character not in judged.knowers:
                figures.leaks += 1
                score.private_leaks += judged.private
                where.leaks += 1
                where.leaked_to[character] += 1
                score.leaks_by_route[route] += 1
        if home.private:
            continue
        visible = set(row.get("visibility") or [])
        for character in home.present & counted:
            characters[character].pairs += 1
            characters[character].recalled += character in visible
    return score


def _at(passages: Sequence[LocatedPassage], starts: list[int], offset: int) -> LocatedPassage | None:
    index = bisect.bisect_right(starts, offset) - 1
    if index < 0 or offset >= passages[index].end:
        return None
    return passages[index]


def score_book_boundary(book: Book, rows: Iterable[Mapping[str, Any]],
                        passages: Sequence[PresencePassage]) -> BoundaryScore:
    """Locate `passages` in `book` and score `rows` against them, over the book's focus characters."""
    return score_boundary(rows, locate_passages(book, passages), [c.slug for c in book.characters])


def score_demo_gold(book: Book, rows: Iterable[Mapping[str, Any]], gold: Mapping[str, Any]) -> BoundaryScore:
    """The same figures for the demo story, by gold scene (a scene's id is its passage id)."""
    return score_book_boundary(book, rows, gold_scene_passages(gold))


def format_boundary(score: BoundaryScore, names: Mapping[str, str], worst: int = 10) -> list[str]:
    """The report as lines: per character and overall, routes, then the worst passages."""
    lines = [f"{'character':<24}{'grants':>8}{'leaks':>8}{'leak rate':>11}{'pairs':>8}{'recalled':>10}"
             f"{'recall':>8}"]
    for slug, figures in [*score.characters.items(), ("overall", score.overall)]:
        label = names.get(slug, slug)
        rate = f"{figures.leak_rate:.1%}" if figures.grants else "-"
        recall = f"{figures.recall:.1%}" if figures.pairs else "-"
        lines.append(f"{label:<24}{figures.grants:>8,}{figures.leaks:>8,}{rate:>11}"
                     f"{figures.pairs:>8,}{figures.recalled:>10,}{recall:>8}")
    routes = ", ".join(f"{route}: {score.leaks_by_route[route]:,}/{n:,}"
                       for route, n in score.grants_by_route.most_common())
    lines.append(f"leaks/grants by route: {routes or 'none'}")
    leaks = score.overall.leaks
    lines.append(f"leaks in private narration: {score.private_leaks:,}; to someone not present: "
                 f"{leaks - score.private_leaks:,}")
    lines.append(f"facts scored: {score.facts_scored:,} (outside annotated passages: {score.facts_outside:,}); "
                 f"grants judged in a later passage than their fact's: {score.moved_grants:,}")
    ranked = score.worst_passages(worst)
    if ranked:
        lines.append("worst passages (most leaks; offsets into the book text):")
        for p in ranked:
            to = ", ".join(f"{names.get(c, c)} {n}" for c, n in p.leaked_to.most_common())
            lines.append(f"  {p.id} [{p.chapter}] {p.start}-{p.end}: {p.leaks}/{p.grants} leaked ({to})"
                         + (f" - {p.note}" if p.note else ""))
    return lines
