"""Visibility, the V of SPOCV: which characters could know a fact, by which route, from when.

Deterministic and separate from any model call. Its inputs are what the text
and the extraction establish: where each statement of a fact sits (scene,
offset, spoken aloud or narrated, private or not), who lived it, who is said
to have seen it, which organisation it was announced to, whether it is world
background; who is present where (roster presence intervals); accounts read
out or retold later; and the character-organisation membership graph.

Two phases, as in the paper. Local: `direct` for those who lived the fact
(including characters who are its subject or object), `observation` for
characters present where and when it is stated (dialogue is heard by those
present when it is spoken; narration is seen by those present at that point,
unless it is private: a thought, a memory, a narrator's aside), and for
witnesses the text names, and for those present when an earlier account
holding it is read out or retold (from that point of the story on); `common`
for world background. Propagation: `organisation` for the members, at that
time, of every organisation the fact was announced to.

Death ends knowledge: no grant, by any route, at or after a character's
death offset (common background, granted from offset 0, is known before).

Each grant records its route, scene and source offset, so a reader can be
bounded to what a character knew at any point of the story.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

ROUTES = ("direct", "observation", "organisation", "common")
_STRENGTH = {route: i for i, route in enumerate(ROUTES)}
VISIBILITY_VERSION = "visibility-v2"


@dataclass(frozen=True)
class Statement:
    """One place the text states a fact."""

    scene_id: int
    start: int  # source offset of the evidence
    end: int
    spoken: bool = False  # inside quotation marks
    private: bool = False  # perceived by nobody present (thought, memory, aside)


@dataclass(frozen=True)
class Presence:
    """A character present in a scene over a source-offset interval [start, end)."""

    character: str
    scene_id: int
    start: int
    end: int


@dataclass(frozen=True)
class Account:
    """An earlier passage [source_start, source_end) read out or retold at `offset` of `scene_id`."""

    source_start: int
    source_end: int
    scene_id: int
    offset: int


@dataclass(frozen=True)
class Membership:
    """A statement that `character` is (member=True) or no longer is a member of `organisation`."""

    character: str
    organisation: str
    offset: int
    member: bool = True


@dataclass
class FactEvidence:
    statements: list[Statement]
    participants: set[str] = field(default_factory=set)  # lived it: direct
    witnesses: set[str] = field(default_factory=set)  # saw it happen, elsewhere: observation
    shared_with: set[str] = field(default_factory=set)  # organisations it was announced to
    common: bool = False


@dataclass(frozen=True, order=True)
class Grant:
    offset: int
    scene_id: int
    character: str
    route: str


class PresenceIndex:
    """Who is present at a given scene and offset."""

    def __init__(self, presences: Iterable[Presence]):
        self._by_scene: dict[int, list[Presence]] = {}
        for presence in presences:
            self._by_scene.setdefault(presence.scene_id, []).append(presence)

    def at(self, scene_id: int, offset: int) -> set[str]:
        return {p.character for p in self._by_scene.get(scene_id, []) if p.start <= offset < p.end}


class MembershipGraph:
    """Character-organisation membership over story time.

    At an offset, a character belongs to an organisation when the latest
    statement at or before it says so; with no statement yet, the earliest
    statement after it decides (a member introduced later was a member all along).
    """

    def __init__(self, memberships: Iterable[Membership]):
        self._statements: dict[tuple[str, str], list[Membership]] = {}
        for m in memberships:
            self._statements.setdefault((m.character, m.organisation), []).append(m)
        for statements in self._statements.values():
            statements.sort(key=lambda m: m.offset)

    def members(self, organisation: str, offset: int) -> set[str]:
        out = set()
        for (character, org), statements in self._statements.items():
            if org != organisation:
                continue
            before = [m for m in statements if m.offset <= offset]
            decisive = before[-1] if before else statements[0]
            if decisive.member:
                out.add(character)
        return out

    def organisations(self) -> set[str]:
        return {org for _, org in self._statements}


def assign(
    fact: FactEvidence,
    presence: PresenceIndex,
    accounts: Sequence[Account],
    memberships: MembershipGraph,
    characters: Sequence[str],
    deaths: Mapping[str, int] | None = None,
) -> list[Grant]:
    """Every grant of visibility for one fact, earliest first; none at or after a character's death."""
    if not fact.statements:
        return []
    first = min(fact.statements, key=lambda s: s.start)
    if fact.common:  # world background: every character knew it all along, by no other route
        return [Grant(0, 0, c, "common") for c in characters]
    grants: list[Grant] = []
    grants += [Grant(first.start, first.scene_id, c, "direct") for c in sorted(fact.participants)]
    grants += [Grant(first.start, first.scene_id, c, "observation") for c in sorted(fact.witnesses)]
    for statement in fact.statements:
        if not statement.private:
            grants += [Grant(statement.start, statement.scene_id, c, "observation")
                       for c in sorted(presence.at(statement.scene_id, statement.start))]
        for account in accounts:
            if account.source_start <= statement.start < account.source_end and account.offset >= statement.start:
                grants += [Grant(account.offset, account.scene_id, c, "observation")
                           for c in sorted(presence.at(account.scene_id, account.offset))]
    for organisation in sorted(fact.shared_with):
        grants += [Grant(first.start, first.scene_id, c, "organisation")
                   for c in sorted(memberships.members(organisation, first.start))]
    known = set(characters)
    deaths = deaths or {}
    return sorted(g for g in grants if g.character in known and g.offset < deaths.get(g.character, g.offset + 1))


def strongest(grants: Iterable[Grant]) -> dict[str, Grant]:
    """Per character, the grant of the strongest route (the earliest among equals)."""
    best: dict[str, Grant] = {}
    for grant in sorted(grants):
        current = best.get(grant.character)
        if current is None or _STRENGTH[grant.route] < _STRENGTH[current.route]:
            best[grant.character] = grant
    return best


def visible_from(grants: Iterable[Grant]) -> dict[str, int]:
    """Per character, the earliest source offset from which the fact is theirs."""
    out: dict[str, int] = {}
    for grant in grants:
        out[grant.character] = min(out.get(grant.character, grant.offset), grant.offset)
    return out
