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

from reveriemem.clauses import is_action_subject
from reveriemem.dialogue import Utterance, in_spans, narration_fragments
from reveriemem.mentions import Mention
from reveriemem.text import Paragraph

ROSTER_VERSION = "roster-v1"
STATUSES = ("present_active", "present_silent", "referenced", "absent")

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
            narration = "".join(text[a:b] for a, b in narration_fragments(paragraph, spans))
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


def presence_range(record: RosterEvidence, scene_paragraphs: Sequence[int]) -> tuple[int, int] | None:
    """Paragraph range of presence: first evidence until a departure or the scene's end."""
    if not record.present_paragraphs:
        return None
    first = min(record.present_paragraphs)
    last = scene_paragraphs[-1]
    if record.departure_paragraph is not None and record.departure_paragraph >= max(record.present_paragraphs):
        last = record.departure_paragraph
    return first, last
