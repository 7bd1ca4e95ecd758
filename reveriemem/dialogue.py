"""Dialogue: quoted speech in paragraphs and who speaks it.

Attribution follows the conventions of printed novels, strongest first: a
speech tag beside the quote ("said Holmes", "Mara replied", "she asked",
"said I" in a first-person narrator's span); an action beat by a named
subject in the same paragraph; a quote that continues an unclosed quote of
the paragraph before; and, in an untagged run of a two-person exchange,
alternation with the speaker two paragraphs back. Speakers who are not
focus characters are recorded by name, so their lines are never given to a
focus character.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from reveriemem.characters import Character
from reveriemem.mentions import Mention
from reveriemem.text import Paragraph

ATTRIBUTION_VERSION = "dialogue-v1"

SPEECH_VERBS = (
    "said|says|say|asked|asks|cried|cries|replied|replies|answered|answers|exclaimed|remarked|"
    "observed|continued|added|shouted|whispered|muttered|returned|repeated|began|called|roared|"
    "sighed|laughed|growled|murmured|interrupted|protested|inquired|enquired|demanded|retorted|"
    "rejoined|responded|responds|explained|declared|suggested|insisted|urged|pleaded|begged|"
    "groaned|snapped|sneered|stammered|faltered|gasped|yelled|screamed|sobbed|breathed|"
    "went on|cut in|put in|broke in|struck in|thundered|hissed|bellowed|ventured|resumed|"
    "concluded|agreed|admitted|confessed|announced|told|warned|wondered|ordered|commanded|"
    "said,|mused|grumbled|chuckled|smiled|nodded|shrieked|wailed|moaned|whimpered|persisted"
)
_VERB = rf"(?:{SPEECH_VERBS})"
_PRONOUN_TAG_AFTER = re.compile(rf"^[\s,;:—–-]*(?:\w+ly\s+)?{_VERB}\s+(he|she|I)\b|^[\s,;:—–-]*(he|she|I)\s+(?:\w+ly\s+)?{_VERB}\b")
_PRONOUN_TAG_BEFORE = re.compile(rf"\b(he|she|I)\s+(?:\w+ly\s+)?{_VERB}[\s,:—–-]*$")
_CAPITAL_NAME = r"(?:(?:Mr|Mrs|Miss|Dr|Doctor|Captain|Professor|Lord|Lady|Sir|Madam|Father|Mother|Aunt|Uncle|Colonel|Inspector|Sergeant|Squire)\.?\s+)?[A-Z][a-z'’]+(?:\s+[A-Z][a-z'’]+)?"
_OTHER_TAG_AFTER = re.compile(rf"^[\s,;:—–-]*(?:\w+ly\s+)?{_VERB}\s+(?:the\s+)?({_CAPITAL_NAME})")
_OTHER_TAG_SUBJECT = re.compile(rf"^[\s,;:—–-]*({_CAPITAL_NAME})\s+(?:\w+ly\s+)?{_VERB}\b")
_OTHER_TAG_BEFORE = re.compile(rf"({_CAPITAL_NAME})\s+(?:\w+ly\s+)?{_VERB}[\s,:—–-]*$")
_NOT_NAMES = {
    "I", "He", "She", "It", "They", "We", "You", "The", "A", "An", "And", "But", "Then", "So",
    "Yes", "No", "Oh", "Well", "Now", "There", "Here", "This", "That", "What", "Why", "How",
    "When", "Who", "His", "Her", "My", "Our", "Your", "Their", "As", "At", "In", "On", "If",
}


@dataclass
class Utterance:
    """The quoted speech of one paragraph and its attributed speaker."""

    paragraph: int
    start: int
    end: int
    text: str
    speaker: str | None  # focus character slug, or None
    speaker_label: str | None  # the name as found, also for non-focus speakers
    method: str  # tag | pronoun | beat | continuation | alternation | none
    addressees: list[str] = field(default_factory=list)  # focus slugs addressed by name
    quote_spans: list[tuple[int, int]] = field(default_factory=list)
    continues: bool = False  # quote left open at the paragraph's end


def quote_spans(paragraph: Paragraph, open_at_start: bool = False) -> tuple[list[tuple[int, int]], bool]:
    """Spans of double-quoted speech (straight or curly), absolute offsets.

    Returns the spans and whether a quote is still open at the paragraph end.
    """
    text = paragraph.text
    spans: list[tuple[int, int]] = []
    opening: int | None = 0 if open_at_start and not text.startswith(('"', "“")) else None
    for index, char in enumerate(text):
        if char == "“" or (char == '"' and opening is None):
            if opening is None:
                opening = index
        elif char == "”" or char == '"':
            if opening is not None:
                spans.append((paragraph.start + opening, paragraph.start + index + 1))
                opening = None
    still_open = opening is not None
    if opening is not None:
        spans.append((paragraph.start + opening, paragraph.end))
    return spans, still_open


def in_spans(position: int, spans: Sequence[tuple[int, int]]) -> bool:
    return any(a <= position < b for a, b in spans)


def narration_fragments(paragraph: Paragraph, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of a paragraph outside its quotes, absolute offsets."""
    fragments: list[tuple[int, int]] = []
    cursor = paragraph.start
    for a, b in spans:
        if a > cursor:
            fragments.append((cursor, a))
        cursor = max(cursor, b)
    if cursor < paragraph.end:
        fragments.append((cursor, paragraph.end))
    return fragments


def attribute_dialogue(
    text: str,
    paragraphs: Sequence[Paragraph],
    mentions_by_paragraph: dict[int, list[Mention]],
    characters: Sequence[Character],
    narrator_at: dict[int, str],
    scene_of: dict[int, int] | None = None,
) -> list[Utterance]:
    """Attribute the quoted speech of every paragraph that has some.

    `narrator_at` maps a paragraph index to the slug of the first-person
    narrator whose span covers it; `scene_of` (paragraph -> scene id) stops
    alternation and continuation from crossing a scene boundary.
    """
    gender = {c.slug: c.gender for c in characters}
    utterances: list[Utterance] = []
    previous: Utterance | None = None
    before_previous: Utterance | None = None
    open_quote = False
    recent: list[tuple[int, str]] = []  # (paragraph, slug) of narration mentions, for pronouns
    for paragraph in paragraphs:
        spans, still_open = quote_spans(paragraph, open_at_start=False)
        mentions = mentions_by_paragraph.get(paragraph.index, [])
        same_scene = (
            previous is not None
            and previous.paragraph == paragraph.index - 1
            and (scene_of is None or scene_of.get(previous.paragraph) == scene_of.get(paragraph.index))
        )
        if scene_of is not None and recent and scene_of.get(recent[-1][0]) != scene_of.get(paragraph.index):
            recent.clear()
        if not spans:
            recent.extend((paragraph.index, m.character) for m in mentions)
            if previous is not None and previous.paragraph < paragraph.index - 1:
                before_previous = None
            open_quote = False
            continue
        utterance = Utterance(
            paragraph=paragraph.index,
            start=spans[0][0],
            end=spans[-1][1],
            text=" ".join(text[a:b].strip('"“” \r\n') for a, b in spans),
            speaker=None,
            speaker_label=None,
            method="none",
            quote_spans=spans,
            continues=still_open,
        )
        utterance.addressees = _vocatives(text, spans, mentions)
        fragments = narration_fragments(paragraph, spans)
        _attribute_by_tag(utterance, text, fragments, spans, mentions, gender, recent,
                          narrator_at.get(paragraph.index))
        if utterance.method == "none" and open_quote and same_scene and previous is not None \
                and paragraph.text.startswith(('"', "“")):
            _copy_speaker(utterance, previous, "continuation")
        if utterance.method == "none":
            _attribute_by_beat(utterance, text, fragments, mentions)
        if utterance.method == "none" and same_scene and previous is not None and before_previous is not None \
                and not fragments_have_words(text, fragments):
            if (
                before_previous.speaker_label
                and previous.speaker_label
                and before_previous.speaker_label != previous.speaker_label
                and before_previous.speaker not in utterance.addressees
            ):
                _copy_speaker(utterance, before_previous, "alternation")
        recent.extend((paragraph.index, m.character) for m in mentions if not in_spans(m.start, spans))
        utterances.append(utterance)
        before_previous = previous if same_scene else None
        previous = utterance
        open_quote = still_open
    return utterances


def fragments_have_words(text: str, fragments: Sequence[tuple[int, int]]) -> bool:
    return any(re.search(r"[A-Za-z]{2,}", text[a:b]) for a, b in fragments)


def _copy_speaker(target: Utterance, source: Utterance, method: str) -> None:
    target.speaker = source.speaker
    target.speaker_label = source.speaker_label
    target.method = method


def _attribute_by_tag(
    utterance: Utterance,
    text: str,
    fragments: Sequence[tuple[int, int]],
    spans: Sequence[tuple[int, int]],
    mentions: Sequence[Mention],
    gender: dict[str, str],
    recent: list[tuple[int, str]],
    narrator: str | None,
) -> None:
    """Speech tags in the narration right after or right before a quote."""
    narration_mentions = [m for m in mentions if not in_spans(m.start, spans)]
    for a, b in fragments:
        fragment = text[a:b]
        follows_quote = any(span_end == a for _, span_end in spans)
        precedes_quote = any(span_start == b for span_start, _ in spans)
        if not (follows_quote or precedes_quote):
            continue
        local = [m for m in narration_mentions if a <= m.start < b]
        verb = re.search(rf"\b{_VERB}\b", fragment)
        if verb and local:
            # the focus mention nearest the speech verb, within a few words of it
            nearest = min(local, key=lambda m: abs(m.start - (a + verb.start())))
            gap = text[min(nearest.end, a + verb.start()) : max(nearest.start, a + verb.end())]
            if len(gap.split()) <= 3:
                utterance.speaker, utterance.speaker_label, utterance.method = (
                    nearest.character, nearest.character, "tag")
                return
        pronoun = None
        if follows_quote:
            found = _PRONOUN_TAG_AFTER.search(fragment)
            pronoun = found and (found.group(1) or found.group(2))
        if not pronoun and precedes_quote:
            found = _PRONOUN_TAG_BEFORE.search(fragment)
            pronoun = found and found.group(1)
        if pronoun:
            if pronoun == "I":
                if narrator:
                    utterance.speaker, utterance.speaker_label, utterance.method = narrator, narrator, "tag"
                else:
                    utterance.speaker_label, utterance.method = "I", "tag"
                return
            wanted = "male" if pronoun.lower() == "he" else "female"
            window = utterance.paragraph - 2
            for index, slug in reversed(recent[-12:]):
                if index >= window and gender.get(slug) == wanted:
                    utterance.speaker, utterance.speaker_label, utterance.method = slug, slug, "pronoun"
                    return
            utterance.speaker_label, utterance.method = f"?{pronoun.lower()}", "pronoun"
            return
        other = None
        if follows_quote:
            found = _OTHER_TAG_AFTER.search(fragment) or _OTHER_TAG_SUBJECT.search(fragment)
            other = found and found.group(1)
        if not other and precedes_quote:
            found = _OTHER_TAG_BEFORE.search(fragment)
            other = found and found.group(1)
        if other and other.split()[0] not in _NOT_NAMES:
            utterance.speaker_label, utterance.method = other, "tag"
            return


def _attribute_by_beat(
    utterance: Utterance, text: str, fragments: Sequence[tuple[int, int]], mentions: Sequence[Mention]
) -> None:
    """A paragraph whose narration opens with a named focus subject: that character speaks."""
    if not fragments:
        return
    a, b = fragments[0]
    lead = text[a:b]
    if not re.search(r"[A-Za-z]{2,}", lead):
        return
    first = next((m for m in mentions if a <= m.start < b), None)
    if first is None:
        return
    before = text[a : first.start].strip()
    if before in ("", "The", "the") or before.endswith((".", "!", "?")):
        after = text[first.end : min(b, first.end + 40)]
        if re.match(r"^(?:'s|’s)?\s+(?:\w+ly\s+)?[a-z]+(?:ed|ew|ook|ose|at|ood|ent|ame|ave|ew|ught|ked|ed)\b", after):
            utterance.speaker, utterance.speaker_label, utterance.method = first.character, first.character, "beat"


def _vocatives(text: str, spans: Sequence[tuple[int, int]], mentions: Sequence[Mention]) -> list[str]:
    """Focus characters addressed by name inside the quotes ("Well, Watson," ...)."""
    addressed: list[str] = []
    for mention in mentions:
        span = next(((a, b) for a, b in spans if a <= mention.start < b), None)
        if span is None:
            continue
        before = text[span[0] : mention.start].lstrip('"“ ')
        after = text[mention.end : mention.end + 2]
        opens = before == "" or re.search(r"(?:[,!?;]|\b(?:O|Oh|Ah|Dear|My dear))\s*$", before) is not None
        closes = after[:1] in {",", ".", "!", "?", ";", "—", "-", "”", '"'}
        if opens and closes and mention.character not in addressed:
            addressed.append(mention.character)
    return addressed
