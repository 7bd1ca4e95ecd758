"""Speech tags: the verbs that say a line is spoken, and the tag that closes a narration paragraph to
introduce the line of the next ("The Count's eyes gleamed, and he said:--"), and the names a line
calls on (`vocatives`). Dialogue attribution (`reveriemem.source_to_memory.dialogue`) and a
character's own lines (`own_lines`) read them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from reveriemem.core.text import NOT_AFTER_TITLE, Paragraph
from reveriemem.source_to_memory.clauses import PERSON_NOUNS, is_action_subject
from reveriemem.source_to_memory.mentions import Mention

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
SPEECH_VERB = rf"(?:{SPEECH_VERBS})"


# A narration paragraph that ends by introducing the line of the next ("The Count's eyes gleamed, and he said:--",
# "She greeted us warmly and said:--", "so I asked him:--"): the tag's subject speaks the next paragraph's
# first quotation.
_INTRODUCES = re.compile(r":\s*(?:--|—|–)?\s*$")
# The nouns of persons the clauses know, and a few more who speak up in a tag ("The old keeper said:--").
_PERSON_NOUN = (rf"(?:old\s+|young\s+)?(?:{PERSON_NOUNS}|doctor|guard|keeper|attendant|nurse|master|mistress|"
                r"coachman|professor|count)")
_SUBJECT_BEFORE = re.compile(r"\b(He|he|She|she|I)\s+(?:\w+ly\s+|then\s+|again\s+|at\s+once\s+|also\s+)*$")
_OTHER_BEFORE = re.compile(rf"\b[Tt]he\s+{_PERSON_NOUN}\s+(?:\w+ly\s+|then\s+|again\s+)*$")
_COORDINATED = re.compile(r"(?:,\s*)?\band\s+(?:\w+ly\s+|then\s+)*$")
# The verbs an introducing tag may end on: the speech verbs, "spoke", and a participle joined to the clause
# ("led me in, saying huskily:--", "paused a few seconds before replying:--"), whose subject is the clause's.
_INTRODUCING_VERB = re.compile(rf"\b(?:{SPEECH_VERB}|spoke|(?P<participle>saying|replying|answering|adding|crying|"
                               r"whispering|muttering|murmuring|exclaiming|asking|continuing))\b")
_CLAUSE_SUBJECT = re.compile(rf"(?:^|[,;]\s+|\b(?:and|but|when|as|then|so|while)\s+)(?P<subject>He|She|I|he|she|"
                             rf"[Tt]he\s+{_PERSON_NOUN})\s+(?:\w+ly\s+)?(?:had\s+)?[a-z]{{2,}}\b")
_REPORTED = re.compile(r"\b(?:that|who|which|whom)\s+(?:\w+\s+){1,2}$")


@dataclass(frozen=True)
class Introduction:
    """Who a narration paragraph's closing tag names as the next line's speaker."""

    speaker: str | None = None  # a focus character named as the tag's subject
    pronoun: str | None = None  # he / she / I, resolved when the line comes
    other: str | None = None  # someone who is no focus character ("the old lady said:")
    addressed: tuple[str, ...] = ()  # named after the verb ("he said to Van Helsing:--"): spoken to


def ends_introducing(narration: str) -> bool:
    """Does the narration end in the colon of a speech tag that introduces a line to come ("He interrupted:--")?"""
    return _INTRODUCES.search(narration) is not None


def introduction(text: str, paragraph: Paragraph, mentions: Sequence[Mention]) -> Introduction | None:
    """The speaker a narration paragraph introduces for the next one, when its last sentence is a speech tag
    ending in a colon ("...and he said:--"), or None. The subject is read next to the verb ("he said very
    brusquely:--", "Van Helsing said:--"), or, for a verb joined to an earlier one ("She greeted us warmly and
    said:--", "led me in, saying huskily:--"), in the last clause opened by a subject. (A paragraph with a
    quotation of its own is left alone: its closing tag may be its own line's.)"""
    body = text[paragraph.start : paragraph.end].rstrip()
    if not _INTRODUCES.search(body):
        return None
    opens = [m.end() for m in re.finditer(rf"{NOT_AFTER_TITLE}[.!?;]\s+(?=[A-Z\"“])", body)]
    start = paragraph.start + (opens[-1] if opens else 0)
    sentence = text[start : paragraph.start + len(body)]
    if re.search(r"[\"“”]", sentence):
        return None
    verbs = [v for v in _INTRODUCING_VERB.finditer(sentence)
             if not _REPORTED.search(sentence, 0, v.start())]  # not "tones that Jonathan said were sweet"
    if not verbs:
        return None
    before = sentence[: verbs[-1].start()]
    joined = verbs[-1].group("participle") is not None
    named = [m for m in mentions if start <= m.start < start + len(before)]
    to = tuple(m.character for m in mentions if start + verbs[-1].end() <= m.start < start + len(sentence))
    gap = text[named[-1].end : start + len(before)] if named else ""
    if not joined and named and len(gap.split()) <= 2 and not re.search(r",|\band\b", gap):  # not "beside X, and said"
        return Introduction(speaker=named[-1].character, addressed=to)
    if not joined and (pronoun := _SUBJECT_BEFORE.search(before)) is not None:
        return Introduction(pronoun=pronoun.group(1), addressed=to)
    if not joined and (other := _OTHER_BEFORE.search(before)) is not None:
        return Introduction(other=other.group(0).strip(), addressed=to)
    if not joined and _COORDINATED.search(before) is None:
        return None
    # the subject of the verbs joined: the last clause opened by a subject ("When I moved to the fire, she caught
    # me and held me back, and whispered:--" is hers)
    subjects = [(start + m.start("subject"), m.group("subject")) for m in _CLAUSE_SUBJECT.finditer(before)]
    subjects += [(m.start, m.character) for m in named if is_action_subject(text, m, start)]
    if not subjects:
        return None
    _, subject = max(subjects)
    if subject in ("He", "he", "She", "she", "I"):
        return Introduction(pronoun=subject, addressed=to)
    if subject.lower().startswith("the "):
        return Introduction(other=subject, addressed=to)
    return Introduction(speaker=subject, addressed=to)


def name_only(text: str, spans: Sequence[tuple[int, int]], mention: Mention) -> bool:
    """Is the mention's quote only the name ("Silver?" I asked)?"""
    span = next(((a, b) for a, b in spans if a <= mention.start < b), None)
    return span is not None and not text[span[0]:mention.start].lstrip('"“ ') and not text[
        mention.end:span[1]].strip('"”,.!?;:—- \r\n')


# A name taken up by a pronoun at once is the topic of the sentence, not the one spoken to ("Billy Bones was the
# mate; Long John, he was quartermaster", "Long John Silver, he is called").
_TOPIC = re.compile(r",\s*(?:he|she|they|him|her)\s+(?:was|were|is|are|had|has|did|does|said|says|called|named|"
                    r"would|could|will|can|[a-z]+ed)\b")
# A name inside a list of names is spoken of, not to ("you may be sure that Gregson, Lestrade, and Co. will
# pocket all the credit"): a name just before it, itself inside the sentence, and "and" or "or" and a name after
# it (perhaps past more names). Two names alone may be an introduction ("Dr. Watson, Mr. Sherlock Holmes," said
# Stamford), and a name after a word that opens the line is spoken to ("Hurry, Watson, or Drebber will escape!").
_LIST_BEFORE = re.compile(r"[a-z,;]\s+(?:[A-Z][\w.]*\s+)?[A-Z][\w.]*,\s*$")
_LIST_AFTER = re.compile(r"(?:,\s+(?:[A-Z][\w.]*\s+)?[A-Z][\w.]*)*,?\s+(?:and|or|nor)\s+(?!I\b)[A-Z]")


def vocatives(text: str, spans: Sequence[tuple[int, int]], mentions: Sequence[Mention]) -> list[str]:
    """Focus characters addressed by name inside the quotes ("Well, Watson," ...)."""
    addressed: list[str] = []
    for mention in mentions:
        span = next(((a, b) for a, b in spans if a <= mention.start < b), None)
        if span is None:
            continue
        before = text[span[0] : mention.start].lstrip('"“ ')
        after = text[mention.end : mention.end + 2]
        if name_only(text, spans, mention):
            continue  # a quote that is only a name ("Captain Dask," she said) names, not addresses
        opens = before == "" or re.search(r"(?:[,!?;]|\b(?:O|Oh|Ah|Dear|My dear))\s*$", before) is not None
        closes = after[:1] in {",", ".", "!", "?", ";", "—", "-", "”", '"'}
        if _TOPIC.match(text, mention.end):
            continue  # "Long John, he was quartermaster": the name set before its pronoun is spoken of
        if _LIST_AFTER.match(text, mention.end) and _LIST_BEFORE.search(text, span[0], mention.start):
            continue  # "that Gregson, Lestrade, and Co.": one of a list of names
        if opens and closes and mention.character not in addressed:
            addressed.append(mention.character)
    return addressed
