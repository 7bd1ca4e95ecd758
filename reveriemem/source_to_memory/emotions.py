"""The lexicon reader of an utterance: emotion, intensity and act, deterministically
(paper: "Personality clustering", the annotator used with no model).

`read_utterance` scores a small lexicon of emotion cues over Plutchik's eight
emotions with negation, takes the intensity from exclamations, intensifiers,
capitals and repetition, and reads the act (question, command, refusal, ...)
from the form of the utterance; `ACT_INTENT` words an act as an intent. The
rows it yields are marked `heuristic:emotion-v1` (`HEURISTIC_METHOD`).
`reveriemem.source_to_memory.dialogue_records` annotates a book's lines with
it or with the model, and builds the emotion-transition record.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from dspy_programs.personality import EMOTIONS
from reveriemem.core.text import normalise_space, split_sentences

EMOTION_VERSION = "emotion-v1"
HEURISTIC_METHOD = f"heuristic:{EMOTION_VERSION}"

# Plutchik's opposites: a negated cue ("not happy") counts, at half weight, for the opposite.
OPPOSITE = {
    "joy": "sadness", "sadness": "joy", "trust": "disgust", "disgust": "trust",
    "fear": "anger", "anger": "fear", "surprise": "anticipation", "anticipation": "surprise",
}

# Acts: what the form of an utterance does, strongest first.
ACTS = ("refusal", "request", "command", "question", "greeting", "farewell", "thanks", "apology",
        "agreement", "exclamation", "assertion")
ACT_INTENT = {
    "refusal": "to refuse or push back",
    "request": "to ask someone for something",
    "command": "to make someone act",
    "question": "to get an answer",
    "greeting": "to greet",
    "farewell": "to take leave",
    "thanks": "to thank",
    "apology": "to apologise",
    "agreement": "to agree or assent",
    "exclamation": "to vent a feeling",
    "assertion": "to inform or persuade",
}

# -- the lexicon -------------------------------------------------------------
# Our own short lists of cue words; inflections are matched by the stemmer below.
_CUES: dict[str, str] = {
    "joy": "glad happy happily delighted delight delightful joy joyful merry cheerful pleased pleasure "
           "wonderful splendid excellent capital lovely laugh laughed laughing hurrah hooray bravo "
           "grand marvellous charming enjoy enjoyed fun rejoice glorious bless blessed thrilled",
    "trust": "trust trusted believe believed faith faithful honest honestly sure certain certainly "
             "rely promise promised swear friend friends dear loyal true truly safe depend "
             "confidence confident proud respect",
    "fear": "afraid fear feared fearful frightened fright scared terror terrified terrible dread "
            "dreadful horror horrible horrid panic nervous anxious worried worry danger dangerous "
            "alarm alarmed tremble trembling uneasy doubt peril risk ghost help mercy",
    "surprise": "surprise surprised astonished astonishing amazed amazing extraordinary incredible "
                "strange remarkable unexpected sudden suddenly indeed really wonder curious",
    "sadness": "sad sorrow sorry grief grieve unhappy miserable misery weep wept tears cry lonely "
               "alas unfortunate poor lost lose dead death die died mourn wretched despair pity "
               "regret heart broken",
    "disgust": "disgust disgusted disgusting vile foul filthy nasty loathe loathsome sick sickening "
               "shame shameful contempt revolting hideous rubbish nonsense absurd ridiculous fool "
               "fools foolish idiot wretch brute coward liar",
    "anger": "angry anger furious fury rage mad hate hated damn damned confound curse cursed blast "
             "outrage outrageous insolent insolence villain scoundrel rascal devil enough silence "
             "blackguard impudent impudence annoy annoyed",
    "anticipation": "hope hoped hopeful soon tomorrow plan expect expected wait waiting intend ready "
                    "prepare prepared eager quickly hurry chance perhaps await",
}
_PHRASES: dict[str, tuple[str, float]] = {
    "good heavens": ("surprise", 2.0), "good god": ("surprise", 2.0), "good lord": ("surprise", 2.0),
    "bless me": ("surprise", 1.5), "by jove": ("surprise", 1.5), "dear me": ("surprise", 1.0),
    "how dare": ("anger", 2.0), "thank god": ("joy", 2.0), "thank heaven": ("joy", 2.0),
    "for god's sake": ("fear", 2.0), "for heaven's sake": ("fear", 1.5), "i'm afraid": ("sadness", 0.5),
    "i am afraid": ("sadness", 0.5), "no doubt": ("trust", 1.0), "of course": ("trust", 1.0),
    "look out": ("fear", 1.5), "what on earth": ("surprise", 2.0), "thank you": ("joy", 0.75),
    "much obliged": ("joy", 0.75),
}
# Interjections opening a sentence.
_INTERJECTIONS: dict[str, tuple[str, float]] = {
    "oh": ("surprise", 0.5), "ah": ("surprise", 0.5), "what": ("surprise", 0.5), "ha": ("joy", 1.0),
    "aha": ("joy", 1.0), "hurrah": ("joy", 2.0), "alas": ("sadness", 1.5), "pshaw": ("disgust", 1.5),
    "bah": ("disgust", 1.5), "ugh": ("disgust", 1.5), "tut": ("disgust", 1.0), "hush": ("fear", 1.0),
    "damn": ("anger", 2.0), "hang": ("anger", 1.0), "confound": ("anger", 1.5), "heavens": ("surprise", 1.5),
    "goodness": ("surprise", 1.0),
}
# Cues that are too weak on their own to name an emotion: they count half.
_WEAK = {"indeed", "really", "sure", "certain", "certainly", "true", "truly", "dear", "friend", "friends",
         "poor", "lost", "lose", "soon", "tomorrow", "perhaps", "wait",
         "waiting", "help", "curious", "wonder", "strange", "heart", "enough", "silence", "fool",
         "depend", "risk", "chance", "quickly", "ready", "sudden", "suddenly", "die", "dead", "death",
         "cry", "devil", "capital", "grand", "fun", "safe", "mercy", "ghost"}
# Negated, these say the opposite of their emotion less reliably than of a different one.
_NEGATED_TO = {"afraid": "trust", "fear": "trust", "frightened": "trust", "scared": "trust", "worried": "trust",
               "worry": "trust", "doubt": "trust", "anxious": "trust", "sure": "fear", "certain": "fear",
               "believe": "disgust", "trust": "disgust", "wait": None, "help": None, "lose": None, "lost": None,
               "soon": None, "enough": None, "perhaps": None}

LEXICON: dict[str, tuple[str, float]] = {
    word: (emotion, 0.5 if word in _WEAK else 1.0) for emotion, words in _CUES.items() for word in words.split()
}

NEGATORS = {"not", "no", "never", "nothing", "nobody", "none", "neither", "nor", "hardly", "scarcely",
            "without", "cannot", "nowhere"}
# Intensifiers strengthen the cue they precede; the strong ones raise the intensity anywhere.
STRONG_INTENSIFIERS = {"utterly", "terribly", "awfully", "dreadfully", "absolutely", "extremely", "deeply",
                       "bitterly", "exceedingly", "thoroughly", "positively", "damned", "infernally", "desperately"}
INTENSIFIERS = STRONG_INTENSIFIERS | {"very", "so", "too", "most", "perfectly", "entirely", "quite", "really",
                                      "wholly", "such", "mighty"}
EMOTION_FLOOR = 0.75  # the least cue weight that names an emotion (one strong cue, or a negated one)
_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)*")
_CLAUSE_BREAK = re.compile(r"[,;:.!?—–]")
_CAPS = re.compile(r"\b[A-Z]{2,}\b")
_ROMAN = re.compile(r"^[IVXLCDM]+$")
_INTERJECTION_END = re.compile(r"(?:\s+(?:it|you|me|him|her))?\s*[,!?.;—–-]")


def _stem(word: str) -> str | None:
    """The lexicon entry a word inflects, if any."""
    if word in LEXICON:
        return word
    for suffix, repl in (("ies", "y"), ("ied", "y"), ("ing", ""), ("ing", "e"), ("ed", ""), ("ed", "e"), ("es", ""),
                         ("s", ""), ("ly", ""), ("ness", ""), ("er", ""), ("est", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)] + repl
            if base in LEXICON:
                return base
    return None


def _negated(tokens: Sequence[str], index: int, window: int = 3) -> bool:
    """A negator among the few words before a cue, in its clause."""
    return any(t in NEGATORS or t.endswith(("n't", "n’t")) for t in tokens[max(0, index - window):index])


@dataclass
class Reading:
    """What the deterministic annotator reads off one utterance."""

    emotion: str
    intensity: int
    act: str
    scores: dict[str, float] = field(default_factory=dict)


def emotion_scores(text: str) -> tuple[dict[str, float], int]:
    """Cue weights per emotion, negation applied within a clause, and how many cues an intensifier strengthened."""
    scores: dict[str, float] = {}
    intensified = 0
    for sentence in split_sentences(text.replace("’", "'").replace("‘", "'")):
        low = sentence.lower()
        for phrase, (emotion, weight) in _PHRASES.items():
            pattern = rf"\b{re.escape(phrase)}\b"
            hits = len(re.findall(pattern, low))
            if hits:
                scores[emotion] = scores.get(emotion, 0.0) + weight * hits
                low = re.sub(pattern, " , ", low)
        opening = low.lstrip("\"'“ ")
        first = _WORD.match(opening)
        if first and first.group(0) in _INTERJECTIONS and _INTERJECTION_END.match(opening[first.end():] or "."):
            emotion, weight = _INTERJECTIONS[first.group(0)]
            scores[emotion] = scores.get(emotion, 0.0) + weight
        opened = bool(first and first.group(0) in _INTERJECTIONS)
        for number, clause in enumerate(_CLAUSE_BREAK.split(low)):
            tokens = _WORD.findall(clause)
            for index, token in enumerate(tokens):
                entry = _stem(token)
                if entry is None or (opened and number == 0 and index == 0):
                    continue  # an opening interjection is counted once, above
                emotion, weight = LEXICON[entry]
                if _negated(tokens, index):
                    flipped = _NEGATED_TO.get(entry, OPPOSITE[emotion])
                    if flipped is None:
                        continue
                    emotion, weight = flipped, weight * 0.75
                elif index > 0 and tokens[index - 1] in INTENSIFIERS:
                    weight *= 1.5
                    intensified += 1
                scores[emotion] = scores.get(emotion, 0.0) + weight
    return scores, intensified


def intensity_of(text: str, emotion: str, score: float, intensified: int = 0) -> int:
    """1 (faint) to 5 (overwhelming): exclamations, intensifiers, capitals, repetition, cue weight."""
    exclamations = text.count("!")
    words = [w.lower() for w in _WORD.findall(text)]
    caps = [w for w in _CAPS.findall(text) if not _ROMAN.match(w)]
    if emotion == "neutral":
        return 2 if exclamations or caps else 1
    level = 2
    level += min(2, exclamations)
    if intensified or any(w in STRONG_INTENSIFIERS for w in words):
        level += 1
    if caps:
        level += 1
    if _repeats(text):
        level += 1
    if score >= 3.0:
        level += 1
    return max(1, min(5, level))


def _repeats(text: str) -> bool:
    """A word or a sentence said twice in a row ("No, no!", "I've found it! I've found it!")."""
    words = [w.lower() for w in _WORD.findall(text)]
    if any(a == b and len(a) > 1 for a, b in zip(words, words[1:])):
        return True
    sentences = [normalise_space(s).lower() for s in split_sentences(text)]
    return any(a == b for a, b in zip(sentences, sentences[1:]))


_IMPERATIVE_VERBS = frozenset(str.split(
    "come go sit stand look tell shut listen stop take give bring get wait stay hold leave keep let put read show "
    "run fetch mind remember see hush hurry follow answer speak say call send open close lock find watch fire "
    "pull push help mark consider think try step move jump drop throw bear heave belay lie be do don't "
    "never make write sign carry turn ask hand pass eat drink sleep rest away out forgive excuse"
))
_QUESTION_OPENERS = re.compile(
    r"^(?:who|whom|whose|what|which|when|where|why|how|is|are|was|were|do|does|did|can|could|will|would|shall|"
    r"should|may|might|have|has|had|am|isn't|aren't|wasn't|don't|didn't|won't|wouldn't|can't|couldn't)\b")


def _strip_vocative(sentence: str) -> str:
    """Drop an opening vocative or interjection ("Watson, come here" -> "come here")."""
    head, sep, rest = sentence.partition(",")
    if sep and rest.strip() and len(head.split()) <= 3 and (head[:1].isupper() or head.lower() in _INTERJECTIONS):
        return rest.strip()
    return sentence


def sentence_act(sentence: str) -> str:
    s = sentence.strip().strip("\"'“”‘’ ").replace("’", "'")
    low = s.lower()
    body = _strip_vocative(s).lower()
    openers = {m.group(0) for m in (_WORD.match(low), _WORD.match(body)) if m}
    if re.match(r"^(?:no|nay|never)\b\s*[,.!;—-]", low) or re.search(
            r"\b(?:i will not|i won't|i shall not|i shan't|i'll not|i refuse|i'd rather not|certainly not|"
            r"not i\b|out of the question|i'll do no such thing|i will do no such thing)", low):
        return "refusal"
    if re.search(r"\bplease\b|\bpray\b", low) or re.match(
            r"^(?:would you|could you|will you|can you|won't you|may i|might i|let me|i beg you|i ask you|do you mind)\b",
            body):
        return "request"
    if s.endswith("?"):
        return "question"
    if openers & _IMPERATIVE_VERBS and not re.match(r"^(?:be|do|have|go|let)\w*\s+(?:you|we|they|i)\b", body):
        return "command"
    if re.match(r"^(?:good (?:morning|evening|day|afternoon)|hello|hullo|how do you do|welcome|greetings|hail)\b", low):
        return "greeting"
    if re.match(r"^(?:good-?bye|good night|farewell|adieu|so long)\b", low):
        return "farewell"
    if re.search(r"\b(?:thank you|thanks|much obliged|obliged to you|i am grateful|i'm grateful)\b", low):
        return "thanks"
    if re.search(r"\b(?:sorry|beg (?:your )?pardon|forgive me|i apologi[sz]e|excuse me|pardon me)\b", low):
        return "apology"
    if re.match(r"^(?:yes|aye|yea|very well|certainly|of course|indeed|quite so|exactly|agreed|all right|right|"
                r"just so|true)\b", low):
        return "agreement"
    if _QUESTION_OPENERS.match(body) and not s.endswith((".", "!")):
        return "question"
    if s.endswith("!"):
        return "exclamation"
    return "assertion"


def utterance_act(text: str) -> str:
    """The strongest act among the utterance's sentences."""
    acts = {sentence_act(s) for s in split_sentences(text)} or {"assertion"}
    return next(a for a in ACTS if a in acts)


def read_utterance(text: str) -> Reading:
    """The deterministic annotation of one utterance: emotion, intensity and act."""
    scores, intensified = emotion_scores(text)
    emotion, best = "neutral", 0.0
    for name in EMOTIONS:
        if scores.get(name, 0.0) > best:
            emotion, best = name, scores[name]
    if best < EMOTION_FLOOR:
        emotion = "neutral"
        if text.count("!") >= 2 or ("!" in text and (_repeats(text) or _CAPS.search(text))):
            emotion, best = "surprise", 1.0  # excitement with no word for it
    return Reading(emotion=emotion, intensity=intensity_of(text, emotion, best, intensified),
                   act=utterance_act(text), scores=scores)
