"""Deterministic rosters: is a focus character present in a scene, when, and do they speak?

Presence is a state, not a mention. The evidence, per paragraph:
- speech: an utterance attributed to the character (present, active);
- narration: first-person narration in the character's narrator span (present, active);
- address: another speaker addresses the character by name (present);
- action: the character (by name or descriptor) is the subject of a narrated
  action at a clause start (a verb of thinking is none: "Fogg rightly
  suspected" says nothing of where Fogg is), or their face/hand/voice is described, or they
  are named with a first-person narrator as one company ("Arthur, Quincey
  Morris, and myself", "Quincey and I went"; not "the note-books of Mina
  and myself", "if Jonathan and I were"), or spoken to in the narration
  ("said Van Helsing to Arthur", "I told Quincey") (present);
- mention: any other naming, in dialogue or narration, or in a letter read
  out (referenced); whatever happens in a paragraph set in from the margin
  (a letter, a log, an inscription quoted in the story) is a mention too,
  and so is a naming in a question the narration asks ("Would it not be
  better to wait until Mr. Fogg reached London?"): wondered, not told.

Per character, in story order, presence opens at a narrated arrival or at
their first speech, action or narration in the scene (the sentence holding
it; never at the scene's start by default), and closes at a narrated
departure, at their death, or at the scene's end; a later arrival or action
opens it again. So a line spoken or narrated before a character comes into
the scene is not theirs. A relational descriptor ("my companion", "his
master") may change referent over a book: it counts for a character only
once that character has been present by name in the scene, and otherwise
is nobody's evidence.

A company acting as one ("We went gravely into what was to be done", "the
whole party dined") holds whoever acts next in the same paragraph with no
narrated arrival: present from the company's act, not only from their own.

Where the text marks a change of time or place inside a scene (a transition
cue, a break, a time shift, an arrival or a departure that the offline
segmenter reads but, the spans being short, does not make a scene boundary),
presence closes for everyone, as at a scene's start: a companion who travels
on silently is withheld until the text shows them again.

When the story follows a character out of a place (a narrated departure,
then that character's evidence before anyone else's), the narration is
where they are: the others' presence closes at the departure and reopens
only at their own next evidence. A move within the room ("went back to his
seat") is no departure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reveriemem.core.text import Paragraph, is_inset, sentence_around
from reveriemem.source_to_memory.clauses import (
    BODY_PART,
    after_connective,
    is_action_subject,
    is_gone,
    they_act,
    thinking_subject,
    turns_to,
)
from reveriemem.source_to_memory.dialogue import Utterance, in_spans, narration_fragments
from reveriemem.source_to_memory.mentions import Mention, is_relational
from reveriemem.source_to_memory.movement import (
    company_leaves,
    departs,
    goes_along,
    narrator_moves,
    pronoun_departures,
    solitudes,
    stays_behind,
    told_elsewhere,
    writing_now,
)
from reveriemem.source_to_memory.presence_events import (
    CLOSES,
    OPENS,
    carry_back,
    follow_departures,
    presence_spans,
    with_one_here,
)

ROSTER_VERSION = "roster-v61"  # v61: "miles away" without a count is elsewhere too; v60: told elsewhere, a departure still counts; v59: one told to be elsewhere ("two miles away", "meanwhile") is not here; "Then X ... went up to bed" leaves; v57: a seen state of the body ("was exhausted") is presence; v58: "X and the guide stopped"
STATUSES = ("present_active", "present_silent", "referenced", "absent")

# Arrival in scene time, said of the character named just before the verb
# ("Tobin came in", "Osric Penhallow stood on the step"); a pluperfect
# ("had come in") tells of an earlier arrival. Or a door opens on them.
# "Appeared" arrives only at a place or at the sentence's end ("appeared at the door"), not when it
# means seemed ("Silver himself appeared less terrible").
_ARRIVAL = re.compile(
    r"^(?:(?!\b(?:not|never|would|could|should|might|may|must|have|had)\b)[^,;:.!?\"]){0,40}?\b(?:(?:came|comes|come|walked|stepped|burst|hurried|ran|strode|"
    r"rushed)\s+(?:in|into|through|back|up)\b|entered|arrived|appeared(?=[,;:.!?]|\s+(?:at|in|on|upon|from|"
    r"through|before|round|again|out|above|below|behind|among|beside|outside|inside)\b)|returned|"
    r"stood\s+(?:in|on|at)\s+the\s+(?:doorway|door|threshold|step))"
)
# A pluperfect arrival or an ongoing state ("Osric had come in last", "Fix had been waiting") tells that
# the character was already there: present from the scene's start. "Had been there" is not among them: it
# tells of a place once visited ("Wherever adventures were to be had, Jefferson Hope had been there").
_EARLIER_ARRIVAL = re.compile(
    r"\s+had\s+(?:(?:already|just|long)\s+)?(?:(?:come|walked|stepped|slipped)\s+in|entered|arrived|"
    r"been\s+(?:sitting|standing|waiting|watching|listening|present))\b(?!\s+with\b)"
)
# Having come with someone ("Tobin had come down with her", "had gone out with Aouda"): an arrival told
# with the company's, so present from the sentence that tells it (not from the scene's start, as the
# company may have arrived later). "had gone down with the boat" is no company.
_CAME_WITH = re.compile(
    r"\s+had\s+(?:(?:come|gone)\s+(?:(?:down|up|in|out|over|along|back|across|round|ashore|aboard)\s+)?)"
    r"with\s+(?:him|her|them|me|us|[A-Z][\w.]*)\b"
)
# Accompaniment in narration: "stood by the hearth with the apprentice", "stayed behind with Harrow and Tobin".
_WITH = re.compile(r"\bwith\s+(?:(?:[A-Z][\w.]*|the\s+\w+)\s+and\s+)?$")
# ... said of being or going somewhere together: a verb of staying, moving or keeping company comes first
# ("stayed behind in the emptying hall with", "rode in the same carriage with", "chatting cheerily with").
# A bargain, an agreement or a conversation told of ("struck a bargain with the doctor", "to deal plainly
# with Passepartout"), and "not with", say nothing of who is there.
_ACCOMPANIED = re.compile(
    r"\b(?:stood|stand\w*|stay\w*|sat|sit\w*|seated|remain\w*|wait\w*|linger\w*|walk\w*|came|come|went|go|"
    r"goes|rode|ride\w*|drove|sail\w*|travel\w*|return\w*|set\s+out|start\w*|ascend\w*|descend\w*|embark\w*|"
    r"board\w*|land\w*|chat\w*|talk\w*|play\w*|install\w*|join\w*|along|together|behind)\b"
    r"(?![^.;:!?]*\b(?:not|never)\b)[^.;:!?]*$"
)
# ... or the company acts next, with them ("and, with Mr. Fogg, played whist", "and with Aouda returned").
_THEN_ACTS = re.compile(r",?\s+(?:\w+ly\s+)?(?:[a-z]{3,}ed|went|came|rode|sat|stood|took|made|set)\b")
# ... not in company yet: a wish, a plan or a condition ("my notes, as they may refresh my memory when I talk over
# my travels with Mina", "if I could walk with Lucy").
_UNREAL = re.compile(r"\b(?:will|shall|would|should|could|may|might|must|cannot|if|unless|hope|wish|longed|"
                     r"want(?:ed)?\s+to)\b[^.;:!?]*$", re.IGNORECASE)
_DOOR_OPENS = re.compile(r"\bdoor\b[^.!?]{0,40}?\b(?:opened|banged|burst|flew|swung)\b")
_POSSESSED = re.compile(r"(?:'s|’s)\b")
# Named with the first-person narrator as one company ("we three--Arthur, Quincey Morris, and myself--called",
# "Quincey and I went"): where the narration is, they are.
_WITH_NARRATOR = re.compile(
    r"(?:,\s+(?:[A-Z][\w.]*\s*){1,3})*,?\s+and\s+myself\b(?!\s+(?:had|have|was|were|will|shall|would|should)\b)"
    r"|\s+and\s+I\s+(?:\w+ly\s+)?(?:[a-z]+ed|went|came|got|sat|stood|saw|found|took|made|kept|ran|rode|drove|set|"
    r"left|knew|felt|heard|told|said|began|held|met|sent|brought|bought|caught|fought|sought|thought|spent)\b")
# ... but not inside a possessive, a reported fear or a wish ("note-books of Mina and Seward and myself", "told him
# that both Van Helsing and I feared", "If Jonathan and I were driving").
_NOT_TOGETHER = re.compile(r"\b(?:of|that|if|when|both|between|whether|unless)\s+(?:[A-Z][\w.]*,?\s+(?:and\s+)?)*$",
                           re.IGNORECASE)
# Spoken or turned to in the narration, or woken by the narrator: the listener is there ("said Van Helsing to
# Arthur", "I told Quincey", Van Helsing's "I tell Madam Mina to sleep", "Then I arouse Madam Mina").
_SPOKEN_TO = re.compile(
    r"\b(?:(?:said|whispered|replied|answered|explained|remarked|observed|added|turned|nodded|bowed|called|cried|"
    r"shouted|murmured|went\s+on|continued)(?:\s+[A-Z][\w.]*){0,2}\s+(?:\w+ly\s+)?to|"
    r"I\s+(?:\w+ly\s+)?(?:told|tell|asked|ask|answered|warned|assured|begged|implored|woke|wake|awoke|aroused|arouse|"
    r"kissed|helped|lifted|carried|led)|I\s+(?:\w+ly\s+)?(?:looked|glanced|stared|gazed)\s+(?:\w+\s+)?at)\s+(?:the\s+)?$")
# A roll of those attending, as minutes of a meeting give it ("Our meeting for report. Present: Professor Van
# Helsing, Lord Godalming, Dr. Seward, ..."): each name in the list is there.
_ROLL = re.compile(r"\bPresent:\s+(?:(?:Mrs?|Dr|St|Messrs)\.|[^.;:!?])*$")
_FIRST_PERSON = re.compile(r"\b(?:I|me|my|myself|we|us|our)\b")
# The company as one subject, acting in scene time: "we went", "We all sat", "the travellers left", "the whole
# party dined". A modal or future ("we must", "we shall") is no act.
_COMPANY_ACTS = re.compile(
    r"(?:\b[Ww]e|\b(?:[Tt]he|[Oo]ur|[Hh]is|[Hh]er)\s+(?:whole\s+|little\s+)?(?:party|travellers|travelers|companions|"
    r"company))(?:\s+(?:all|both|three|four|five|two|together|then|now|at\s+once|soon|presently|\w+ly))*\s+"
    r"(?:(?:went|came|sat|stood|set|got|took|made|found|saw|heard|left|reached|arrived|entered|walked|drove|rode|"
    r"ate|dined|breakfasted|supped|waited|watched|listened|met|kept|held|ran|hurried|passed|followed|gathered|"
    r"assembled|talked|spoke|began|turned|looked|returned|started|stopped|crossed|climbed)\b|[a-z]{3,}ed\b)")



@dataclass
class RosterEvidence:
    """Counts of each kind of evidence for one character in one scene, and their presence spans.

    `spans` are source-offset intervals [start, end) of presence, in story
    order, filled by `scene_evidence` (empty when never present).
    """

    utterances: int = 0
    narration: int = 0
    addressed: int = 0
    actions: int = 0
    mentions: int = 0
    present_paragraphs: list[int] = field(default_factory=list)
    departure_paragraph: int | None = None
    arrival_paragraph: int | None = None
    first_offset: int | None = None
    spans: list[tuple[int, int]] = field(default_factory=list)
    events: list[tuple[int, str]] = field(default_factory=list)  # (offset, OPENS or CLOSES)
    addressed_at: list[int] = field(default_factory=list)  # offsets where a speaker addresses them by name
    address_only: bool = False  # addressed, but never speaks, acts or arrives in the scene

    def status(self) -> str:
        if self.utterances or self.narration:
            return "present_active"
        # Presence spans without a counted act: the text puts them there all the same ("he was alone with
        # her", "Cy had come in a little before"), so they are present, silent.
        if self.actions or self.spans or (self.addressed and not self.address_only):
            return "present_silent"
        if self.mentions or self.addressed:
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
    deaths: Mapping[str, int] | None = None,
    genders: Mapping[str, str] | None = None,
    names: Mapping[str, str] | None = None,
    checkpoints: Sequence[int] = (),
) -> dict[str, RosterEvidence]:
    """Gather roster evidence for every focus character over one scene's paragraphs, with presence spans.

    `genders` (slug -> gender) lets "he"/"she" stand for the last named actor in a departure or
    "was alone"; `names` (lowercased alias -> slug) names the companion of "alone with".
    `checkpoints` are the offsets inside the scene where the text marks a change of time or place
    ("The next morning", "* * *", "Three days later", "When we reached Benares"): everyone's
    presence closes there and opens again at their own next evidence, as at a scene's start.
    """
    evidence = {slug: RosterEvidence() for slug in character_slugs}
    genders = genders or {}
    actors: list[tuple[int, str]] = []  # (offset, slug) of named action subjects, this paragraph and the last
    alone: list[tuple[int, frozenset[str]]] = []
    scene_start = paragraphs[scene_paragraphs[0]].start if scene_paragraphs else 0
    named: set[str] = set()  # present by name in this scene so far: relational descriptors may now mean them
    companies: list[tuple[int, int]] = []  # (offset, paragraph) where the company acts as one ("we went")
    arrived: set[str] = set()  # characters whose arrival the scene narrates
    for index in scene_paragraphs:
        paragraph = paragraphs[index]
        utterance = utterances_by_paragraph.get(index)
        spans = utterance.quote_spans if utterance else []
        actors = [(at, slug) for at, slug in actors if at >= paragraphs[max(index - 1, 0)].start]
        if utterance and utterance.speaker in evidence:
            speaker = evidence[utterance.speaker]
            speaker.utterances += 1
            _present(speaker, index, paragraph.start)
            # and at each of their quotes: one who leaves and speaks on in the paragraph is heard where they went
            speaker.events.extend((a, OPENS) for a, _ in spans if a > paragraph.start)
            named.add(utterance.speaker)
            actors.append((paragraph.start, utterance.speaker))  # "he" in the next lines may be the speaker
        if utterance:
            for slug in utterance.addressees:
                if slug in evidence and slug != utterance.speaker:
                    evidence[slug].addressed += 1
                    evidence[slug].addressed_at.append(paragraph.start)
        fragments = narration_fragments(paragraph, spans)
        narrator = narrator_at.get(index)
        if narrator in evidence:
            narration = "".join(text[a:b] for a, b in fragments)
            if _FIRST_PERSON.search(narration):
                evidence[narrator].narration += 1
                _present(evidence[narrator], index, paragraph.start)
                named.add(narrator)
                for offset in narrator_moves(text, fragments):
                    alone.append((offset, frozenset([narrator])))  # the narration goes where the narrator goes
                for begin, end in writing_now(text, fragments):
                    with_me = {m.character for m in mentions_by_paragraph.get(index, []) if begin <= m.start < end}
                    alone.append((begin, frozenset([narrator, *with_me])))  # the writer's own moment, with the page
                if company_leaves(text, fragments):
                    named = {narrator}  # "We left him": "my companion" is no longer known to be him
        inset = is_inset(text, paragraph)  # a letter or log read in the scene: what it tells is not seen there
        if not inset:
            for a, b in fragments:
                companies.extend((m.start(), index) for m in _COMPANY_ACTS.finditer(text, a, b))
        left_at: list[int] = []  # ends of this paragraph's sentences that narrate a departure
        for mention in mentions_by_paragraph.get(index, []):
            record = evidence.get(mention.character)
            if record is None:
                continue
            if is_relational(mention) and mention.character not in named:
                continue  # "my companion" before the character is in the scene: its referent is unknown
            record.mentions += 1
            if record.first_offset is None:
                record.first_offset = mention.start
            if inset or in_spans(mention.start, spans):
                continue
            fragment_start = max([paragraph.start] + [b for a, b in spans if b <= mention.start])
            sentence = sentence_around(text, mention.start, mention.end, paragraph.start, paragraph.end)
            if _asked(text, sentence, spans):
                continue  # "Would it not be better to wait until Mr. Fogg reached London?": wondered, not told
            # right after someone leaves (this sentence or the one before): going with them, or staying behind
            left = next((at for at in reversed(left_at) if at == sentence[1] or 0 <= sentence[0] - at <= 3), None)
            gone = next((at for at in reversed(left_at) if at <= sentence[1]), None)  # earlier in the paragraph
            if gone is not None and stays_behind(text, mention.end) and is_action_subject(text, mention,
                                                                                          fragment_start):
                record.events.append((sentence[1], CLOSES))  # not where the story goes, until their next act
                continue
            if left is not None and goes_along(text, sentence[0], (mention.start, mention.end)):
                record.departure_paragraph = index
                record.events.append((left, CLOSES))  # one party: the story follows them together
            if _EARLIER_ARRIVAL.match(text, mention.end):
                _present(record, index, scene_start)
            if _CAME_WITH.match(text, mention.end):
                record.actions += 1
                _present(record, index, sentence[0])
            if _WITH.search(text, max(fragment_start, mention.start - 40), mention.start) and not _POSSESSED.match(
                    text, mention.end) and (_ACCOMPANIED.search(text, max(fragment_start, mention.start - 80),
                                                                mention.start) or _THEN_ACTS.match(text, mention.end)) \
                    and not _UNREAL.search(text, max(fragment_start, mention.start - 80), mention.start):
                record.actions += 1
                _present(record, index, sentence[0])
            if _SPOKEN_TO.search(text, max(fragment_start, mention.start - 40), mention.start):
                record.actions += 1  # "said Van Helsing to Arthur", "I turned to Quincey", "I told Arthur"
                _present(record, index, sentence[0])
            if _WITH_NARRATOR.match(text, mention.end) and narrator_at.get(index) in evidence \
                    and not _NOT_TOGETHER.search(text, max(fragment_start, mention.start - 60), mention.start):
                record.actions += 1  # "Arthur, Quincey Morris, and myself--called for the Professor"
                _present(record, index, sentence[0])
            if with_one_here(text, mention, mentions_by_paragraph.get(index, []), evidence, narrator_at.get(index)):
                record.actions += 1  # "Mr. Morris and Lord Godalming were with Dr. Seward at the door"
                _present(record, index, sentence[0])
            if _ROLL.search(text, max(paragraph.start, mention.start - 200), mention.start):
                record.actions += 1
                _present(record, index, sentence[0])
            if _arrives(text, sentence, mention):
                arrived.add(mention.character)
                if record.arrival_paragraph is None and not record.present_paragraphs:
                    record.arrival_paragraph = index
                _present(record, index, sentence[0])
                if mention.kind == "name":
                    named.add(mention.character)
            if is_gone(text, mention, fragment_start):
                record.departure_paragraph = index  # "Silver was gone": not there from here on
                record.events.append((sentence[1], CLOSES))
            elif is_action_subject(text, mention, fragment_start) and not thinking_subject(
                    text, mention, fragment_start):
                if not told_elsewhere(text, mention.end, sentence[1]):  # "Cole was at the mill, two miles away"
                    record.actions += 1
                    _present(record, index, sentence[0])
                    if mention.kind == "name":
                        named.add(mention.character)
                    actors.append((mention.start, mention.character))
                if departs(text, mention.end, sentence[1]):  # "Bob went away across the river": gone all the same
                    record.departure_paragraph = index
                    record.events.append((sentence[1], CLOSES))
                    left_at.append(sentence[1])
            elif after_connective(text, mention, fragment_start) and departs(text, mention.end, sentence[1]):
                record.departure_paragraph = index  # "Then Bob said goodnight and went up to bed": gone, not come
                record.events.append((sentence[1], CLOSES))
                left_at.append(sentence[1])
        if not inset:  # "we saw Lord Godalming and Quincey Morris. They came quickly in": the two named act
            told = [m for m in mentions_by_paragraph.get(index, []) if not in_spans(m.start, spans)]
            for a, b in fragments:
                for before, at in they_act(text, a, b):
                    they = {m.character for m in told if before <= m.start < at} & evidence.keys()
                    for slug in they if len(they) >= 2 else ():
                        evidence[slug].actions += 1
                        _present(evidence[slug], index, at)
        for slug, offset in pronoun_departures(text, fragments, actors, genders):
            if slug in evidence:
                evidence[slug].departure_paragraph = index
                evidence[slug].events.append((offset, CLOSES))
        topic = turns_to(text, paragraph.start, spans[0][0] if spans else paragraph.end)
        first = next((m for m in mentions_by_paragraph.get(index, []) if m.start == topic), None)
        if first is not None and first.character in evidence and not inset:
            # "As for Passepartout, he, too, had escaped sea-sickness": the narration turns to their thread, so
            # the others are there again only at their own next evidence (Passepartout only at his own)
            alone.append((paragraph.start, frozenset([first.character])))
        for offset, stays, state in solitudes(text, fragments, actors, genders, names or {}):
            if state:  # "He was alone": what whoever came or acted just before finds on coming in
                since = paragraphs[max(index - 1, scene_paragraphs[0])].start
                stays |= {slug for slug, record in evidence.items()
                          if any(kind == OPENS and since <= at < offset for at, kind in record.events)}
            alone.append((offset, stays))
            for slug in stays & evidence.keys():
                _present(evidence[slug], index, offset)
    if scene_paragraphs:
        scene_end = paragraphs[scene_paragraphs[-1]].end
        index_of = {paragraphs[i].start: i for i in scene_paragraphs}
        for record in evidence.values():
            _confirm_address(record, index_of=index_of)
        carry_back(evidence, companies, arrived, index_of)
        follow_departures(evidence)
        for offset, stays in alone:  # "Fogg was alone": the others are gone from there
            for slug, record in evidence.items():
                if slug not in stays:
                    record.events.append((offset, CLOSES))
        for offset in checkpoints:  # a change of time or place: who is there must show again
            for record in evidence.values():
                record.events.append((offset, CLOSES))
        for slug, record in evidence.items():
            death = (deaths or {}).get(slug)
            record.spans = presence_spans(record.events, scene_start, scene_end, death)
    return evidence


def _confirm_address(record: RosterEvidence, index_of: Mapping[int, int]) -> None:
    """Being addressed makes a character present only if they also speak, act or arrive in the scene.

    A speaker may call on someone absent ("Go on, then, Captain Dask," to nobody at all).
    """
    if not record.addressed_at:
        return
    if not record.events:
        record.address_only = True
        return
    for offset in record.addressed_at:
        _present(record, index_of[offset], offset)


def _asked(text: str, sentence: tuple[int, int], spans: Sequence[tuple[int, int]]) -> bool:
    """Is the narrated sentence a question? What a question of the narration tells ("Should he tell his master?
    Would it not be better to wait until Mr. Fogg reached London?") is a thought or a doubt, not an event of
    the scene, so it seats nobody. A question mark inside a quote is the speaker's, not the narration's."""
    stop = text[sentence[0]:sentence[1]].rstrip(" \t\r\n\"'”’)")
    return stop.endswith("?") and not in_spans(sentence[0] + len(stop) - 1, spans)


def _arrives(text: str, sentence: tuple[int, int], mention: Mention) -> bool:
    """Does the sentence naming the character narrate their arrival?"""
    start, end = sentence
    if _POSSESSED.match(text, mention.end) and not BODY_PART.match(text, mention.end):
        return False  # "The Count's warning came into my mind": what came is not the character
    return bool(_ARRIVAL.search(text[mention.end:end]) or _DOOR_OPENS.search(text[start:mention.start]))


def _present(record: RosterEvidence, paragraph: int, offset: int) -> None:
    record.present_paragraphs.append(paragraph)
    record.events.append((offset, OPENS))
    if record.first_offset is None:
        record.first_offset = offset


def presence_bounds(record: RosterEvidence) -> tuple[int | None, int | None]:
    """The offsets from the first presence to the last (None, None when never present)."""
    if not record.spans:
        return None, None
    return record.spans[0][0], record.spans[-1][1]


def presence_range(record: RosterEvidence, scene_paragraphs: Sequence[int]) -> tuple[int, int] | None:
    """Paragraph range of presence: the first paragraph of presence until a departure or the end."""
    if not record.present_paragraphs:
        return None
    first = min(record.present_paragraphs)
    if record.arrival_paragraph is not None and record.arrival_paragraph <= first:
        first = record.arrival_paragraph
    last = scene_paragraphs[-1]
    if record.departure_paragraph is not None and record.departure_paragraph >= max(record.present_paragraphs):
        last = record.departure_paragraph
    return first, last
