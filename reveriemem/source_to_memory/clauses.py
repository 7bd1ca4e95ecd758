"""Clause-level cues shared by dialogue attribution and rosters: is a named
character the subject of a narrated action here?"""

from __future__ import annotations

import re

from reveriemem.source_to_memory.mentions import Mention

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
_PRESENT_AFTER_WAS = re.compile(
    r"^\s+(?:at|in|on|by|beside|behind|before|near|inside|outside|upon|standing|sitting|seated|waiting|there|here|"
    r"already|still|alone|busy|bent|leaning|\w+ing)\b"
)


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
        rest = after[verb.end() :]
        return not _NOT_PRESENT_AFTER_WAS.match(rest) and _PRESENT_AFTER_WAS.match(rest) is not None
    return True
