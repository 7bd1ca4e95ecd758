"""Narrated movement: leaving a place, going to another part of it, and being alone.

Cues the rosters read from narration (never from inside quotation marks):
- a **departure**: the subject leaves where they were ("left the car", "rushed out",
  "alighted") or goes to another part of the place ("descended to the saloon",
  "went to his cabin", "proceeded to the after-deck"). A move within the room
  ("went back to his seat", "withdrew to the window") is no departure;
- **solitude**: "Fogg was alone", "he found himself alone with her": everyone
  else present is gone from that point (until their own next evidence);
- a **narrator's move**: "I slipped out of the cabin", "I went below", "I came
  back to the stockade", "I entered the house". First-person narration is
  always where its narrator is, so when the narrator leaves or arrives, the
  company they were with stays behind (each present again only from their own
  next evidence), as when the narrator is alone;
- the **writer's moment**: "Indeed, I am writing now, with my book on my knee": a
  diary's present is the writer alone with the page, not the scene told before it.

The subject is a named character, or "he"/"she" standing for the character of
that gender who last acted by name in the same or the previous paragraph; a
pronoun with no such character, or with two candidates of its gender acting
in the same sentence, is nobody's (withhold rather than guess).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

# Said to be gone, a state ("Silver was gone.", "Dick was gone but a little while"), not gone over or for a soldier.
GONE = (r"(?:was|were)\s+(?:already\s+|quite\s+|now\s+|clean\s+)?gone\b(?!\s+(?:over|through|on|for)\b)"
        r"|had\s+(?:already\s+)?(?:disappeared|vanished|gone\s+away)\b"
        r"|(?:was|were)\s+sent\s+(?:away|off|out|down|up|back|home)\b")  # "Bob was sent down to the village"
_PART_WORDS = (
    r"cabin|state-?room|saloon|deck|after-deck|forward\s+deck|hold|bridge|room|bedroom|chamber|parlour|corridor|"
    r"study|office|hall|kitchen|cellar|attic|house|hotel|inn|club|station|platform|car|carriage|train|cab|"
    r"street|town|city|shore|quay|wharf|pier|boat|ship|steamer|garden|yard|court|door|gate|consulate|"
    r"police\s+station|prison|cell|camp|tent|village|forecastle|galley|stockade|block-?\s?house|log-?\s?house|"
    r"fort|hut|cottage|cave|beach|wood|forest|thicket|hill|island|church|school|shop|tavern|barn|field"
)
_PARTS = rf"(?:{_PART_WORDS})s?"
# A place word closing a proper name after "the" ("left the Custom House", "went to the Reform Club"); a name
# alone is a person ("left Carter at the gate"), and "the Court Circular" is no place.
_NAMED_PART = rf"the\s+(?:[A-Z][\w'’-]*\s+){{1,3}}(?i:{_PART_WORDS})s?\b"
_LEAVES = (
    r"left\s+(?!hold\s+of\b)(?:(?:the\s+)?(?:\w+\s+)?" + _PARTS + r"\b|" + _NAMED_PART + r")"
    r"|left\s+(?:us|them|him|her|me)\b|went\s+(?:up\s+|off\s+|away\s+)?to\s+bed\b|"
    r"(?:went|walked|hurried|rushed|stepped|got|jumped|climbed|ran|dashed|sprang|hastened|slipped|strode)\s+"
    r"(?:out(?!\s+of\s+(?:his|her|my|their|the|a)\s+(?:\w+\s+)?(?:chair|seat|armchair|bed|berth|bunk|hammock|couch|"
    r"sofa|reverie|sleep|stupor|trance)\b)|away|off(?!\s+(?:my|his|her|their|your|our)\b)|ashore|down\s+from)\b|alighted|departed|disembarked|went\s+(?:ashore|below|home)|"
    + GONE + r"|took\s+(?:his|her)\s+leave|disappeared|withdrew\s+from|retired\s+(?:to|for)|"
    # setting off on a way ("set off briskly through the trees", "set out for the coast"), not setting a thing out
    r"(?:set|started)\s+(?:off|out)(?=\s*[.,;!]|\s+(?:\w+ly|again|at\s+once|for|from|on|upon|in|into|through|across|along|"
    r"towards?|to|with|by|down|up|over|home)\b)|"
    # to another part of a ship or a house, named without an article ("ran on deck", "went upstairs")
    r"(?:went|walked|hurried|rushed|stepped|ran|dashed|climbed|crept|hastened|slipped|tumbled)\s+"
    r"(?:(?:up|down|back)\s+)?(?:on\s+deck|upstairs|downstairs|aloft|overboard)\b"
)
_GOES_TO = (
    r"(?:went|walked|proceeded|descended|ascended|returned|repaired|hurried|hastened|rushed|ran|climbed|"
    r"made\s+(?:his|her)\s+way|betook\s+(?:him|her)self|shut\s+(?:him|her)self\s+up)\s+"
    r"(?:(?:up|down|back|below|aloft|again|straight|at\s+once)\s+)?(?:to|into|towards?|on|upon)\s+"
    r"(?:(?:the|his|her|their|a)\s+(?:[\w-]+\s+)?" + _PARTS + r"\b|" + _NAMED_PART + r")"
)
DEPARTURE = re.compile(rf"\b(?:{_LEAVES}|{_GOES_TO})")
# Told to be somewhere else at this moment: "Cole was at the mill, two miles away", "Cole, meanwhile, was fishing
# far out on the lake", "asleep in his own house across the river". Such a subject is told of, not here.
_ELSEWHERE = re.compile(
    r"\b(?:(?:(?:a|one|two|three|four|five|six|seven|eight|nine|ten|twenty|a\s+few|some|many|several|\d+)\s+)?"
    r"(?:miles?|leagues?)\s+(?:away|off|distant)|far\s+(?:away|off|out)|across\s+the\s+(?:river|sea|water|ocean|bay|channel|border)|"
    r"meanwhile|in\s+the\s+meantime)\b", re.IGNORECASE)
_CLAUSE_STOP = re.compile(r"[.;:!?]")


def told_elsewhere(text: str, start: int, end: int) -> bool:
    """Does the clause after a name (text[start:end], up to 80 characters and its first full stop, colon or
    semicolon) place them elsewhere at this moment?"""
    limit = min(end, start + 80)
    stop = _CLAUSE_STOP.search(text, start, limit)
    return _ELSEWHERE.search(text, start, stop.start() if stop else limit) is not None

# A move within the room is no departure ("went back to his seat", "withdrew to the window").
WITHIN_ROOM = re.compile(
    r"\s+(?:to|into|towards?)\s+(?:his|her|their|the|a)\s+(?:\w+\s+)?(?:seat|place|chair|desk|table|window|"
    r"fire|fireside|hearth|corner|bench|sofa|couch|stool|work|post|book)s?\b"
)
# Going to or towards the door ("I went towards the door", "ran to the door") is a move inside the room: whoever
# goes there is still where the others are until the text says they went out.
_AT_THE_DOOR = re.compile(r"\b(?:to|towards?)\s+(?:the|his|her|their|a)\s+(?:\w+\s+)?doors?$")
_SOLITUDE = re.compile(
    r"\b(?:was|were|remained|stayed|sat|stood|waited|lived|being|found\s+(?:him|her)self|left)\s+(?:quite\s+|all\s+|now\s+)?"
    r"alone\b(?:\s+with\s+(?P<with>[A-Z][\w.]*(?:\s+[A-Z][\w.]*)?|him|her))?"
)
# A pronoun subject opens a sentence or a clause, or follows a participle's clause ("And clapping me upon
# the shoulder, he hobbled off forward and went below").
_PRONOUN_OPENS = re.compile(r"(?:^|(?<=\n)|(?<=[.!?;])\s+|\b(?:and|then)\s+|(?<=,)\s+)(?P<pronoun>He|She|he|she)\s+"
                            r"(?:\w+ly\s+)?")
# ... or stands just before the verb, inside the sentence ("..., and in a few moments he found himself alone").
_PRONOUN_BEFORE = re.compile(r"\b(he|she|He|She)\s+$")
_SENTENCE = re.compile(r"[^.!?]+[.!?]*")
_PRONOUN_GENDER = {"he": "male", "she": "female"}


# Another subject between the character and the verb makes the verb someone else's.
_OTHER_SUBJECT = re.compile(
    r"\b(?:he|she|they|I|we|you|it)\b|(?<![.!?]\s)\b[A-Z][a-z]+|"
    r"\b(?:as|while|when|whilst|that|until|till|before|after|because|whom|saw|watched)\s+"
    r"(?:the|a|an|his|her|their|one|some|two|three)\s+\w+"
)


# Names joined to the subject ("Arthur and Quincey", "Ann, Bob and Cy"); "Bob and I" is the narrator's company
# moving with the narrator, whom the narration follows, so no departure.
_COORDINATED = re.compile(r"(?:,\s+[A-Z][\w.]*(?:\s+[A-Z][\w.]*)?)*,?\s+and\s+(?!I\b)[A-Z][\w.]*(?:\s+[A-Z][\w.]*)?(?=\s)")


# A move and the coming back in one sentence is an errand, not a departure ("I went downstairs and carried
# the dog upstairs in my arms", "ran out and came back with a lamp").
_ERRAND = re.compile(r"\b(?:came|come|got|ran|hurried|walked|went|stepped)\s+(?:straight\s+|quickly\s+)?back\b|"
                     r"\breturned\b|\bcarried\s+(?:\w+\s+){1,3}?(?:back|up|upstairs?|in)\b")


# Going out with one who leaves ("Phileas Fogg left the car, and the American followed him upon the platform";
# "Mr. Fogg rose, and, followed by Fix, went out upon the platform. Passepartout accompanied him"), or staying
# where they left ("Aouda remained in the car").
_FOLLOWS = re.compile(r"\s+(?:\w+ly\s+)?(?:followed|accompanied)\s+(?:him|her|them)\b")
_FOLLOWED_BY = re.compile(r"\b(?:followed|accompanied|attended)\s+by\s+(?:the\s+)?$")
_ESCORTED = re.compile(r",\s*(?:followed|accompanied|attended)\s+by\s+[^,.;!?]{1,40},")
_STAYS = re.compile(r"\s+(?:\w+ly\s+)?(?:remained|stayed)\b(?!\s+with\b)")


def goes_along(text: str, sentence_start: int, mention: tuple[int, int]) -> bool:
    """Does the one named at `mention` go out with someone ("X followed him", "followed by X")? Read only right
    after someone leaves: following a man across a room is no departure."""
    return _FOLLOWS.match(text, mention[1]) is not None or \
        _FOLLOWED_BY.search(text, sentence_start, mention[0]) is not None


def stays_behind(text: str, start: int) -> bool:
    """Does the subject that ends at `start` stay where it is ("Aouda remained in the car")?"""
    return _STAYS.match(text, start) is not None


def departs(text: str, start: int, end: int) -> bool:
    """Does the sentence text[start:end], just after its subject, narrate leaving where the subject was?

    The verb must come within 200 characters with no other subject in between ("Mr. Fogg pressed her
    hand, and, having confided to her his bag, went off" is his departure); names joined to the
    subject ("Arthur and Quincey went away together") share its verb.
    """
    clause = text[start:min(end, start + 200)]
    clause = _ESCORTED.sub(lambda m: " " * len(m.group(0)), clause)  # "rose, and, followed by Fix, went out"
    # going to the door is no leaving, but what is done there may be ("went to the door and left the house")
    found = next((m for m in DEPARTURE.finditer(clause) if not _AT_THE_DOOR.search(m.group(0))), None)
    if not found or WITHIN_ROOM.match(clause[found.end():]) or _ERRAND.search(text, start + found.end(), end):
        return False
    together = _COORDINATED.match(clause)  # "Arthur and Quincey went away": the verb is both subjects'
    return _OTHER_SUBJECT.search(clause, together.end() if together else 0, found.start()) is None


def pronoun_subject(pronoun: str, offset: int, actors: Sequence[tuple[int, str]],
                    genders: Mapping[str, str]) -> str | None:
    """The character a sentence-opening "he"/"she" at `offset` stands for, or None when undecidable.

    `actors` are (offset, slug) of named action subjects so far (same or previous paragraph), in order.
    The latest of the pronoun's gender wins, unless another of that gender acted in the same sentence.
    """
    gender = _PRONOUN_GENDER.get(pronoun.lower())
    candidates = [(at, slug) for at, slug in actors if at < offset and genders.get(slug) == gender]
    if not candidates:
        return None
    last_at, last = candidates[-1]
    rivals = {slug for at, slug in candidates if slug != last and at >= last_at - 200}
    return None if rivals else last


def pronoun_departures(text: str, fragments: Sequence[tuple[int, int]], actors: Sequence[tuple[int, str]],
                       genders: Mapping[str, str]) -> list[tuple[str, int]]:
    """(slug, sentence end) for each narrated "He went below..." departure in the narration fragments."""
    out = []
    for a, b in fragments:
        for match in _PRONOUN_OPENS.finditer(text, a, b):
            if not departs(text, match.end() - 1, min(b, match.end() + 120)):
                continue
            slug = pronoun_subject(match.group("pronoun"), match.start("pronoun"), actors, genders)
            if slug is not None:
                out.append((slug, _sentence_end(text, match.end(), b)))
    return out


def solitudes(text: str, fragments: Sequence[tuple[int, int]], actors: Sequence[tuple[int, str]],
              genders: Mapping[str, str], names: Mapping[str, str]) -> list[tuple[int, frozenset[str], bool]]:
    """(offset, who stays, a state?) for each narrated "X was alone (with Y)": everyone else present leaves
    there. A state ("He was alone, as he nearly always was") is what someone just come in finds: the
    rosters keep whoever came or acted just before (`rosters.scene_evidence`); an event ("found himself
    alone with her", "was left alone") keeps nobody else.

    The subject is the nearest named actor before "alone" in the sentence, or the pronoun's character;
    `names` maps a lowercased alias to its slug for the companion after "with". Undecidable: skipped.
    """
    out = []
    for a, b in fragments:
        for sentence in _SENTENCE.finditer(text, a, b):
            found = _SOLITUDE.search(text, sentence.start(), sentence.end())
            if not found:
                continue
            before = [(at, slug) for at, slug in actors if sentence.start() <= at < found.start()]
            subject = before[-1][1] if before else None
            opening = _PRONOUN_OPENS.match(text, sentence.start())
            if subject is None and opening:
                subject = pronoun_subject(opening.group("pronoun"), sentence.start(), actors, genders)
            said_of = _PRONOUN_BEFORE.search(text, sentence.start(), found.start())
            if subject is None and said_of:  # "Mr. Fogg sent to know ..., and in a few moments he found himself alone"
                pronoun = said_of.group(1)
                subject = _named_in(text[sentence.start():said_of.start()], names, genders,
                                    _PRONOUN_GENDER[pronoun.lower()], "") or pronoun_subject(
                    pronoun, said_of.start(), actors, genders)
            if subject is None:
                continue
            stays = {subject}
            companion = found.group("with")
            if companion:
                other = names.get(companion.lower())
                if other is None and companion in ("him", "her"):
                    gender = _PRONOUN_GENDER["he" if companion == "him" else "she"]
                    others = [s for _, s in actors if s != subject and genders.get(s) == gender]
                    other = others[-1] if others else _named_in(text[sentence.start():found.start()], names,
                                                                  genders, gender, subject)
                if other is None:
                    continue  # alone with someone we cannot name: decide nothing
                stays.add(other)
            out.append((sentence.start(), frozenset(stays), found.group(0).split()[0] in ("was", "were")))
    return out


def _named_in(text: str, names: Mapping[str, str], genders: Mapping[str, str], gender: str,
              besides: str) -> str | None:
    """The one character of `gender` (other than `besides`) named in `text` ("Mr. Fogg sent to know if Aouda
    would receive him, and ... he found himself alone with her": her is Aouda), or None when none or several."""
    lowered = text.lower()
    found = {slug for alias, slug in names.items() if slug != besides and genders.get(slug) == gender
             and re.search(rf"(?<![\w]){re.escape(alias)}(?![\w])", lowered)}
    return found.pop() if len(found) == 1 else None


# "I" opening a clause of narration (a first-person narrator as subject), then the verb after an adverb.
# "Joyce and I got out" is the company moving together: no move of the narrator's alone.
_I_OPENS = re.compile(r"(?:^|(?<=\n)|(?<=[.!?;:])\s+|(?<=[,;:])\s+(?:and|then|so|but)\s+|\b(?:then|so|[Ww]hen|[Aa]s\s+soon\s+as|[Aa]s)\s+)I\s+"
                      r"(?:\w+ly\s+)?(?:then\s+)?")
# The narrator's arrival somewhere ("I came back to the stockade", "I entered the house", "I reached the
# boat", "I found them all three seated round the table"); a pluperfect ("I had come in") is an earlier
# arrival and no move.
_NARRATOR_ARRIVES = re.compile(
    r"(?:(?:came|got|walked|stepped|ran|hurried|crept|climbed)\s+(?:in|into|back|aboard|ashore)\b|"
    r"(?:came|went|walked|hurried|ran|crept)\s+(?:along|down|through)\s+the\s+(?:[\w-]+\s+)?" + _PARTS + r"\b|"
    r"(?:came|got|walked|stepped|ran|hurried|crept|climbed)\s+(?:(?:up|down|over|across)\s+)?to\s+(?:the|my|our)\s+"
    r"(?:[\w-]+\s+)?" + _PARTS + r"\b|entered|arrived|returned\s+(?:home|aboard|ashore|to\s+(?:the|my|our)\s+"
    r"(?:[\w-]+\s+)?" + _PARTS + r"\b)|reached\s+(?:the|my|our)\s|"
    r"found\s+(?:them|him|her|[A-Z]\w+)\s+(?:all\s+(?:\w+\s+)?)?(?:seated|sitting|standing|waiting|gathered|assembled)|"
    # a journey to a named place ("I drove to Walworth", "I went on to Whitby by the early train")
    r"(?:drove|rode|went|walked|hurried|travelled|traveled|sailed|journeyed|took\s+(?:a|the)\s+(?:cab|train|coach|"
    r"boat))\s+(?:(?:on|back|off|down|up|over|across|straight|at\s+once)\s+)?to\s+[A-Z][a-z]{2,})"
)


# The narrator's company leaving someone where they are ("We left him working among his chemicals, and we walked
# together towards my hotel"): the narration goes with the narrator, and the one left behind stays there.
_WE_LEAVE = re.compile(r"(?:^|(?<=\n)|(?<=[.!?;:])\s+)We\s+(?:\w+ly\s+)?left\s+(?:him|her|[A-Z][a-z]+)\b"
                       r"(?!\s+(?:to\s+(?:him|her)self|alone\s+with))")


def company_leaves(text: str, fragments: Sequence[tuple[int, int]]) -> list[int]:
    """Sentence ends where the narrator's company leaves someone behind ("We left him"), in narration."""
    return [_sentence_end(text, m.end(), b) for a, b in fragments for m in _WE_LEAVE.finditer(text, a, b)]


def narrator_moves(text: str, fragments: Sequence[tuple[int, int]]) -> list[int]:
    """Sentence ends where a first-person narrator ("I") leaves a place or arrives at one, or the narrator's
    company leaves someone behind, in narration."""
    out = company_leaves(text, fragments)
    for a, b in fragments:
        for match in _I_OPENS.finditer(text, a, b):
            end = _sentence_end(text, match.end(), b)
            if departs(text, match.end() - 1, end) or _NARRATOR_ARRIVES.match(text, match.end(), end):
                out.append(end)
    return out


# The writer at the moment of writing ("Indeed, I am writing now, with my book on my knee", "As I write there is
# ... a sound"): a diary's present is where and when its writer sits with the page, not the scene told before it.
_WRITING_NOW = re.compile(r"\b(?:[Aa]s|[Ww]hile|[Ww]hilst)\s+I\s+(?:now\s+)?write\b|\bI\s+am\s+(?:now\s+)?writing\b|"
                          r"(?<![Ww]hat\s)\bI\s+(?:now\s+)?write\s+(?:this|these\s+lines|now|here)\b")
# ... not a habit ("I write up my diary every night") nor while others go on ("while Arthur talks")
_NOT_NOW = re.compile(r"\b(?:every|always|often|usually|sometimes|daily|nightly|weekly|while|whilst)\b")


def writing_now(text: str, fragments: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """(start, end) of sentences, in narration, where a first-person writer tells of writing at this moment;
    whoever the sentence names is with the writer."""
    out = []
    for a, b in fragments:
        for match in _WRITING_NOW.finditer(text, a, b):
            stop = max(text.rfind(mark, a, match.start()) for mark in ".!?")
            begin = stop + 1 if stop >= a else a
            rest = text[match.end():_sentence_end(text, match.end(), b)]
            if not _NOT_NOW.search(text[begin:match.start()] + " " + rest):
                out.append((begin, match.end() + len(rest)))
    return out


_SENTENCE_END = re.compile(r"[.!?]")


def _sentence_end(text: str, offset: int, limit: int) -> int:
    found = _SENTENCE_END.search(text, offset, limit)
    return found.end() if found else limit
