"""The Semantic layer, step three: SPOCV facts and their visibility.

`relation_facts` deduplicates the extracted relations against the canonical
entity table (one fact per subject, predicate and object); the offline path,
`evidence_units`, turns every sentence of a scene into a visibility-tagged
evidence unit: its speaker or acting characters lived it, those present when
it is said or narrated observed it, except narrated inner life (one
character's thought, and the narration that carries it on while nobody acts
or speaks), which is that character's alone. `assign_visibility` then grants each fact
to characters through `reveriemem.source_to_memory.visibility`, from the
rosters' presence intervals, reported accounts and the membership graph.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import polars as pl

from reveriemem.core.registry import Book
from reveriemem.core.text import Paragraph, sentence_around, sentence_runs, split_paragraphs
from reveriemem.source_to_memory.clauses import (
    COGNITION,
    is_action_subject,
    pronoun_acts,
    pronoun_thinks,
    thinking_subject,
)
from reveriemem.source_to_memory.dialogue import in_spans, quote_spans
from reveriemem.source_to_memory.entities import EntityTable, normal_key
from reveriemem.source_to_memory.mentions import AliasMatcher, is_relational
from reveriemem.source_to_memory.semantic import SceneGraph
from reveriemem.source_to_memory.visibility import (
    Account,
    FactEvidence,
    Grant,
    Membership,
    MembershipGraph,
    Presence,
    PresenceIndex,
    Statement,
    assign,
    strongest,
    visible_from,
)

EVIDENCE_METHOD = "heuristic:evidence-units-v26"  # v26: quotations left out wherever they stand, a part perceived is no deed; v25: a narrator's reflection is theirs alone, a thought of not knowing is withheld from its subject; v23: remembering, being tempted and wishing are thoughts; v24: "and Co. will" one sentence
# A narrator's private reflection, or narration reaching back years: nobody present perceives it.
_REFLECTION = re.compile(
    r"\bI\s+(?:think|know|wonder|remember(?:ed)?|pray(?:ed)?|believe|suppose|feel|felt|fear|hope|doubt)\b"
    rf"|\bI\s+(?:(?:\w+ly|also|still|now|then|even)\s+)*{COGNITION}\b|\bin\s+my\s+own\s+mind\b"
    # what the narrator would or could have done ("I would not have shown myself for all the world"): no event
    r"|\bI\s+(?:would|could|should|might)\s+(?:not\s+|never\s+)?have\s+[a-z]+(?:ed|en|wn|ne|pt|lt|ght|ung)\b"
)
# Someone perceived, not acting: "Silver's voice", "Bob's footsteps" (but "Bob's hand closed upon my arm" is his deed)
_PERCEIVED = re.compile(r"['’]s\s+(?:voice|voices|footsteps?|steps?|tread|shadow|cough|laugh|laughter|whistle|call|"
                        r"cry|shout|song|singing|figure|outline|name)\b")
_QUOTED_PART = re.compile(r"“[^”]*(?:”|$)|\"[^\"]*(?:\"|$)")
# A thought of not knowing ("He did not know, to be sure, that I had overheard his council", "Fix never suspected
# that ..."): what it tells is exactly what its subject lacks, so it is withheld from them.
_UNAWARE = re.compile(
    # (not knowing what to do is no lack of what is told: "He did not know what to do with what he had heard")
    r"\b(?:did|does)\s+not\s+(?:(?:yet|even|then|quite)\s+)?(?:know(?!\s+(?:what|how|whether|where|which|who)"
    r"(?:\s+\w+)?\s+to\b)|suspect|notice|observe|guess|realise|realize|dream|imagine)\b|\b(?:never|little)\s+(?:knew|suspected|guessed|dreamed|dreamt|imagined|noticed)\b|"
    r"\b(?:was|were)\s+(?:quite\s+|wholly\s+)?(?:unaware|ignorant)\b|\bhad\s+no\s+(?:idea|notion|suspicion)\b|"
    r"\b(?:could|would|might)\s+(?:not\s+|never\s+)?have\s+(?:imagined|guessed|suspected|known|dreamed|dreamt|"
    r"foreseen)\b"
)
# What the narrator says aloud ("I said I was sure of this", "I told him I feared the worst") is heard by those
# present: the reflection must be the very words said, right after the verb of saying and whom it is said to.
# Telling oneself, crying, or saying little and then thinking ("I answered him; but in my own mind I knew") is not.
_SAID_ALOUD = re.compile(r"\bI\s+(?:\w+ly\s+)?(?:said|answered|replied|explained|(?:told|assured|warned)\s+"
                         r"(?!myself\b|himself\b|herself\b)(?:him|her|them|us|[A-Z][\w.]*(?:\s+[A-Z][\w.]*)?))"
                         r"(?:\s+to\s+(?:him|her|them|us|[A-Z][\w.]*(?:\s+[A-Z][\w.]*)?))?,?\s+(?:that\s+)?$")
_LONG_AGO = re.compile(r"\b(?:\w+\s+years\s+(?:ago|before|earlier)|long\s+ago|in\s+(?:his|her|their)\s+youth)\b",
                       re.IGNORECASE)

# Narrator exposition: a general-present statement about a place, a people or a custom ("Hong Kong is an
# island", "The Pacific Railroad is joined by several branches") in a narrated paragraph where no focus
# character is named, speaks or is the narrator. Nobody in the story perceives the narrator's lecture, so
# it is granted to nobody (when rules cannot decide, withhold). A personal pronoun ("He must have
# travelled") or a past or conditional verb keeps it the story's narration.
_GENERAL_PRESENT = re.compile(
    r"\b(?:is|are|has|have|extends|consists|lies|runs|forms|contains|stands|belongs|remains|seems|appears|"
    r"exists|passes|crosses|reaches|leads|rises|flows|numbers|possesses|becomes)\b"
)
_STORY_TIME = re.compile(
    r"\b(?:was|were|had|did|would|could|should|might|must|he|she|him|his|her|hers|himself|herself|they|them|"
    r"their|themselves|I|me|my|we|us|our|arose|rose|wound|found|came|went|saw|took)\b|"
    r"(?<!\bis\s)(?<!\bare\s)(?<!\bbe\s)(?<!\bbeen\s)\b[a-z]{2,}ed\b", re.IGNORECASE
)


def is_exposition(sentence: str) -> bool:
    """A general-present statement of the narrator's (to be read in a paragraph with no focus character)."""
    return bool(_GENERAL_PRESENT.search(sentence)) and _STORY_TIME.search(sentence) is None


@dataclass
class Fact:
    subject: str
    predicate: str
    object: str
    cause: str
    evidence: str
    subject_entity: str | None
    object_entity: str | None
    evidence_start: int
    evidence_end: int
    scene_id: int
    method: str
    evidence_facts: FactEvidence
    shared_orgs: set[str] = field(default_factory=set)
    error: str | None = None
    grants: list[Grant] = field(default_factory=list)

    @property
    def text(self) -> str:
        if not self.predicate:
            return self.evidence
        core = " ".join(p for p in (self.subject, self.predicate, self.object) if p)
        return f"{core} (because {self.cause})" if self.cause else core


def presences_from_rosters(rosters: pl.DataFrame) -> list[Presence]:
    """Presence intervals of the roster rows: each of a row's `presence_spans`, else its start..end."""
    present = rosters.filter(pl.col("status").str.starts_with("present") & pl.col("present_start").is_not_null())
    out = []
    for r in present.iter_rows(named=True):
        spans = r.get("presence_spans") or [[r["present_start"], r["present_end"]]]
        out += [Presence(r["character"], int(r["scene_id"]), int(a), int(b)) for a, b in spans]
    return out


class SpanFacts:
    """Spoken/private judgements of a source offset, from quotation marks and narrator spans."""

    def __init__(self, book: Book):
        self.text = book.text
        self._paragraphs = split_paragraphs(book.text, book.body_start, book.body_end)
        self._starts = [p.start for p in self._paragraphs]
        self._spans: dict[int, list[tuple[int, int]]] = {}
        self._narrated: list[tuple[int, int]] = []
        self._narrators: list[tuple[int, int, str]] = []
        for character in book.characters:
            self._narrated += [(int(a), int(b)) for a, b in character.narrator_spans]
            self._narrators += [(int(a), int(b), character.slug) for a, b in character.narrator_spans]

    def _paragraph(self, offset: int) -> Paragraph | None:
        i = bisect.bisect_right(self._starts, offset) - 1
        if i < 0:
            return None
        paragraph = self._paragraphs[i]
        return paragraph if paragraph.start <= offset < paragraph.end else None

    def spoken(self, offset: int) -> bool:
        paragraph = self._paragraph(offset)
        if paragraph is None:
            return False
        if paragraph.start not in self._spans:
            self._spans[paragraph.start] = quote_spans(paragraph)[0]
        return in_spans(offset, self._spans[paragraph.start])

    def narrator(self, start: int) -> str | None:
        """The first-person narrator who tells this narration (not speech): they know what they tell."""
        if self.spoken(start):
            return None
        return next((slug for a, b, slug in self._narrators if a <= start < b), None)

    def private(self, start: int, end: int) -> bool:
        """Narration nobody present perceives: a first-person narrator's reflection, or an aside reaching back years."""
        if self.spoken(start):
            return False
        return bool(_LONG_AGO.search(self.sentence(start, end))) or self.reflection(start, end)

    def reflection(self, start: int, end: int) -> bool:
        """A first-person narrator's reflection (not said aloud)."""
        if self.spoken(start) or not any(a <= start < b for a, b in self._narrated):
            return False
        return reflects(self.sentence(start, end))

    def sentence(self, start: int, end: int) -> str:
        paragraph = self._paragraph(start)
        if paragraph is None:
            return self.text[start:end]
        begin, close = sentence_around(self.text, start, end, paragraph.start, paragraph.end, stop_needs_space=True)
        return self.text[begin:close]


def reflects(sentence: str) -> bool:
    """Does the narration of a sentence (its quotations left out) tell the narrator's reflection, not said aloud?"""
    narration = _QUOTED_PART.sub(" ", sentence)
    found = _REFLECTION.search(narration)
    return found is not None and not _SAID_ALOUD.search(narration[:found.start()])


def relation_facts(book: Book, table: EntityTable, graphs: Sequence[SceneGraph]) -> list[Fact]:
    """Relations of every passage as facts, deduplicated against the canonical entity table."""
    spans = SpanFacts(book)
    merged: dict[tuple[str, str, str], Fact] = {}
    order: list[tuple[str, str, str]] = []
    for graph in graphs:
        for raw in graph.relations:
            subject, predicate, obj = (str(raw.get(k, "")).strip() for k in ("subject", "predicate", "object"))
            if not subject or not predicate:
                continue
            start, end = int(raw["evidence_start"]), int(raw["evidence_end"])
            subject_id, object_id = table.resolve(subject), table.resolve(obj) if obj else None
            key = (subject_id or normal_key(subject), normal_key(predicate), object_id or normal_key(obj))
            statement = Statement(graph.scene_id, start, end, spoken=spans.spoken(start),
                                  private=bool(raw.get("private")) or spans.private(start, end))
            participants = {c for n in raw.get("participants", []) if (c := table.character_of(str(n)))}
            participants |= table.characters_in(subject) | (table.characters_in(obj) if obj else set())
            narrator = spans.narrator(start)
            if narrator:
                participants.add(narrator)
            witnesses = {c for n in raw.get("witnesses", []) if (c := table.character_of(str(n)))}
            orgs = {o for n in raw.get("shared_with", []) if (o := table.lookup(str(n)))}
            fact = merged.get(key)
            if fact is None:
                fact = Fact(subject, predicate, obj, str(raw.get("cause") or "").strip(), str(raw.get("evidence", "")),
                            subject_id, object_id, start, end, graph.scene_id, graph.method,
                            FactEvidence([], set(), set(), set(), False))
                merged[key] = fact
                order.append(key)
            evidence = fact.evidence_facts
            evidence.statements.append(statement)
            evidence.participants |= participants
            evidence.witnesses |= witnesses
            evidence.shared_with |= orgs
            evidence.common = evidence.common or bool(raw.get("common"))
            fact.shared_orgs |= orgs
            if not fact.cause and raw.get("cause"):
                fact.cause = str(raw["cause"]).strip()
    return [merged[k] for k in order]


def evidence_units(book: Book, scenes: Sequence[tuple[int, int, int]], utterance_speakers: dict[int, str],
                   method: str = EVIDENCE_METHOD, error: str | None = None,
                   headings: Sequence[tuple[int, int]] = ()) -> list[Fact]:
    """The offline Semantic layer: each sentence of a scene as a visibility-tagged evidence unit.

    `utterance_speakers` maps a quotation's start offset to its attributed focus speaker.
    The speaker of a quoted sentence and the characters acting in a narrated one lived it.
    No unit is made of a sentence inside `headings` (chapter titles, contents: `BookReading.heading_spans`).
    """
    spans = SpanFacts(book)
    matcher = AliasMatcher(book.characters)
    speaker_starts = sorted(utterance_speakers)
    facts: list[Fact] = []
    for scene_id, start, end in scenes:
        skip = [(a, b) for a, b in headings if a < end and b > start]
        named: set[str] = set()  # named outside quotes in this scene: a relational descriptor may mean them
        thinking: str | None = None  # whose inner life the last narrated sentence of the paragraph before told
        for paragraph in split_paragraphs(book.text, start, end):
            if in_spans(paragraph.start, skip):
                continue
            quotes = quote_spans(paragraph)[0]
            # speech "to himself", or words tagged as thought ("thought Fix"): heard by nobody else, so the
            # quoted words are the speaker's alone
            between = _between(paragraph, quotes)
            tags = [(a, b) for a, b in between if _THOUGHT_TAG.search(book.text[a:b])]
            thought = bool(quotes and tags) and not any(_VOICED.search(book.text, a, b) for a, b in between)
            aside = bool(quotes) and (any(_ASIDE.search(book.text, a, b) for a, b in between) or thought)
            # whose thought: the focus character the tag names ("thought Fix"), if one
            tagged = {m.character for a, b in tags for m in matcher.find(book.text, a, b)} if thought else set()
            # no focus character named or speaking, no narrator here: exposition may reach nobody
            impersonal = (not quotes and spans.narrator(paragraph.start) is None
                          and not any(True for _ in matcher.find(book.text, paragraph.start, paragraph.end)))
            # the focus character last acting in this paragraph's narration; at its start, the one whose inner life
            # closed the paragraph before ("So reasoned the detective ..." / "He felt a sort of insurmountable
            # longing to abandon the game"): "he" opening a thought is still them
            last_actor: str | None = thinking
            inner: str | None = None  # whose inner life the previous sentence of this paragraph told
            for match in sentence_runs(book.text, paragraph.start, paragraph.end):
                sentence = match.group()
                stripped = sentence.strip()
                if len(stripped.split()) < 4:
                    continue
                s_start = match.start() + len(sentence) - len(sentence.lstrip())
                s_end = s_start + len(stripped)
                spoken = in_spans(s_start, quotes) or in_spans(s_start + 1, quotes)
                participants: set[str] = set()
                speaker = ""
                if spoken:
                    i = bisect.bisect_right(speaker_starts, s_start) - 1
                    if i >= 0 and paragraph.start <= speaker_starts[i] and utterance_speakers[speaker_starts[i]]:
                        speaker = utterance_speakers[speaker_starts[i]]
                        participants.add(speaker)
                    if not speaker and len(tagged) == 1:
                        participants |= tagged
                narrator = spans.narrator(s_start)
                if narrator:
                    participants.add(narrator)
                thinkers: set[str] = set()
                actors: list[str] = []
                doers: set[str] = set()  # acting by name, not by a part of them ("Silver added", not "Silver's voice")
                for mention in matcher.find(book.text, s_start, s_end):
                    if in_spans(mention.start, quotes):
                        continue
                    if mention.kind == "name":
                        named.add(mention.character)
                    elif is_relational(mention) and mention.character not in named:
                        continue  # "my companion" before its character is named here: nobody known
                    if _acts(book.text, mention, s_start):
                        participants.add(mention.character)
                        actors.append(mention.character)
                        if not _PERCEIVED.match(book.text, mention.end):
                            doers.add(mention.character)
                    if not spoken and thinking_subject(book.text, mention, s_start) and set(actors) <= {
                            mention.character}:  # the thought is the sentence's first clause ("Fix thought")
                        thinkers.add(mention.character)
                    if not spoken and not actors and _MOVES_THE_MIND.search(book.text, s_start, mention.start):
                        thinkers.add(mention.character)  # "This expression rather disturbed Fix": his inner state
                    if not spoken and _THOUGHT_INVERTED.match(book.text, s_start, mention.start):
                        thinkers.add(mention.character)  # "So reasoned the detective": the thought just told is his
                        actors.append(mention.character)  # and "he" in the sentences after it stands for him
                thinker = _inner_life(stripped, spoken, thinkers, actors, last_actor, inner)
                private = spans.private(s_start, s_end) or (spoken and aside)
                if narrator and not spoken and reflects(stripped):
                    # "I felt a creeping of the flesh": the narrator's; one named doing something keeps their deed
                    # ("Silver added to me, as I thought, ..."), one heard or seen only ("Silver's voice") does not
                    participants = {narrator} | doers
                if not spoken and (thinker is not None or pronoun_thinks(stripped)) and _UNAWARE.search(stripped):
                    # what they do not know is not theirs, nor (when "he" is not known) anyone's but the narrator's
                    participants, private = ({narrator} if narrator else set()), True
                elif thinker is not None:  # narrated inner life: the thinker's alone
                    participants, private = {thinker} | ({narrator} if narrator else set()), True
                if impersonal and is_exposition(stripped):
                    participants, private = set(), True
                if not spoken and stripped.endswith("?"):
                    # a question in the narration ("Who was this woman?", "Where was Fix at that moment?") is a
                    # thought, the narrator's or that of the one whose mind the narration follows: no event
                    # anyone present perceives
                    asker = thinker or inner or last_actor
                    participants = ({asker} if asker else set()) | ({narrator} if narrator else set())
                    private = True
                    if narrator is None and thinker is None:
                        # what follows while nobody acts is still their thought; when it is in fact an event
                        # ("What could be inside it? The chest was full of gold coins") the others lose it:
                        # a sentence that may be either is withheld rather than granted
                        thinker = asker
                inner = thinker
                if actors:
                    last_actor = actors[-1]
                statement = Statement(scene_id, s_start, s_end, spoken=spoken, private=private)
                facts.append(Fact(speaker, "", "", "", stripped, f"person:{speaker}" if speaker else None, None,
                                  s_start, s_end, scene_id, method, FactEvidence([statement], participants),
                                  error=error))
            thinking = inner
    return facts


# A quotation tagged as thought, not speech ('"Well," thought Fix, "my warrant is not good here"'): words
# nobody hears. The tag is the clause next to a quotation mark: the verb and its subject, either order.
_THINKING = r"(?:thought|reflected|mused|pondered|wondered|reasoned|meditated)"
_THOUGHT_TAG = re.compile(
    rf"^[\s,.;:!?—-]*(?:{_THINKING}\s+(?:he|she|I|[A-Z][\w.'’]*(?:\s+[A-Z][\w'’]*)?)\b"
    rf"|(?:he|she|I|[A-Z][\w.'’]*(?:\s+[A-Z][\w'’]*)?)\s+{_THINKING}\s*(?:[,.;:!?—]|$))")
_ASIDE = re.compile(r"\b(?:said|saying|muttered|muttering|murmured|murmuring|repeated|repeating|whispered|"
                    r"whispering|thought|thinking|cried|exclaimed|added|asked)\s+"
                    r"(?:\w+\s+){0,3}?to\s+(?:him|her|my)self\b")


def _between(paragraph: Any, quotes: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The narration around a paragraph's quotations (where "said to himself" would be)."""
    edges = [paragraph.start] + [x for span in quotes for x in span] + [paragraph.end]
    return [(edges[i], edges[i + 1]) for i in range(0, len(edges) - 1, 2) if edges[i + 1] > edges[i]]


_VOICED = re.compile(r"\b(?:said|told|asked|answered|replied|cried|exclaimed|called|shouted|whispered)\b"
                     r"(?!\s+(?:to\s+)?(?:him|her)self)")


# A verb that moves the mind, with the character as the one moved: "This expression rather disturbed Fix",
# "The reply puzzled Passepartout not a little". What the narration tells then is inside them.
_MOVES_THE_MIND = re.compile(r"\b(?:disturbed|troubled|puzzled|perplexed|bewildered|mystified|astonished|amazed|"
                             r"alarmed|worried|annoyed|vexed|irritated|disquieted|disconcerted|dismayed|"
                             r"embarrassed)\s+(?:(?:the\s+)?(?:worthy|poor|good|young|old)\s+)?$")


# A thought tag with the verb first, closing a thought just told: "So reasoned the detective", "Thus mused Fix".
_THOUGHT_INVERTED = re.compile(r"\s*(?:So|Thus)\s+(?:reasoned|thought|mused|reflected|argued|meditated|pondered|"
                               r"calculated|soliloquised|soliloquized)\s+$")


def _inner_life(sentence: str, spoken: bool, thinkers: set[str], actors: Sequence[str], last_actor: str | None,
                inner: str | None) -> str | None:
    """Whose inner life a narrated sentence tells, if one character's: its thinker, or None.

    "Fix thought...", "He wondered..." (he: the character last acting in the paragraph), and the
    narration that follows a thought in the same paragraph while nobody acts or speaks (free
    indirect thought: "The arrest must be made at Hong Kong"). A thought voiced in the same
    sentence ("thought it useless, but told him so") is heard by those present.
    """
    if spoken or _VOICED.search(sentence):
        return None
    if len(thinkers) == 1:
        return next(iter(thinkers))
    if thinkers:
        return None  # "Aouda and Fix feared": a shared thought, no one thinker
    if last_actor and pronoun_thinks(sentence):
        return last_actor
    if inner and not actors and not pronoun_acts(sentence):
        return inner
    return None


_AUXILIARY_VERB = re.compile(r"^\s+(?:had|has|have|would|could|will|might|must|did)\s+(?:not\s+|never\s+)?[a-z]{3,}")
_OPENS_CLAUSE = re.compile(r"(?:^|[,;:]\s+|\b(?:and|then|while|when|as|but)\s+)$")


def _acts(text: str, mention: Any, sentence_start: int) -> bool:
    """Is the named character the acting subject here ("Tobin said", "Harrow had unlocked")?"""
    if is_action_subject(text, mention, sentence_start):
        return True
    before = text[sentence_start:mention.start]
    return bool(_OPENS_CLAUSE.search(before) and _AUXILIARY_VERB.match(text[mention.end:mention.end + 40]))


def assign_visibility(
    facts: Sequence[Fact],
    presences: Sequence[Presence],
    accounts: Sequence[Account],
    member_statements: Sequence[Membership],
    characters: Sequence[str],
    deaths: Mapping[str, int] | None = None,
) -> None:
    """Grant every fact to characters (`visibility.assign`); nothing to a character from their death on."""
    index = PresenceIndex(presences)
    graph = MembershipGraph(member_statements)
    for fact in facts:
        fact.grants = assign(fact.evidence_facts, index, accounts, graph, characters, deaths)


def accounts_of(graphs: Sequence[SceneGraph]) -> list[Account]:
    return [Account(int(a["source_start"]), int(a["source_end"]), g.scene_id, int(a["offset"]))
            for g in graphs for a in g.accounts]


def fact_rows(book: Book, facts: Sequence[Fact], table: EntityTable | None) -> list[dict[str, Any]]:
    """Rows of the `facts` table (without vectors), in story order with stable ids."""
    rows = []
    ordered = sorted(facts, key=lambda f: (f.evidence_start, f.evidence_end))
    org_names = {e.entity_id: e.name for e in table.entities.values()} if table else {}
    for n, fact in enumerate(ordered, start=1):
        best = strongest(fact.grants)
        since = visible_from(fact.grants)
        characters = sorted(best, key=lambda c: (since[c], c))
        rows.append({
            "book": book.slug, "character": "", "fact_id": f"{book.slug}:f{n:05d}", "scene_id": fact.scene_id,
            "subject": fact.subject, "predicate": fact.predicate, "object": fact.object, "cause": fact.cause,
            "subject_entity": fact.subject_entity, "object_entity": fact.object_entity, "text": fact.text,
            "evidence": fact.evidence, "source_start": fact.evidence_start, "source_end": fact.evidence_end,
            "statements": [asdict(s) for s in sorted(fact.evidence_facts.statements, key=lambda s: s.start)],
            "visibility": characters, "routes": [best[c].route for c in characters],
            "visible_from": [since[c] for c in characters],
            "grants": [{"character": g.character, "route": g.route, "scene_id": g.scene_id, "offset": g.offset}
                       for g in fact.grants],
            "organisations": sorted(org_names.get(o, o) for o in fact.shared_orgs),
            "common": fact.evidence_facts.common, "method": fact.method, "error": fact.error,
        })
    return rows


