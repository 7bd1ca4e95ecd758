"""Dialogue records: every focus character's utterance annotated with an
(emotion, intensity, trigger) triple and the speaker's intent, and, in story
order, each character's emotion-transition record (paper: "Personality
clustering", first half).

Two annotators share one output shape:

- the model path sends a scene's focus-speaker lines (numbered, each with a
  few words of what came before, never the whole scene) in one call of
  `dspy_programs.personality.AnnotateDialogue`; a scene whose output never
  parses falls back to the deterministic annotator, its rows say so in
  `method` and the reason in `error`, and the rest of the book goes on;
- the deterministic annotator (`heuristic:emotion-v1`): a small lexicon of
  emotion cues over Plutchik's eight emotions with negation, intensity from
  exclamations, intensifiers, capitals and repetition, the trigger taken from
  the line of another speaker or the narration just before, and the intent
  read from the form of the utterance (question, command, refusal, ...).

The form of an utterance (`act`) is always computed deterministically, so
every row has a comparable label whichever annotator produced the rest.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dspy_programs.personality import EMOTIONS, annotate_dialogue_program
from reveriemem.core.errors import ModelOutputError
from reveriemem.core.text import Paragraph, normalise_space
from reveriemem.models import ModelHandle, run_program

log = logging.getLogger(__name__)

EMOTION_VERSION = "emotion-v1"
HEURISTIC_METHOD = f"heuristic:{EMOTION_VERSION}"
MAX_LINES_PER_CALL = 40  # a scene with more focus lines is annotated in several calls
PROMPT_LINE_WORDS = 45  # a long speech is cut to its opening in the prompt
HINT_WORDS = 10  # the "before" hint in the prompt
TRIGGER_WORDS = 20  # the deterministic trigger

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
_SENTENCE = re.compile(r"(?<=[.!?])[\"'”’]?\s+(?=[\"'“‘]?[A-Z])")
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


def split_sentences(text: str) -> list[str]:
    return [s for s in (part.strip() for part in _SENTENCE.split(text)) if s]


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


# -- lines and their context -------------------------------------------------


@dataclass
class Line:
    """An utterance as stored in `utterances`: a paragraph's quoted speech."""

    scene_id: int
    paragraph: int
    start: int
    end: int
    speaker: str | None  # focus character slug
    label: str | None  # the speaker as found, also for non-focus speakers
    text: str
    addressees: list[str] = field(default_factory=list)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Line:
        return cls(scene_id=int(row["scene_id"]), paragraph=int(row["paragraph"]), start=int(row["start"]),
                   end=int(row["end"]), speaker=row.get("speaker"), label=row.get("speaker_label"),
                   text=row["text"], addressees=list(row.get("addressees") or []))


@dataclass
class Annotation:
    emotion: str
    intensity: int
    trigger: str
    intent: str
    act: str
    method: str
    error: str = ""


def _shorten(text: str, words: int, tail: bool = False) -> str:
    parts = normalise_space(text).split()
    if len(parts) <= words:
        return " ".join(parts)
    return "... " + " ".join(parts[-words:]) if tail else " ".join(parts[:words]) + " ..."


def _last_sentence(text: str) -> str:
    sentences = split_sentences(normalise_space(text))
    return sentences[-1] if sentences else ""


class Context:
    """What comes just before each line: another speaker's line or narration."""

    def __init__(self, text: str, paragraphs: Sequence[Paragraph], lines: Sequence[Line],
                 first_paragraph: dict[int, int], names: dict[str, str]):
        self.text = text
        self.paragraphs = {p.index: p for p in paragraphs}
        self.by_paragraph = {line.paragraph: line for line in lines}
        self.first_paragraph = first_paragraph  # scene id -> its first paragraph
        self.names = names

    def speaker_name(self, line: Line) -> str:
        if line.speaker:
            return self.names.get(line.speaker, line.speaker)
        if line.label and not line.label.startswith("?"):
            return line.label
        return "someone"

    def before(self, line: Line, words: int) -> str:
        return self.source(line, words)[0]

    def source(self, line: Line, words: int) -> tuple[str, int | None]:
        """What came just before a line, and the paragraph of the line it quotes (None for narration).

        The narration before the quote in its own paragraph (unless it is only
        a speech tag), else the nearest earlier paragraph of the scene that is
        not the same speaker's: another speaker's line, or narration.
        """
        paragraph = self.paragraphs.get(line.paragraph)
        if paragraph is not None:
            lead = self.text[paragraph.start:line.start]
            if len(lead.split()) >= 5:
                return _shorten(_last_sentence(lead), words, tail=True), None
        floor = self.first_paragraph.get(line.scene_id, line.paragraph)
        index = line.paragraph - 1
        while index >= floor and index >= line.paragraph - 4:
            other = self.by_paragraph.get(index)
            if other is None:
                prior = self.paragraphs.get(index)
                if prior is None:
                    return "", None
                return _shorten(_last_sentence(prior.text), words, tail=True), None
            same = (other.speaker and other.speaker == line.speaker) or (
                not other.speaker and other.label and other.label == line.label)
            if not same:
                return f"{self.speaker_name(other)}: \"{_shorten(other.text, words)}\"", other.paragraph
            index -= 1
        return "", None


def heuristic_annotation(line: Line, context: Context, error: str = "") -> Annotation:
    reading = read_utterance(line.text)
    return Annotation(emotion=reading.emotion, intensity=reading.intensity, trigger=context.before(line, TRIGGER_WORDS),
                      intent=ACT_INTENT[reading.act], act=reading.act, method=HEURISTIC_METHOD, error=error)


def prompt_lines(batch: Sequence[Line], context: Context) -> str:
    """The numbered lines of a call; a line answering the numbered line just before it gets no hint."""
    out = []
    for n, line in enumerate(batch, start=1):
        hint, quoted = context.source(line, HINT_WORDS)
        if quoted is not None and n > 1 and batch[n - 2].paragraph == quoted:
            hint = ""
        hint_part = f" [before: {hint}]" if hint else ""
        out.append(f"{n}. {context.speaker_name(line)}{hint_part}: \"{_shorten(line.text, PROMPT_LINE_WORDS)}\"")
    return "\n".join(out)


@dataclass
class AnnotatedBook:
    """Focus-speaker lines in story order with their annotations."""

    lines: list[Line]
    annotations: list[Annotation]
    method: str
    failures: list[str] = field(default_factory=list)
    scenes_annotated: int = 0


def annotate_lines(
    text: str,
    paragraphs: Sequence[Paragraph],
    lines: Sequence[Line],
    first_paragraph: dict[int, int],
    names: dict[str, str],
    handle: ModelHandle,
    on_scene: Callable[[int], None] | None = None,
) -> AnnotatedBook:
    """Annotate every line whose speaker is a focus character, scene by scene.

    `lines` are all the book's utterances (non-focus ones give context);
    `first_paragraph` maps a scene id to its first paragraph; `names` a focus
    slug to its canonical name; `on_scene(scene_id)` is called after each scene.
    """
    ordered = sorted(lines, key=lambda line: line.start)
    context = Context(text, paragraphs, ordered, first_paragraph, names)
    focus = [line for line in ordered if line.speaker in names]
    by_scene: dict[int, list[Line]] = {}
    for line in focus:
        by_scene.setdefault(line.scene_id, []).append(line)
    program = annotate_dialogue_program() if handle.lm is not None else None
    model_method = f"model:{handle.name}"
    annotations: dict[int, Annotation] = {}
    failures: list[str] = []
    for scene_id in sorted(set(first_paragraph) | set(by_scene)):
        scene_lines = by_scene.get(scene_id, [])
        for offset in range(0, len(scene_lines), MAX_LINES_PER_CALL):
            batch = scene_lines[offset:offset + MAX_LINES_PER_CALL]
            if program is None:
                for line in batch:
                    annotations[line.start] = heuristic_annotation(line, context)
                continue
            try:
                prediction = run_program(handle, program, lines=prompt_lines(batch, context))
            except ModelOutputError as exc:
                reason = f"model output never parsed, fell back to the lexicon: {exc}"
                failures.append(f"scene {scene_id}: {exc}")
                log.warning("Scene %s: fell back to the lexicon annotator: %s", scene_id, exc)
                for line in batch:
                    annotations[line.start] = heuristic_annotation(line, context, error=reason)
                continue
            given: dict[int, Any] = {}
            for entry in prediction.annotations or []:
                given.setdefault(int(entry.n), entry)
            for n, line in enumerate(batch, start=1):
                entry = given.get(n)
                if entry is None:
                    annotations[line.start] = heuristic_annotation(
                        line, context, error="the model gave no annotation for this line; lexicon used")
                    continue
                act = utterance_act(line.text)
                annotations[line.start] = Annotation(
                    emotion=str(entry.emotion), intensity=max(1, min(5, int(entry.intensity))),
                    trigger=normalise_space(str(entry.trigger or "")), intent=normalise_space(str(entry.intent or ""))
                    or ACT_INTENT[act], act=act, method=model_method)
        if on_scene is not None:
            on_scene(scene_id)
    method = HEURISTIC_METHOD if program is None else model_method
    return AnnotatedBook(lines=focus, annotations=[annotations[line.start] for line in focus], method=method,
                         failures=failures, scenes_annotated=sum(1 for s in by_scene if s in first_paragraph))


# -- emotion transitions -----------------------------------------------------


def emotion_transitions(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One character's dialogue records in story order, as transitions between states.

    Each row moves from the state of the character's previous utterance
    (None for the first) to the state of this one, with what triggered it,
    the intent, the scene and the offsets; `same_scene` says whether the
    previous state was in the same scene, `changed` whether the emotion moved.
    """
    rows: list[dict[str, Any]] = []
    previous: dict[str, Any] | None = None
    for step, record in enumerate(sorted(records, key=lambda r: r["start"]), start=1):
        rows.append({
            "book": record["book"], "character": record["speaker"], "character_name": record["speaker_name"],
            "step": step, "scene_id": record["scene_id"], "paragraph": record["paragraph"],
            "start": record["start"], "end": record["end"],
            "from_emotion": previous["emotion"] if previous else None,
            "from_intensity": previous["intensity"] if previous else None,
            "to_emotion": record["emotion"], "to_intensity": record["intensity"],
            "changed": previous is None or previous["emotion"] != record["emotion"]
            or previous["intensity"] != record["intensity"],
            "same_scene": previous is not None and previous["scene_id"] == record["scene_id"],
            "trigger": record["trigger"], "intent": record["intent"], "act": record["act"],
            "text": record["text"], "method": record["method"],
        })
        previous = record
    return rows
