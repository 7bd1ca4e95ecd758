"""Deterministic rosters: is a focus character present in a scene, and do they speak?

Presence is a state, not a mention. The evidence, per paragraph:
- speech: an utterance attributed to the character (present, active);
- narration: first-person narration in the character's narrator span (present, active);
- address: another speaker addresses the character by name (present);
- action: the character (by name or descriptor) is the subject of a narrated
  action at a clause start, or their face/hand/voice is described (present);
- mention: any other naming, in dialogue or narration (referenced).
A character is present from the first paragraph with presence evidence
until a departure is narrated or the scene ends.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from reveriemem.dialogue import Utterance, in_spans
from reveriemem.mentions import Mention
from reveriemem.text import Paragraph

ROSTER_VERSION = "roster-v1"
STATUSES = ("present_active", "present_silent", "referenced", "absent")

_CLAUSE_START = re.compile(
    r"(?:^|[.!?;:]\s+|[—–]\s*|--\s*|\b(?:and|but|then|while|as|when|where|till|until|before|after|so|yet|now)\s+"
    r"|,\s+)(?:[\"“”']\s*)?(?:the\s+|The\s+)?$"
)
_IRREGULAR = (
    "was|were|came|went|stood|sat|took|saw|looked|turned|ran|rose|gave|got|made|put|held|knew|thought|"
    "felt|began|kept|left|found|told|brought|spoke|drew|laid|led|lay|met|paid|read|set|shook|threw|"
    "wrote|struck|caught|fell|hung|heard|let|lit|sprang|stepped|entered|nodded|smiled|laughed|sighed|"
    "shrugged|glanced|bent|broke|burst|climbed|crept|flung|grew|hid|leapt|leaped|meant|ate|drank|slept|"
    "swung|swept|tore|woke|awoke|wept|won|bowed|seized|sprang|strode|stole|stuck|sank|sang|rang|"
    "did|does|is|are|says|looks|comes|goes|stands|sits|takes|turns|walks|runs|knows|leans|waits"
)
_NOT_PRESENT_AFTER_WAS = re.compile(
    r"^\s*(?:not|never|away|absent|gone|dead|out|abroad|elsewhere|missing|expected|due|said|reported|known|"
    r"supposed|believed|thought|rumoured|to\s+(?:come|arrive|be)|in\s+[A-Z])"
)
_VERB_AFTER = re.compile(rf"^(?:\s+(?:\w+ly|also|still|just|now|then|at\s+once|again|only|himself|herself))*\s+(?:({_IRREGULAR})\b|[a-z]+ed\b)")
_BODY_PART = re.compile(
    r"^(?:'s|’s|')\s+(?:\w+\s+)?(?:face|eyes|eye|hand|hands|voice|lips|mouth|brow|head|gaze|glance|arm|arms|"
    r"shoulder|shoulders|fingers|cheeks|cheek|expression|features|smile|laugh|step|steps|footsteps)\b"
)
_DEPARTURE = re.compile(
    r"\b(?:left\s+(?:the\s+(?:room|house|hall|office)|us|them|him|her)|went\s+(?:out|away|off|home)|"
    r"departed|walked\s+out|hurried\s+(?:out|away|off)|was\s+gone|took\s+(?:his|her)\s+leave|"
    r"slipped\s+(?:out|away)|disappeared)\b"
)
_FIRST_PERSON = re.compile(r"\b(?:I|me|my|myself|we|us|our)\b")


@dataclass
class RosterEvidence:
    """Counts of each kind of evidence for one character in one scene."""

    utterances: int = 0
    narration: int = 0
    addressed: int = 0
    actions: int = 0
    mentions: int = 0
    present_paragraphs: list[int] = field(default_factory=list)
    departure_paragraph: int | None = None
    first_offset: int | None = None

    def status(self) -> str:
        if self.utterances or self.narration:
            return "present_active"
        if self.addressed or self.actions:
            return "present_silent"
        if self.mentions:
            return "referenced"
        return "absent"


def is_action_subject(text: str, mention: Mention, fragment_start: int) -> bool:
    """True when the mention opens a clause and is followed by a narrated verb."""
    before = text[max(fragment_start, mention.start - 60) : mention.start]
    at_clause_start = mention.start == fragment_start or _CLAUSE_START.search(before) is not None
    after = text[mention.end : mention.end + 60]
    if _BODY_PART.match(after):
        return True
    if not at_clause_start:
        return False
    # "Holmes and Watson entered": skip one coordinated name
    coordinated = re.match(r"^\s+and\s+(?:[A-Z][\w.]*\s+){1,3}", after)
    if coordinated:
        after = after[coordinated.end() - 1 :]
    verb = _VERB_AFTER.match(after)
    if not verb:
        return False
    if verb.group(1) in ("was", "were", "is", "are"):
        return not _NOT_PRESENT_AFTER_WAS.match(after[verb.end() :])
    return True


def scene_evidence(
    text: str,
    paragraphs: Sequence[Paragraph],
    scene_paragraphs: Sequence[int],
    mentions_by_paragraph: dict[int, list[Mention]],
    utterances_by_paragraph: dict[int, Utterance],
    narrator_at: dict[int, str],
    character_slugs: Sequence[str],
) -> dict[str, RosterEvidence]:
    """Gather roster evidence for every focus character over one scene's paragraphs."""
    evidence = {slug: RosterEvidence() for slug in character_slugs}
    for index in scene_paragraphs:
        paragraph = paragraphs[index]
        utterance = utterances_by_paragraph.get(index)
        spans = utterance.quote_spans if utterance else []
        if utterance and utterance.speaker in evidence:
            _present(evidence[utterance.speaker], index, paragraph.start)
            evidence[utterance.speaker].utterances += 1
        if utterance:
            for slug in utterance.addressees:
                if slug in evidence and slug != utterance.speaker:
                    evidence[slug].addressed += 1
                    _present(evidence[slug], index, paragraph.start)
        narrator = narrator_at.get(index)
        if narrator in evidence:
            narration = "".join(text[a:b] for a, b in _outside(paragraph, spans))
            if _FIRST_PERSON.search(narration):
                evidence[narrator].narration += 1
                _present(evidence[narrator], index, paragraph.start)
        for mention in mentions_by_paragraph.get(index, []):
            record = evidence.get(mention.character)
            if record is None:
                continue
            record.mentions += 1
            if record.first_offset is None:
                record.first_offset = mention.start
            if in_spans(mention.start, spans):
                continue
            fragment_start = max([paragraph.start] + [b for a, b in spans if b <= mention.start])
            if is_action_subject(text, mention, fragment_start):
                record.actions += 1
                _present(record, index, mention.start)
                tail = text[mention.end : mention.end + 80]
                if _DEPARTURE.search(tail.split(".")[0]):
                    record.departure_paragraph = index
    return evidence


def _present(record: RosterEvidence, paragraph: int, offset: int) -> None:
    record.present_paragraphs.append(paragraph)
    if record.first_offset is None:
        record.first_offset = offset


def _outside(paragraph: Paragraph, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    pieces, cursor = [], paragraph.start
    for a, b in spans:
        if a > cursor:
            pieces.append((cursor, a))
        cursor = max(cursor, b)
    if cursor < paragraph.end:
        pieces.append((cursor, paragraph.end))
    return pieces


def presence_range(record: RosterEvidence, scene_paragraphs: Sequence[int]) -> tuple[int, int] | None:
    """Paragraph range of presence: first evidence until a departure or the scene's end."""
    if not record.present_paragraphs:
        return None
    first = min(record.present_paragraphs)
    last = scene_paragraphs[-1]
    if record.departure_paragraph is not None and record.departure_paragraph >= max(record.present_paragraphs):
        last = record.departure_paragraph
    return first, last
