"""Deterministic rosters: is a focus character present in a scene, and do they speak?

Presence is a state, not a mention. The evidence, per paragraph:
- speech: an utterance attributed to the character (present, active);
- narration: first-person narration in the character's narrator span (present, active);
- address: another speaker addresses the character by name (present);
- action: the character (by name or descriptor) is the subject of a narrated
  action at a clause start, or their face/hand/voice is described (present);
- mention: any other naming, in dialogue or narration (referenced).
A character present in a scene is there from the scene's start, or from
their narrated arrival (someone comes in, a door opens on them) when the
scene tells of one, until a departure is narrated or the scene ends. So a
line spoken before a narrated arrival was not heard by the newcomer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from reveriemem.core.text import Paragraph, sentence_around
from reveriemem.source_to_memory.clauses import is_action_subject
from reveriemem.source_to_memory.dialogue import Utterance, in_spans, narration_fragments
from reveriemem.source_to_memory.mentions import Mention

ROSTER_VERSION = "roster-v1"
STATUSES = ("present_active", "present_silent", "referenced", "absent")

_DEPARTURE = re.compile(
    r"\b(?:left\s+(?:the\s+(?:room|house|hall|office)|us|them|him|her)|went\s+(?:out|away|off|home)|"
    r"departed|walked\s+out|hurried\s+(?:out|away|off)|was\s+gone|took\s+(?:his|her)\s+leave|"
    r"slipped\s+(?:out|away)|disappeared)\b"
)
# Arrival in scene time, said of the character named just before the verb
# ("Tobin came in", "Osric Penhallow stood on the step"); a pluperfect
# ("had come in") tells of an earlier arrival. Or a door opens on them.
_ARRIVAL = re.compile(
    r"^[^,;:.!?\"]{0,40}?(?<!had )(?<!had just )\b(?:(?:came|comes|come|walked|stepped|burst|hurried|ran|strode|"
    r"rushed)\s+(?:in|into|through|back)\b|entered|arrived|appeared|"
    r"stood\s+(?:in|on|at)\s+the\s+(?:doorway|door|threshold|step))"
)
_DOOR_OPENS = re.compile(r"\bdoor\b[^.!?]{0,40}?\b(?:opened|banged|burst|flew|swung)\b")
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
    arrival_paragraph: int | None = None
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
            if record.arrival_paragraph is None and not record.present_paragraphs and _arrives(text, paragraph, mention):
                record.arrival_paragraph = index
            if is_action_subject(text, mention, fragment_start):
                record.actions += 1
                _present(record, index, mention.start)
                tail = text[mention.end : mention.end + 80]
                if _DEPARTURE.search(tail.split(".")[0]):
                    record.departure_paragraph = index
    return evidence


def _arrives(text: str, paragraph: Paragraph, mention: Mention) -> bool:
    """Does the sentence naming the character narrate their arrival?"""
    start, end = sentence_around(text, mention.start, mention.end, paragraph.start, paragraph.end)
    return bool(_ARRIVAL.search(text[mention.end:end]) or _DOOR_OPENS.search(text[start:mention.start]))


def _present(record: RosterEvidence, paragraph: int, offset: int) -> None:
    record.present_paragraphs.append(paragraph)
    if record.first_offset is None:
        record.first_offset = offset


def presence_range(record: RosterEvidence, scene_paragraphs: Sequence[int]) -> tuple[int, int] | None:
    """Paragraph range of presence: the scene's start (or the narrated arrival) until a departure or the end."""
    if not record.present_paragraphs:
        return None
    first = scene_paragraphs[0]
    if record.arrival_paragraph is not None and record.arrival_paragraph <= min(record.present_paragraphs):
        first = record.arrival_paragraph
    last = scene_paragraphs[-1]
    if record.departure_paragraph is not None and record.departure_paragraph >= max(record.present_paragraphs):
        last = record.departure_paragraph
    return first, last
