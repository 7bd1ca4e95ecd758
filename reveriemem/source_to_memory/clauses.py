"""Clause-level cues shared by dialogue attribution and rosters: is a named
character the subject of a narrated action here?"""

from __future__ import annotations

import re

from reveriemem.core.text import NOT_AFTER_TITLE
from reveriemem.source_to_memory.mentions import Mention
from reveriemem.source_to_memory.movement import GONE

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
_VERB_AFTER = re.compile(rf"^(?:,\s+[a-z][^,.;:!?\"“”]{{0,40}},)?(?:\s+(?:\w+ly|also|still|just|now|then|at\s+once|again|only|"
                         rf"himself|herself))*\s+(?:({_IRREGULAR})\b|[a-z]+ed\b)")
# Seeming, compared: a judgement of the narrator's, no narrated act ("Silver himself appeared less terrible in
# contrast with this creature of the woods").
_COMPARED = re.compile(r"\s+(?:appeared|seemed)\s+(?:(?:far|much|even|yet|still)\s+)?(?:less|more)\b")
# A modal or a condition before it in the clause makes a described face or hand unreal: "lest some day it
# should meet Mina's eyes" puts nobody there.
_UNREAL = re.compile(r"\b(?:should|would|could|might|may|lest|if|unless|whether|never)\b[^.;:!?]*$")
BODY_PART = re.compile(
    r"^(?:'s|’s|')\s+(?:\w+\s+)?(?:face|eyes|eye|hand|hands|voice|lips|mouth|brow|head|gaze|glance|arm|arms|"
    r"shoulder|shoulders|fingers|cheeks|cheek|expression|features|smile|laugh|step|steps|footsteps)\b"
)
# "As X directed", "as he had told me": a clause of accordance with an earlier word or wish, no act in the scene.
_AS_BEFORE = re.compile(r"\b(?:as|As|like)\s+(?:the\s+)?$")
_INSTRUCTED = re.compile(
    r"^\s+(?:\w+ly\s+)?(?:directed|told|ordered|advised|bade|bid|wished|desired|instructed|arranged|suggested|"
    r"promised|requested|commanded|recommended|prescribed|predicted|foretold|expected|intended|planned|"
    r"proposed|warned|wrote|described|explained|taught|showed|said)\b")
# Word sent from afar: a letter to the one telling it, a telegram, a message ("Quincey wrote me a line too",
# "Holmes telegraphed to Cleveland"): the sender is not where it arrives.
_AT_A_DISTANCE = re.compile(
    r"^(?:\s+(?:\w+ly|also|too|again|then|now|once))*\s+(?:(?:wrote|writes|has\s+written|had\s+written)\s+"
    r"(?:to\s+)?(?:me|us)\b|(?:telegraphed|telegraphs|wired|cabled|sent\s+(?:word|a\s+(?:line|note|message|"
    r"telegram|wire|letter)))\b)")
# "was at the door", "were with us" (in the narrator's company, "Lord Godalming, Dr. Seward, and Mr. Morris were
# with us also"): a state of being there. "with him" is not: "Quincey Morris is with him" is told from afar.
# A state of the body the others see is one too ("Aouda was exhausted", "Passepartout was speechless"); with
# an adverb before it ("was deathly pale") it is as often a look remembered or told of, and counts for nothing.
_PRESENT_AFTER_WAS = re.compile(
    r"^\s+(?:at|in|on|by|with\s+(?:me|us)|beside|behind|before|near|inside|outside|upon|standing|sitting|seated|waiting|there|here|"
    r"already|still|alone|busy|bent|leaning|\w+ing|silent|pale|exhausted|asleep|motionless|speechless|breathless|wounded|"
    r"faint)\b"
)


# A fronted time or place adverbial between the clause start and the subject ("and at dusk Mara found",
# "At the door Tom dropped", "That evening Fix went", "After leaving the station, Mr. Fogg gave"). Without a
# comma a gerund opening it takes the name as its object ("after giving Passepartout instructions"): no subject.
_FRONTED = re.compile(
    r"\b(?:(?:[Aa]t|[Ii]n|[Oo]n|[Aa]fter|[Bb]efore|[Dd]uring|[Tt]owards?|[Bb]y|[Ww]ithin|[Uu]ntil|[Tt]ill)"
    r"(?:\s+[\w'’-]+){1,4}|(?:[Tt]hat|[Tt]his|[Nn]ext|[Ee]arly|[Ll]ate|[Oo]ne|[Tt]he\s+next)\s+"
    r"(?:morning|evening|night|day|afternoon|week))(,)?\s+(?:the\s+)?$"
)

_GERUND_OPENS = re.compile(r"(?i)(?:at|in|on|after|before|during|towards?|by|within|until|till)\s+\w+ing\b")


# A time clause opening a sentence whose main clause is pluperfect: what it tells is earlier, not done here
_AFTER_OPENS = re.compile(r"(?:^|[.!?:;]\s+|\n)(?:(?:Shortly|Soon|Just|Long|Directly|Immediately|Some\s+time)\s+)?"
                          r"(?:[Aa]fter|[Bb]efore|[Ss]ince)\s+$")
_PLUPERFECT_MAIN = re.compile(r"[^,.;:!?]{1,80},\s+(?:[^,.;:!?]{1,60}?\s)?had\s+(?:\w+ly\s+)?(?:been|[a-z]+ed|gone|come|"
                              r"taken|brought|found|made|seen|done|known|left|put|set|got|given)\b")
# A "when" clause inside a pluperfect one tells a time before the scene's ("the flapping, which had begun after
# that sleep-walking on the cliff at Whitby when Mina saved me").
_WHEN_IN_THE_PAST = re.compile(r"\bhad\s+(?:\w+ly\s+)?(?:been|begun|come|gone|seen|done|known|[a-z]+ed)\b[^,;:.!?\"“”]*\bwhen\s+(?:the\s+)?$")


def _after_fronted_adverbial(before: str) -> bool:
    fronted = _FRONTED.search(before)
    if fronted is None or _CLAUSE_START.search(before[: fronted.start()]) is None:
        return False
    return bool(fronted.group(1)) or _GERUND_OPENS.match(fronted.group(0)) is None


_THEY_OPENS = re.compile(r"(?:^|(?<=[.!?;])\s+)They(?=\s)")
_STOP_BEFORE = re.compile(NOT_AFTER_TITLE + r"[.!?;]\s")


_GONE = re.compile(rf"\s+(?:{GONE})")
# "while Cy was gone to sea": a time told by an absence, not an absence now
_WHILE = re.compile(r"\b(?:while|whilst|when|since|till|until|before|after|as|if|though)\s+$", re.IGNORECASE)


# A sentence opened by a connective before the name ("Then Bob said goodnight and went up to bed").
_CONNECTIVE_OPENS = re.compile(r"(?:^|[.!?;:]\s+)(?:And|But|Then|So|Yet|Now)\s+$")


def after_connective(text: str, mention: Mention, fragment_start: int) -> bool:
    """Does the mention open its sentence right after a capitalised connective ("Then Bob ...")?"""
    return _CONNECTIVE_OPENS.search(text[max(fragment_start, mention.start - 20):mention.start]) is not None


def is_gone(text: str, mention: Mention, fragment_start: int) -> bool:
    """Is the character, as a main clause's subject, said to be gone ("Silver was gone", "In the morning Cy was
    already gone")?"""
    before = text[max(fragment_start, mention.start - 60) : mention.start]
    at_clause_start = (mention.start == fragment_start or _CLAUSE_START.search(before) is not None
                       or _after_fronted_adverbial(before))
    return at_clause_start and not _WHILE.search(before) and _GONE.match(text, mention.end) is not None


def they_act(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """(start of the sentence before, offset of "They") for each sentence of text[start:end] that an acting
    "They" opens ("we saw Lord Godalming and Quincey Morris. They came quickly in"): the ones that sentence
    names are who acts."""
    out = []
    for they in _THEY_OPENS.finditer(text, start, end):
        at = they.end() - len("They")
        if at == start or not _VERB_AFTER.match(text[at + len("They"):min(end, at + 64)]):
            continue
        before = max([start] + [stop.end() for stop in _STOP_BEFORE.finditer(text, start, at - 1)])
        out.append((before, at))
    return out


_NOT_COMING = re.compile(r"\s+(?:not|never)\s+(?:come|appear|arrive|return|enter|reach|turn\s+up|show\s+(?:up|himself|"
                         r"herself))\b")


def is_action_subject(text: str, mention: Mention, fragment_start: int) -> bool:
    """True when the mention opens a clause (perhaps after a fronted adverbial) and is followed by a narrated verb."""
    before = text[max(fragment_start, mention.start - 60) : mention.start]
    at_clause_start = (mention.start == fragment_start or _CLAUSE_START.search(before) is not None
                       or _after_fronted_adverbial(before))
    after = text[mention.end : mention.end + 60]
    if BODY_PART.match(after):
        return _UNREAL.search(before) is None
    if not at_clause_start:
        return False
    if _WHEN_IN_THE_PAST.search(text, max(fragment_start, mention.start - 120), mention.start):
        return False  # "which had begun after that sleep-walking on the cliff when Mina saved me": told, not done here
    if _AFTER_OPENS.search(before) and _PLUPERFECT_MAIN.match(text, mention.end):
        return False  # "Shortly after Fix left the opium den, two waiters had lifted ...": an earlier time, told
    # "Holmes and Watson entered", "Ann, Bob and Cy boarded": skip the coordinated names
    coordinated = re.match(r"^(?:,\s+(?:[A-Z][\w.]*\s+){0,2}[A-Z][\w.]*){0,3},?\s+and\s+(?:[A-Z][\w.]*\s+){1,3}", after) \
        or _WITH_COMPANY.match(after)
    if coordinated:
        after = after[coordinated.end() - 1 :]
    verb = _VERB_AFTER.match(after)
    if not verb or _COMPARED.match(after, verb.end() - len(verb.group(0).split()[-1]) - 1):
        return False
    if _AT_A_DISTANCE.match(after):
        return False  # "Quincey wrote me a line too": word from afar, not an act here
    if _AS_BEFORE.search(before) and _INSTRUCTED.match(after):
        return False  # "placed as Dr. Van Helsing directed": an earlier word followed, not an act here
    if verb.group(1) in ("did", "does") and _NOT_COMING.match(after[verb.end():]):
        return False  # "the Count did not come in": no arrival (but "Mara did not go with them" stays there)
    if verb.group(1) in ("was", "were", "is", "are"):
        rest = after[verb.end() :]
        return not _NOT_PRESENT_AFTER_WAS.match(rest) and _PRESENT_AFTER_WAS.match(rest) is not None
    return True


# Inner life: a verb of thinking, feeling or intending whose subject is the character ("Fix thought",
# "Passepartout, however, wondered", "he was planning", "she said to herself"). Perception by the
# others present needs the thought to be voiced, so the narration of it is private to the thinker.
COGNITION = (
    r"(?:thought|reflected|wondered|mused|pondered|meditated|supposed|believed|suspected|imagined|fancied|"
    r"reckoned|calculated|resolved|determined|decided|concluded|hoped|feared|doubted|knew|longed|"
    r"felt\s+(?:that|sure|certain|convinced|as\s+if|no\s+doubt)|made\s+up\s+(?:his|her)\s+mind|"
    r"felt\s+(?:a|an|some|no|the\s+same)\s+(?:[\w-]+\s+){0,3}(?:longing|desire|impulse|temptation|wish|urge|dread|"
    r"pity|remorse|shame|regret|anxiety|uneasiness|relief|misgiving|satisfaction)|"
    r"(?:said|muttered|murmured|asked|repeated|whispered)\s+to\s+(?:himself|herself)|asked\s+(?:himself|herself)|"
    r"was\s+(?:\w+ly\s+|much\s+|quite\s+|sorely\s+)?(?:puzzled|perplexed|bewildered|mystified|at\s+a\s+loss)|"
    r"(?:was|had\s+been)\s+(?:thinking|planning|wondering|reflecting|calculating|meditating|musing|pondering|"
    r"convinced|persuaded|certain|sure|resolved|determined)|"
    r"had\s+(?:no\s+doubt|hoped|feared|thought|resolved|decided|determined|made\s+up|suspected|believed)|"
    r"did\s+not\s+(?:quite\s+)?(?:doubt|know|suspect|believe|notice|observe|understand|guess|have\s+the\s+same\s+thoughts|"
    r"look\s+(?:at|upon)\s+[^.;:!?]{0,40}?\s+in\s+the\s+same\s+light)|"
    r"could\s+not\s+(?:help\s+thinking|understand|believe)|"
    r"(?:began|came)\s+(?:(?:very|quite|so|rather|more|most|\w+ly)\s+)*to\s+(?:think|wonder|suspect|believe|hope|fear|reflect|understand|conjecture|"
    r"worry|fret|doubt|despair|regard|consider|look\s+upon|feel|realise|realize)|"
    r"was\s+(?:now\s+|quite\s+|wholly\s+|completely\s+)?(?:plunged|lost|absorbed|buried|sunk|deep)\s+in(?:to)?\s+"
    r"(?:\w+\s+)?(?:reverie|thought|thoughts|meditation|reflection|reflections|musing|musings|calculations?)|"
    r"(?:never\s+)?(?:could|would|might)\s+(?:not\s+|never\s+)?have\s+(?:imagined|guessed|suspected|known|dreamed|"
    r"dreamt|foreseen|believed|thought|conceived)|"
    r"(?:cudgell?ed|racked|puzzled|beat|beaten)\s+(?:his|her)\s+brains?|"
    r"conjectured|speculated|guessed|remembered(?!\s+to\b)|recollected|recalled\s+(?=that|how|what|having)|"
    r"(?:could|would)\s+never\s+forget|"
    r"was\s+(?:\w+ly\s+|much\s+|sorely\s+|greatly\s+|strongly\s+)?tempted|would\s+(?:much\s+)?have\s+liked)"
)
_THINKS_AFTER = re.compile(
    rf"^(?:,[^,.;:!?\"]{{1,30}},)?(?:\s+(?:\w+ly|also|still|now|then|too|again|even|at\s+once|at\s+last|no\s+longer))*"
    rf"\s+{COGNITION}\b"
)
# The thinker's mind as subject: "Fix's hopes", "the detective's thoughts".
_MIND_AFTER = re.compile(
    r"^(?:'s|’s)\s+(?:\w+\s+)?(?:thoughts|hopes|hope|fears|mind|plans|plan|suspicions|doubts|reflections|"
    r"conscience|heart|wishes|calculations|resolution|idea|ideas)\b"
)
_PRONOUN_THINKS = re.compile(
    rf"^(?:(?:And|But|So|Yet|Now|Then)\s+(?:he|she)|He|She)\b(?={_THINKS_AFTER.pattern[1:]})")


# Someone who is not a focus character, acting at a clause start: "the captain turned", "Captain Smollett
# said", "Gray fired". Only nouns of persons count after "the" ("the door opened" is nobody).
PERSON_NOUNS = (
    "captain|squire|man|woman|girl|boy|lad|stranger|officer|sailor|seaman|coxswain|landlord|landlady|"
    "cabman|inspector|constable|servant|gentleman|lady|fellow|prisoner|judge|consul|clerk|conductor|"
    "engineer|guide|driver|purser|pilot|mate|boatswain|waiter|porter|widow|colonel|sergeant|priest|"
    "minister|schoolmaster|teacher|visitor|mother|father|aunt|uncle|farmer|hunter|elder|youth|child"
)
_PERSON_NOUN = rf"(?:{PERSON_NOUNS})"
# "Mr. Fogg and his companions resumed their places", "Passepartout and the guide stopped": the name and those
# who go with him, told by a person noun, one subject.
_WITH_COMPANY = re.compile(r"^\s+and\s+(?:(?:his|her|their)\s+(?:[a-z]+\s+)?(?:companions?|friends?|party|wife|husband|"
                           r"servant|master|mistress|family|guide|men|comrades?|fellow-travellers|sons?|daughters?)|"
                           rf"the\s+{_PERSON_NOUN})\s+")
_TITLED = r"(?:Mr|Mrs|Miss|Dr|Captain|Professor|Lord|Lady|Sir|Madam|Aunt|Uncle|Colonel|Inspector|Sergeant|Squire)"
_OTHER_PERSON_ACTS = re.compile(
    rf"(?:^|(?<=[.!?;:])\s+|\b(?:and|but|then|while|as|when)\s+|,\s+)(?:the\s+(?:old\s+|young\s+)?{_PERSON_NOUN}|"
    rf"The\s+(?:old\s+|young\s+)?{_PERSON_NOUN}|{_TITLED}\.?\s+[A-Z][a-z]+)\b(?=(?:,\s+who\s+[^,]+,)?"
    rf"(?:\s+(?:\w+ly|also|still|just|now|then|again|only))*\s+(?:{_IRREGULAR}|said|[a-z]+ed)\b)"
)


# A person told of by a common noun after a determiner ("the man who came to the door", "an old sailor"; not
# "not a man stirred"), and the noun's gender where it tells one.
_PERSON_TOLD = re.compile(rf"(?<![Nn]ot\s)\b(?:[Tt]he|[Aa]n?|[Tt]his|[Tt]hat|[Aa]nother)\s+(?:(?:old|young|little|poor)\s+)?"
                          rf"({PERSON_NOUNS})\b(?!['’]?s\b)")
_FEMALE_NOUNS = frozenset(["woman", "girl", "lady", "landlady", "widow", "mother", "aunt"])
_EITHER_NOUNS = frozenset(["stranger", "servant", "prisoner", "visitor", "youth", "child", "elder", "teacher", "guide",
                           "clerk"])


def persons_told(text: str, start: int, end: int) -> list[tuple[int, str]]:
    """(offset of the noun, "male" / "female" / "" unknown) for each person told of by a common noun in
    text[start:end]."""
    out = []
    for match in _PERSON_TOLD.finditer(text, start, end):
        noun = match.group(1).lower()
        out.append((match.start(1), "female" if noun in _FEMALE_NOUNS else "" if noun in _EITHER_NOUNS else "male"))
    return out


# A paragraph turning the narration to one character's thread: "As for Fix,", "As to Passepartout,", "What was
# detective Fix, so unluckily drawn on from country to country, doing all this while?". ("Meanwhile Mr. Fogg"
# was read the same way and changed nothing.)
_TURNS_TO = re.compile(r"\s*(?:As\s+(?:for|to|regards)\s+|What\s+(?:was|were|had)\s+(?:the\s+)?(?:[a-z]+\s+)?(?=[A-Z]\w*"
                       r"[^.?!]{0,80}\s+(?:been\s+)?doing\b))")


def turns_to(text: str, start: int, end: int) -> int | None:
    """Where the name of the character a paragraph turns the narration to begins ("As for |Fix, he said to
    himself"), when text[start:end] (the paragraph's narration before any quote) opens so; else None."""
    found = _TURNS_TO.match(text, start, end)
    return found.end() if found else None


def other_subjects(text: str, start: int, end: int) -> list[int]:
    """Offsets in text[start:end] where a person who is not named as a focus character acts at a clause start."""
    return [m.end() for m in _OTHER_PERSON_ACTS.finditer(text, start, end)]


def thinking_subject(text: str, mention: Mention, fragment_start: int) -> bool:
    """Is the character the subject of a verb of thinking, feeling or intending at a clause start?"""
    before = text[max(fragment_start, mention.start - 60) : mention.start]
    after = text[mention.end : mention.end + 80]
    if _MIND_AFTER.match(after):
        return mention.start == fragment_start or _CLAUSE_START.search(before) is not None
    if not (mention.start == fragment_start or _CLAUSE_START.search(before) is not None):
        return False
    return _THINKS_AFTER.match(after) is not None


# A thought told parenthetically: "Fix, he thought, could only be an agent of the Reform Club".
_PARENTHETICAL_THOUGHT = re.compile(
    r"^[^,.;:!?\"“”]{1,60},\s+(?:he|she)\s+(?:thought|reflected|fancied|supposed|reckoned|imagined|"
    r"felt\s+sure|was\s+sure|was\s+certain)\s*,")


def pronoun_thinks(sentence: str) -> bool:
    """Does the sentence tell a thought of "he"/"she": opened with "He"/"She" as the subject of a verb of
    thinking ("He wondered whether..."), or with the thought as a parenthesis ("Fix, he thought, could only
    be...")?"""
    stripped = sentence.lstrip()
    return _PRONOUN_THINKS.match(stripped) is not None or _PARENTHETICAL_THOUGHT.match(stripped) is not None


_PRONOUN_SUBJECT = re.compile(r"(?:^|[.!?;:]\s+|,\s+|\b(?:and|but|then|so)\s+)(?P<pronoun>[Hh]e|[Ss]he|[Tt]hey)\b")


def acting_pronouns(text: str, start: int, end: int) -> list[tuple[int, str]]:
    """(offset, "male" / "female") of each "he" / "she" opening a clause of text[start:end] as the subject of a
    narrated verb ("She herself agreed as to its wisdom")."""
    out = []
    for match in _PRONOUN_SUBJECT.finditer(text[start:end]):
        pronoun = match.group("pronoun").lower()
        verb = _VERB_AFTER.match(text[start + match.end(): start + match.end() + 60])
        if pronoun != "they" and verb and verb.group(1) not in ("was", "were", "is", "are"):
            out.append((start + match.start("pronoun"), "male" if pronoun == "he" else "female"))
    return out


def pronoun_acts(sentence: str) -> bool:
    """Does a "he"/"she"/"they" at a clause start do something other than think ("He invited his companion in")?"""
    for match in _PRONOUN_SUBJECT.finditer(sentence):
        after = sentence[match.end() : match.end() + 80]
        if _THINKS_AFTER.match(after):
            continue
        verb = _VERB_AFTER.match(after)
        if verb and verb.group(1) not in ("was", "were", "is", "are"):
            return True
    return False
