"""Dialogue: quoted speech in paragraphs and who speaks it.

Attribution follows the conventions of printed novels, strongest first: a
speech tag beside the quote ("said Holmes", "Mara replied", "she asked",
"said I" in a first-person narrator's span; "he" and "she" stand for the
one acting by name just before, in the quote's own paragraph or the two
before it); an action beat by a named subject in the same paragraph; a
quote that continues an unclosed quote of the paragraph before; and, in an
untagged run of a two-person exchange, alternation with the speaker two
paragraphs back. Speakers who are not
focus characters are recorded by name, so their lines are never given to a
focus character. A relational descriptor ("remarked my companion") speaks for
its character only once that character has been named in the scene or has
spoken there: before that its referent is unknown (Watson's companion is young
Stamford before he is Holmes), as the rosters also read it.

A name inside a quote addresses its character when it opens or closes a
clause of the line ("Well, Watson, ..."), and the next untagged line is then
their reply. It does not when the quote is only the name ("Silver?" I asked),
when a pronoun takes it up at once ("Long John, he was quartermaster"), or
when it takes up a name the other speaker just spoke of ("Ah, Silver!" says
he, to "Silver?"): that is a topic, not the one spoken to.

A line that names someone is not theirs unless its own tag says so: a
speaker read from a pronoun, a beat, a reply or an alternation is never one
the line itself speaks of or to ('"Is Dr. Livesey mad?" said he', when the
doctor has just left). A character who speaks of himself by name (Silver's
"old John") then goes unattributed: nobody, rather than someone invented.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from reveriemem.core.characters import Character
from reveriemem.core.text import Paragraph
from reveriemem.source_to_memory.clauses import is_action_subject
from reveriemem.source_to_memory.mentions import Mention, is_relational
from reveriemem.source_to_memory.movement import company_leaves
from reveriemem.source_to_memory.narration_history import (
    SOMEONE,
    acting_before,
    in_spans,
    narrated,
    narrated_at,
    narration_fragments,
)
from reveriemem.source_to_memory.speech_tags import SPEECH_VERB as _VERB
from reveriemem.source_to_memory.speech_tags import Introduction, ends_introducing, introduction, vocatives
from reveriemem.source_to_memory.verse_speech import reads_as_verse, speeches

ATTRIBUTION_VERSION = "dialogue-v32"  # v24-27: a poem without quotation marks: its speeches by their formulas; v28: speech in single marks (core.quotes); v29: "Vane was silent a moment" acts (clauses); v30: "X and the guide" one subject; v31-32: "that Gregson, Lestrade, and Co." addresses nobody

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
    method: str  # tag | introduced | pronoun | beat | continuation | alternation | reply | verse | none
    addressees: list[str] = field(default_factory=list)  # focus slugs addressed by name
    spoken_of: list[str] = field(default_factory=list)  # focus slugs the line itself names (not its speaker's)
    quote_spans: list[tuple[int, int]] = field(default_factory=list)
    continues: bool = False  # quote left open at the paragraph's end


# A word or name in quotation marks after a verb of naming or writing is a term, not speech ('he said it was
# called "paprika hendl," and that...', 'a card marked "Rache"', 'Holmes wrote "Rache"').
_NAMES_A_TERM = re.compile(
    r"\b(?:called|named|termed|dubbed|christened|marked|labell?ed|inscribed|entitled|headed|known\s+as|"
    r"so-called|wrote|written|the\s+words?|the\s+name)\s*$")


def quote_spans(paragraph: Paragraph) -> tuple[list[tuple[int, int]], bool]:
    """Spans of double-quoted speech (straight or curly), absolute offsets.

    Returns the spans and whether a quote is still open at the paragraph end. In a document quoted
    whole (`Paragraph.document`) the double quotation marks are the document's, and speech is in
    single quotes.
    """
    if paragraph.document:
        return _single_quote_spans(paragraph)
    text = paragraph.text
    spans: list[tuple[int, int]] = []
    opening: int | None = None
    for index, char in enumerate(text):
        if char == "“" or (char == '"' and opening is None):
            if opening is None:
                opening = index
        elif char == "”" or char == '"':
            if opening is not None:
                if not _NAMES_A_TERM.search(text, max(0, opening - 40), opening):
                    spans.append((paragraph.start + opening, paragraph.start + index + 1))
                opening = None
    still_open = opening is not None
    if opening is not None:
        spans.append((paragraph.start + opening, paragraph.end))
    return spans, still_open


# In a document quoted whole, a single quote opens speech at the start, after a space, a dash or the
# document's mark, before a letter; it closes after a stop or a dash, before a space or the end. An apostrophe
# inside a word ("ain't", "Morris's") or after one ("goodness' sake") does neither.
_SINGLE_OPENS = re.compile(r"(?:(?<=^)|(?<=[\s\"“(-]))['‘](?=[A-Za-z])")
_SINGLE_CLOSES = re.compile(r"(?<=[.,!?;:-])['’](?=\s|$|[\"”])")


def _single_quote_spans(paragraph: Paragraph) -> tuple[list[tuple[int, int]], bool]:
    text = paragraph.text
    spans: list[tuple[int, int]] = []
    at = 0
    while (opening := _SINGLE_OPENS.search(text, at)) is not None:
        closing = _SINGLE_CLOSES.search(text, opening.end())
        if closing is None:
            spans.append((paragraph.start + opening.start(), paragraph.end))
            return spans, True
        spans.append((paragraph.start + opening.start(), paragraph.start + closing.end()))
        at = closing.end()
    return spans, False


def attribute_dialogue(
    text: str,
    paragraphs: Sequence[Paragraph],
    mentions_by_paragraph: dict[int, list[Mention]],
    characters: Sequence[Character],
    narrator_at: dict[int, str],
    scene_of: dict[int, int] | None = None,
    verse: bool | None = None,
) -> list[Utterance]:
    """Attribute the quoted speech of every paragraph that has some.

    `narrator_at` maps a paragraph index to the slug of the first-person
    narrator whose span covers it; `scene_of` (paragraph -> scene id) stops
    alternation and continuation from crossing a scene boundary. `verse`: the book reads as verse (the
    book's own `reads_as_verse`, decided once over all its paragraphs), read from `paragraphs` when None.
    """
    gender = {c.slug: c.gender for c in characters}
    if reads_as_verse(paragraphs) if verse is None else verse:  # a poem without quotation marks
        return _verse_utterances(text, paragraphs, mentions_by_paragraph, gender)
    utterances: list[Utterance] = []
    previous: Utterance | None = None
    before_previous: Utterance | None = None
    open_quote = False
    recent: list[tuple[int, str, bool]] = []  # (paragraph, slug, acting subject?) of narration mentions
    named: set[str] = set()  # named in this scene's narration, or speaking: "my companion" may now mean them
    scene: int | None = None
    previous_spoken_of: set[str] = set()  # characters named inside the quotes of the last utterance
    introduced: tuple[int, Introduction] | None = None  # (paragraph, tag) of a narration ending "he said:--"
    for paragraph in paragraphs:
        spans, still_open = quote_spans(paragraph)
        if scene_of is not None and scene_of.get(paragraph.index) != scene:
            scene, named = scene_of.get(paragraph.index), set()
        # a relational descriptor ("my companion") before its character is named in the scene: nobody known
        mentions = [m for m in mentions_by_paragraph.get(paragraph.index, [])
                    if not (is_relational(m) and m.character not in named)]
        named |= {m.character for m in mentions if m.kind == "name" and not in_spans(m.start, spans)}
        same_scene = (
            previous is not None
            and previous.paragraph == paragraph.index - 1
            and (scene_of is None or scene_of.get(previous.paragraph) == scene_of.get(paragraph.index))
        )
        if scene_of is not None and recent and scene_of.get(recent[-1][0]) != scene_of.get(paragraph.index):
            recent.clear()
        if not spans:
            recent.extend(narrated(text, paragraph, mentions, spans, gender))
            if company_leaves(text, [(paragraph.start, paragraph.end)]):
                named = set()
            found = introduction(text, paragraph, mentions)
            introduced = (paragraph.index, found) if found else None
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
        utterance.addressees = vocatives(text, spans, mentions)
        utterance.spoken_of = sorted({m.character for m in mentions if in_spans(m.start, spans) and not m.ambiguous})
        fragments = narration_fragments(paragraph, spans)
        here = narrated_at(text, paragraph, mentions, spans, gender)  # the line's own paragraph, told before its tag
        _attribute_by_tag(utterance, text, fragments, spans, mentions, gender, recent,
                          narrator_at.get(paragraph.index), here)
        if utterance.method == "none" and introduced and introduced[0] == paragraph.index - 1 \
                and (scene_of is None or scene_of.get(introduced[0]) == scene_of.get(paragraph.index)) \
                and paragraph.text.startswith(('"', "“")):
            acting = [e for e in recent if e[0] == introduced[0] and e[2]]  # who acts in the introducing paragraph
            _attribute_by_introduction(utterance, introduced[1], gender, acting, narrator_at.get(introduced[0]))
        introduced = None
        if utterance.method == "none" and open_quote and same_scene and previous is not None \
                and paragraph.text.startswith(('"', "“")):
            _copy_speaker(utterance, previous, "continuation")
        if utterance.method == "none" or (utterance.speaker is None and utterance.speaker_label
                                          and utterance.speaker_label.startswith("?")):
            if utterance.method == "none":
                _attribute_by_beat(utterance, text, fragments, mentions, gender, recent, narrator_at.get(paragraph.index),
                                   here)
            if utterance.speaker is None and same_scene and previous is not None:
                _attribute_as_reply(utterance, previous, gender)
        if utterance.method == "none" and same_scene and previous is not None and before_previous is not None \
                and not fragments_have_words(text, fragments):
            if (
                before_previous.speaker_label
                and previous.speaker_label
                and before_previous.speaker_label != previous.speaker_label
                and before_previous.speaker not in utterance.addressees
            ):
                _copy_speaker(utterance, before_previous, "alternation")
        if same_scene and previous is not None and utterance.speaker_label and previous.speaker_label \
                and utterance.speaker_label != previous.speaker_label:
            # a name the other speaker spoke of, taken up in the answer ("Silver?" I asked. "Ah, Silver!" says he;
            # "...that man and John Silver." "Silver, if you like," cried the squire): a topic, not an address
            utterance.addressees = [s for s in utterance.addressees
                                    if s not in previous_spoken_of or s in previous.addressees]
        previous_spoken_of = {m.character for m in mentions if in_spans(m.start, spans)}
        if spans[-1][1] < paragraph.end and not still_open:  # a closing tag ending "...he said:--": the next line's
            tail = replace(paragraph, start=spans[-1][1], text=text[spans[-1][1]:paragraph.end])
            found = introduction(text, tail, [m for m in mentions if m.start >= spans[-1][1]])
            introduced = (paragraph.index, found) if found else None
        if utterance.speaker in utterance.spoken_of and utterance.method not in ("tag", "introduced"):
            # a speaker guessed from the lines around is not one the line itself speaks of: nobody is known
            utterance.speaker, utterance.speaker_label, utterance.method = None, None, "none"
        recent.extend(narrated(text, paragraph, mentions, spans, gender))
        if utterance.speaker:
            named.add(utterance.speaker)
        if company_leaves(text, fragments):  # "We left him working": "my companion" is no longer known to be him
            named = set()
        utterances.append(utterance)
        before_previous = previous if same_scene else None
        previous = utterance
        open_quote = still_open
    return utterances


def _verse_utterances(text: str, paragraphs: Sequence[Paragraph], mentions_by_paragraph: dict[int, list[Mention]],
                       gender: dict[str, str]) -> list[Utterance]:
    """The speeches of a poem without quotation marks (`verse_speech.speeches`), one utterance per paragraph
    they cover (the first speech in it), `continues` when the speech runs on into the next."""
    mentions = sorted((m for ms in mentions_by_paragraph.values() for m in ms), key=lambda m: m.start)
    by_paragraph: dict[int, Utterance] = {}
    for speaker, start, end in speeches(text, paragraphs, mentions, gender):
        for paragraph in paragraphs:
            a, b = max(start, paragraph.start), min(end, paragraph.end)
            if b <= a or not text[a:b].strip() or paragraph.index in by_paragraph:
                continue
            a += len(text[a:b]) - len(text[a:b].lstrip())
            by_paragraph[paragraph.index] = Utterance(
                paragraph=paragraph.index, start=a, end=b, text=" ".join(text[a:b].split()), speaker=speaker,
                speaker_label=speaker or "?", method="verse" if speaker else "none", quote_spans=[(a, b)],
                continues=end > paragraph.end)
    return [by_paragraph[i] for i in sorted(by_paragraph)]


def fragments_have_words(text: str, fragments: Sequence[tuple[int, int]]) -> bool:
    return any(re.search(r"[A-Za-z]{2,}", text[a:b]) for a, b in fragments)


def _attribute_as_reply(utterance: Utterance, previous: Utterance, gender: dict[str, str]) -> None:
    """The character addressed by name in the line just before answers it."""
    pronoun = utterance.speaker_label[1:] if utterance.speaker_label and utterance.speaker_label.startswith("?") else None
    wanted = {"he": "male", "she": "female"}.get(pronoun or "")
    candidates = [s for s in previous.addressees if s != previous.speaker and (wanted is None or gender.get(s) == wanted)]
    if len(candidates) == 1:
        utterance.speaker, utterance.speaker_label, utterance.method = candidates[0], candidates[0], "reply"


def _copy_speaker(target: Utterance, source: Utterance, method: str) -> None:
    target.speaker = source.speaker
    target.speaker_label = source.speaker_label
    target.method = method


def _tag_clause(text: str, a: int, b: int, follows_quote: bool) -> tuple[int, int]:
    """The clause of a narration fragment that can hold a speech tag: the first
    clause after a quote, or the last clause before one."""
    fragment = text[a:b]
    if follows_quote:
        stop = re.search(r"[.!?;:]", fragment)
        return a, a + (stop.start() if stop else len(fragment))
    starts = [m.end() for m in re.finditer(r"[.!?;]\s", fragment)]
    return a + (starts[-1] if starts else 0), b


def _attribute_by_tag(
    utterance: Utterance,
    text: str,
    fragments: Sequence[tuple[int, int]],
    spans: Sequence[tuple[int, int]],
    mentions: Sequence[Mention],
    gender: dict[str, str],
    recent: list[tuple[int, str, bool]],
    narrator: str | None,
    here: Sequence[tuple[int, tuple[int, str, bool]]] = (),
) -> None:
    """Speech tags in the clause right after or right before a quote. A pronoun ("muttered he") may stand for
    the acting subject of the narration of the line's own paragraph before the tag (`here`), as for one named in
    the paragraphs before: "Passepartout went on deck. He saw nobody. 'Good!' muttered he"."""
    narration_mentions = [m for m in mentions if not in_spans(m.start, spans)]
    for a, b in fragments:
        follows_quote = any(span_end == a for _, span_end in spans)
        precedes_quote = any(span_start == b for span_start, _ in spans)
        if not (follows_quote or precedes_quote):
            continue
        ca, cb = _tag_clause(text, a, b, follows_quote)
        clause = text[ca:cb]
        verb = re.search(rf"\b{_VERB}\b", clause)
        if not verb:
            continue
        if _NAMES_A_TERM.search(clause, 0, verb.end()) and re.match(r"\s*[\"“]", clause[verb.end():]):
            continue  # 'to hear my wife called "Madam Mina"': a name given, not a line spoken
        local = [m for m in narration_mentions if ca <= m.start < cb]
        if local:
            nearest = min(local, key=lambda m: abs(m.start - (ca + verb.start())))
            gap = text[min(nearest.end, ca + verb.start()) : max(nearest.start, ca + verb.end())]
            addressed = nearest.start >= ca + verb.end() and "," in gap  # "I cried, Lucy dear": spoken to
            if len(gap.split()) <= 3 and not addressed:
                utterance.speaker, utterance.speaker_label, utterance.method = (
                    nearest.character, nearest.character, "tag")
                return
        found = (_PRONOUN_TAG_AFTER.search(clause) if follows_quote else None) or \
            (_PRONOUN_TAG_BEFORE.search(clause) if precedes_quote else None)
        pronoun = found and next((g for g in found.groups() if g), None)
        if pronoun:  # "Mr. Dance stood there, as he said, ...": who acts before the pronoun, its clause included
            at = ca + (found.start() if found else 0)
            _resolve_pronoun(utterance, pronoun, gender, [*recent, *acting_before(here, at)], narrator)
            return
        found = (_OTHER_TAG_AFTER.search(clause) or _OTHER_TAG_SUBJECT.search(clause)) if follows_quote else None
        found = found or (_OTHER_TAG_BEFORE.search(clause) if precedes_quote else None)
        other = found and found.group(1)
        if other and other.split()[0] not in _NOT_NAMES:
            utterance.speaker_label, utterance.method = other, "tag"
            return


def _resolve_pronoun(
    utterance: Utterance, pronoun: str, gender: dict[str, str], recent: list[tuple[int, str, bool]], narrator: str | None
) -> None:
    """`I` is the narrator; he/she is the focus character of that gender named
    in the narration of this or the two paragraphs before, if any: in the
    latest paragraph naming one, the acting subject ("Osric laid the book
    before the Guildmaster" makes "he" Osric), else the last named. Whom the
    line addresses or speaks of by name is not its speaker. Nobody is chosen when another
    person acted since, or, for one only named there (not acting), when a
    person of that gender who is no focus character was told of since ("I
    asked the man who came to the door")."""
    if pronoun == "I":
        utterance.speaker, utterance.speaker_label, utterance.method = narrator, narrator or "I", "tag"
        return
    wanted = "male" if pronoun.lower() == "he" else "female"
    window = utterance.paragraph - 2
    candidates = [(index, slug, subject) for index, slug, subject in recent[-12:]
                  if index >= window and gender.get(slug) == wanted
                  and slug not in utterance.addressees  # "Ah, Silver!" says he: not Silver
                  and slug not in utterance.spoken_of]  # "is Dr. Livesey mad?" said he: not Livesey
    if candidates:
        latest = candidates[-1][0]
        in_latest = [c for c in candidates if c[0] == latest]
        chosen = next((c for c in reversed(in_latest) if c[2]), in_latest[-1])
        history = [entry for entry in recent[-12:] if entry[0] >= window]
        since = max(i for i, entry in enumerate(history) if entry == chosen) + 1
        if any(slug == "" or (not chosen[2] and slug in (SOMEONE, SOMEONE + wanted)) for _, slug, _ in history[since:]):
            # someone else acted, or a person of that gender was told of, since ("I asked the man who came to the
            # door ... 'I'm the depity,' he answered"): "he" may be them
            utterance.speaker_label, utterance.method = f"?{pronoun.lower()}", "pronoun"
            return
        utterance.speaker, utterance.speaker_label, utterance.method = chosen[1], chosen[1], "pronoun"
        return
    utterance.speaker_label, utterance.method = f"?{pronoun.lower()}", "pronoun"


def _attribute_by_beat(
    utterance: Utterance, text: str, fragments: Sequence[tuple[int, int]], mentions: Sequence[Mention],
    gender: dict[str, str], recent: list[tuple[int, str, bool]], narrator: str | None,
    here: Sequence[tuple[int, tuple[int, str, bool]]] = (),
) -> None:
    """An action beat beside the quote ("Vane sat back.", "The old clerk's smile
    did not waver.", "She did not sit down."): its subject is the speaker."""
    for a, b in fragments:
        lead = text[a:b]
        if not re.search(r"[A-Za-z]{2,}", lead) or (b > utterance.end and ends_introducing(lead)):
            continue  # no words, or a closing tag that introduces the next paragraph's line ("He interrupted:--")
        offset = len(lead) - len(lead.lstrip(" \t\r\n"))
        first = next((m for m in mentions if a <= m.start < b), None)
        if first is not None and is_action_subject(text, first, a + offset):
            before = text[a + offset : first.start].strip()
            if before in ("", "The", "the"):
                utterance.speaker, utterance.speaker_label, utterance.method = first.character, first.character, "beat"
                return
        pronoun = re.match(r"(He|She|I)\s+(?:\w+ly\s+)?(?:did\s+not\s+|had\s+)?[a-z]+", lead[offset:])
        if pronoun:
            _resolve_pronoun(utterance, pronoun.group(1), gender, [*recent, *acting_before(here, a + offset)],
                             narrator)
            if utterance.speaker:
                utterance.method = "beat"
                return
            utterance.speaker_label, utterance.method = None, "none"
        return


def _attribute_by_introduction(utterance: Utterance, found: Introduction, gender: dict[str, str],
                               recent: list[tuple[int, str, bool]], narrator: str | None) -> None:
    """Attribute a line from the tag that introduced it; "he" or "she" stands only for one named in the
    introducing paragraph itself as an acting subject (`recent` holds those alone): a pronoun reaching further
    back, or to one named only as an object, may be someone who is no focus character ("the poor old man ... he
    said in a very gentle way:--"; "was left absolutely to Arthur Holmwood. When he had told us so much he went
    on:--", the solicitor)."""
    utterance.addressees += [c for c in found.addressed if c not in utterance.addressees]
    if found.speaker:
        utterance.speaker, utterance.speaker_label, utterance.method = found.speaker, found.speaker, "introduced"
    elif found.pronoun:
        wanted = {"he": "male", "she": "female"}.get(found.pronoun.lower())
        if wanted and len({slug for _, slug, _ in recent if gender.get(slug) == wanted}) > 1:
            # "Arthur and Quincey drew near also ... He answered:--": not one of them, and no beat decides it
            utterance.speaker_label, utterance.method = f"?{found.pronoun.lower()}", "pronoun"
            return
        if wanted and not recent:
            return  # nobody acting there: the line's own paragraph or the lines before may tell
        _resolve_pronoun(utterance, found.pronoun, gender, recent, narrator)
        utterance.method = "introduced" if utterance.speaker else utterance.method
    elif found.other:
        utterance.speaker_label, utterance.method = found.other, "introduced"
