"""The Episodic layer: a character's first-person memory of every scene they were present for.

One episode per scene whose roster status for the character starts with
"present", in story order. The source of an episode is the character's
presence spans in the scene, read from the roster rows by `presence_spans`
(the one place this layer learns where a character is present; the rosters
own the rules): an episode's `source_start` is where their presence starts,
not the scene's start, and its `source_end` where it ends. Every sentence of
a note, offline or from a model, comes from inside those spans or is the
character's own attributed line there; nothing they walk in on late, miss
while away or leave early is remembered.

With a model, each episode is elicited scene by scene from the text of
those spans (several spans joined with "[...]"), the scene's setting and
reminders of the character's own two most recent earlier scenes (the start of
their extractive digests, so the scenes are asked at once, `map_calls`, none
waiting for another's answer); the prompt for a scene never holds text from
after its end. A passage longer
than `MAX_PART_WORDS` is summarised part by part, each part seeing the notes
made so far, and the parts' fields joined. A scene whose model output never
parses falls back to the extractive digest, marked `failed:<model>+...` with
the reason in `error`; an unreachable model stops the build.

Without a model, the digest is extractive and deterministic: the setting with
the opening and closing sentences of the presence passage; the sentences in which the
character is the acting subject and their attributed speech, verbatim; and the
sentences about them that carry emotion words or exclamations.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import polars as pl

from dspy_programs.episodic import episodic_program
from reveriemem.core import progress
from reveriemem.core.characters import Character
from reveriemem.core.errors import ModelOutputError
from reveriemem.core.registry import Book
from reveriemem.core.text import Paragraph, Sentence, normalise_space, sentences_of, split_paragraphs
from reveriemem.models import ModelHandle, run_program
from reveriemem.models.concurrency import map_calls
from reveriemem.source_to_memory.clauses import is_action_subject
from reveriemem.source_to_memory.dialogue import in_spans, quote_spans
from reveriemem.source_to_memory.facts import evidence_units
from reveriemem.source_to_memory.mentions import AliasMatcher, Mention
from reveriemem.source_to_memory.presence import ScenePresence, present_scenes

log = logging.getLogger(__name__)

DIGEST_VERSION = "episodic-digest-v3"  # v3: sentences private to others left out
DIGEST_METHOD = f"heuristic:{DIGEST_VERSION}"
MAX_PART_WORDS = 2500  # a presence passage longer than this is summarised in parts
PASSAGE_WORDS = 1200  # a longer presence passage is focused on the character's paragraphs (token budget)
EARLIER_NOTES = 2  # own earlier notes shown with each scene
NOTE_WORDS = 60  # words of an earlier summary kept in a note
SENTENCE_WORDS = 45  # a digest sentence is clipped to this many words
MIN_SENTENCE_WORDS = 5  # shorter lines (dates, signatures) do not open or close a digest
MAX_ACTIONS = 6
MAX_SPEECH = 5
MAX_EMOTIONS = 4
EMOTION_AFTER = 60  # an emotion word counts for the character up to this many characters after a reference
EMOTION_BEFORE = 30  # ... or this many before it

_FIRST_PERSON = re.compile(r"\bI\b")
_FIRST_PERSON_ANY = re.compile(r"\b(?:I|me|my|myself)\b")
_PRONOUNS = {"male": ("He", "he"), "female": ("She", "she")}
# Words that name or betray a feeling; a sentence about the character with one of
# these (or ending in "!") goes into the digest's emotions.
_EMOTION = re.compile(
    r"\b(?:afraid|fear\w*|frighten\w*|terrif\w*|scared|dread\w*|alarm\w*|panic\w*|horr\w*|"
    r"ang(?:er|ry|rily)|fur(?:y|ious\w*)|rage|raging|wrath\w*|indignan\w*|irritat\w*|annoy\w*|"
    r"glad\w*|happ(?:y|ier|ily|iness)|joy\w*|delight\w*|pleas(?:ed|ure)|cheer\w*|merr\w*|grin\w*|"
    r"smil\w*|laugh\w*|relie(?:f|ved)|proud|pride|hope\w*|eager\w*|excit\w*|thrill\w*|"
    r"sad\w*|sorrow\w*|grie(?:f|ve\w*)|mourn\w*|wept|weep\w*|tears|despair\w*|miser\w*|lonel\w*|"
    r"unhapp\w*|gloom\w*|bitter\w*|ashamed|shame\w*|guilt\w*|embarrass\w*|blush\w*|flush\w*|"
    r"nervous\w*|anxi\w*|worr\w*|uneas\w*|restless\w*|trembl\w*|shiver\w*|shudder\w*|shook|shaking|"
    r"pale|paler|white-faced|surpris\w*|astonish\w*|amaz\w*|startl\w*|shock\w*|stunned|bewilder\w*|"
    r"puzzl\w*|confus\w*|suspic\w*|doubt\w*|distrust\w*|wary|scorn\w*|contempt\w*|disgust\w*|"
    r"impatien\w*|frown\w*|scowl\w*|glar\w*|sigh\w*|groan\w*|calm\w*|grim\w*|"
    r"tender\w*|fond\w*|love\w*|hat(?:e|ed|red)|jealous\w*|envy|envious|grateful|gratitude|"
    r"pity|sorry|regret\w*|pray(?:ed|ing)?|long(?:ed|ing))\b",
    re.IGNORECASE,
)


@dataclass
class Summary:
    scene_understanding: str
    my_actions: str
    my_emotions: str


@dataclass
class Episode:
    """One scene as one character remembers it: where they were in it, and the note."""

    presence: ScenePresence
    summary: Summary
    method: str
    error: str | None = None

    @property
    def scene_id(self) -> int:
        return self.presence.scene_id

    @property
    def text(self) -> str:
        """The episode as one searchable text: where and when, then the three fields."""
        where = ", ".join(part for part in (self.presence.location, self.presence.time) if part)
        said = where and where in self.summary.scene_understanding  # the digest already names the setting
        lines = [f"Scene {self.scene_id}" + (f" ({where})" if where and not said else "") + "."]
        if self.summary.scene_understanding:
            lines.append(self.summary.scene_understanding)
        if self.summary.my_actions:
            lines.append(f"My actions: {self.summary.my_actions}")
        if self.summary.my_emotions:
            lines.append(f"My emotions: {self.summary.my_emotions}")
        return "\n".join(lines)

    def row(self, book: str, character: str) -> dict[str, Any]:
        """The stored row (without its vector) in the columns of `schemas.EPISODES`."""
        presence = asdict(self.presence)
        presence.pop("spans")
        return {
            "book": book, "character": character, **presence,
            "scene_understanding": self.summary.scene_understanding, "my_actions": self.summary.my_actions,
            "my_emotions": self.summary.my_emotions, "text": self.text, "method": self.method, "error": self.error,
        }


@dataclass
class EpisodicBuild:
    episodes: list[Episode]
    failures: list[str]  # one line per scene that fell back to the digest


def build_episodes(
    book: Book,
    scenes: pl.DataFrame,
    rosters: pl.DataFrame,
    utterances: pl.DataFrame,
    slug: str,
    handle: ModelHandle,
) -> EpisodicBuild:
    """One episode per scene the character `slug` is present for, scene by scene in story order.

    Frames are as stored by the assets `scenes`, `scene_rosters` and `utterances`.
    Raises ModelUnavailableError when the model cannot be reached.
    """
    character = next((c for c in book.characters if c.slug == slug), None)
    if character is None:
        return EpisodicBuild([], [])
    presences = present_scenes(scenes, rosters, slug)
    digester = _Digester(book, character, utterances)
    step = f"episodes[{slug}]"
    progress.step_started(book.slug, step, len(presences))
    program = episodic_program() if handle.lm is not None else None
    digests = [digester.digest(presence) for presence in presences]  # offline, and the model path's reminders

    def elicit(index: int) -> Summary:
        presence = presences[index]
        passage = focus_passage(book, character, presence.spans, PASSAGE_WORDS)
        first = max(0, index - EARLIER_NOTES)
        notes = [note(p.scene_id, d) for p, d in zip(presences[first:index], digests[first:index])]
        try:
            return summarise(handle, program, character, presence, passage, notes)
        finally:
            progress.unit_done(book.slug, step)

    if program is None:
        for _ in presences:
            progress.unit_done(book.slug, step)
        return EpisodicBuild([Episode(p, d, DIGEST_METHOD, None) for p, d in zip(presences, digests)], [])
    episodes: list[Episode] = []
    failures: list[str] = []
    for presence, digest, answer in zip(presences, digests, map_calls(handle, elicit, range(len(presences)))):
        if answer.error is None:
            episodes.append(Episode(presence, answer.result(), f"model:{handle.name}", None))
        elif isinstance(answer.error, ModelOutputError):
            error = str(answer.error)
            log.warning("Episode of scene %d for %s fell back to the digest: %s", presence.scene_id, slug, error)
            failures.append(f"scene {presence.scene_id}: {error}")
            episodes.append(Episode(presence, digest, f"failed:{handle.name}+{DIGEST_METHOD}", error))
        else:
            raise answer.error
    return EpisodicBuild(episodes, failures)


# -- the model path ------------------------------------------------------------


def character_label(character: Character) -> str:
    others = [a for a in character.aliases if a != character.name]
    return f"{character.name} (also called {', '.join(others)})" if others else character.name


def setting_label(presence: ScenePresence) -> str:
    parts = [f"place: {presence.location or 'unknown'}", f"time: {presence.time or 'unknown'}"]
    if presence.atmosphere:
        parts.append(f"mood: {presence.atmosphere}")
    return "; ".join(parts)


def note(scene_id: int, digest: Summary) -> str:
    """A short reminder of an earlier scene of the character's, as shown with later scenes: the start of its
    extractive digest (what the text says they lived there), so no scene's note waits for another's answer."""
    return f"Scene {scene_id}: {clip(digest.scene_understanding, NOTE_WORDS)}"


def summarise(
    handle: ModelHandle,
    program: Any,
    character: Character,
    presence: ScenePresence,
    passage: str,
    notes: Sequence[str],
) -> Summary:
    """Ask the model for one scene, part by part when the passage is long; fields joined."""
    running = list(notes)
    pieces: list[Summary] = []
    parts = split_parts(passage, MAX_PART_WORDS)
    for index, part in enumerate(parts, start=1):
        prediction = run_program(
            handle, program, character=character_label(character), setting=setting_label(presence),
            passage=part, earlier_summaries=running[-EARLIER_NOTES:],
        )
        piece = Summary(
            scene_understanding=normalise_space(str(prediction.scene_understanding or "")),
            my_actions=normalise_space(str(prediction.my_actions or "")),
            my_emotions=normalise_space(str(prediction.my_emotions or "")),
        )
        if not piece.scene_understanding:
            raise ModelOutputError(
                f"The model {handle.name} gave an empty scene understanding for scene {presence.scene_id}"
                + (f" (part {index} of {len(parts)})" if len(parts) > 1 else "")
            )
        pieces.append(piece)
        label = f"Scene {presence.scene_id}, part {index}" if len(parts) > 1 else f"Scene {presence.scene_id}"
        running.append(f"{label}: {clip(piece.scene_understanding, NOTE_WORDS)}")
    return Summary(
        scene_understanding=" ".join(p.scene_understanding for p in pieces),
        my_actions=" ".join(p.my_actions for p in pieces if p.my_actions),
        my_emotions=" ".join(p.my_emotions for p in pieces if p.my_emotions),
    )


def focus_passage(book: Book, character: Character, spans: Sequence[tuple[int, int]], budget: int) -> str:
    """The text of the presence spans, or, when longer than `budget` words, the paragraphs that concern the character.

    Spans are joined with "[...]". Over the budget, paragraphs are kept by
    weight until the budget is spent: the passage's opening and closing
    paragraphs and those naming the character (their speech tags, actions,
    being addressed) first, then the character's own first-person narration,
    then the rest; kept paragraphs stay in story order with "[...]" where text
    was left out. This bounds the prompt of a long scene without giving the
    model anything from outside the spans.
    """
    paragraphs = [p for start, end in spans for p in split_paragraphs(book.text, start, end)]
    breaks = {i for i in range(1, len(paragraphs))
              if not any(a <= paragraphs[i - 1].start and paragraphs[i].end <= b for a, b in spans)}
    sizes = [len(p.text.split()) for p in paragraphs]
    chosen = set(range(len(paragraphs))) if sum(sizes) <= budget else _focus(book, character, paragraphs, sizes, budget)
    pieces: list[str] = []
    for i, paragraph in enumerate(paragraphs):
        if i in chosen:
            if i in breaks and pieces and pieces[-1] != "[...]":
                pieces.append("[...]")
            pieces.append(normalise_space(paragraph.text))
        elif not pieces or pieces[-1] != "[...]":
            pieces.append("[...]")
    return "\n\n".join(pieces)


def _focus(book: Book, character: Character, paragraphs: Sequence[Paragraph], sizes: Sequence[int],
           budget: int) -> set[int]:
    matcher = AliasMatcher([character])
    narrated = [(a, b) for a, b in character.narrator_spans]
    weights = []
    for i, paragraph in enumerate(paragraphs):
        weight = 0
        if i in (0, len(paragraphs) - 1):
            weight = 3
        elif matcher.find(book.text, paragraph.start, paragraph.end):
            weight = 2
        elif any(a <= paragraph.start < b for a, b in narrated):
            weight = 1
        weights.append(weight)
    chosen: set[int] = set()
    spent = 0
    for i in sorted(range(len(paragraphs)), key=lambda i: (-weights[i], i)):
        if spent + sizes[i] > budget:
            continue
        chosen.add(i)
        spent += sizes[i]
    return chosen


def compact(text: str) -> str:
    """Paragraphs with their inner whitespace collapsed, separated by blank lines."""
    return "\n\n".join(normalise_space(p.text) for p in split_paragraphs(text))


def split_parts(passage: str, max_words: int) -> list[str]:
    """Cut a compacted passage at paragraph breaks into parts of at most `max_words` words."""
    parts: list[str] = []
    current: list[str] = []
    count = 0
    for paragraph in passage.split("\n\n"):
        words = paragraph.split()
        chunks = [" ".join(words[i:i + max_words]) for i in range(0, len(words), max_words)] or [""]
        for chunk in chunks:
            size = len(chunk.split())
            if current and count + size > max_words:
                parts.append("\n\n".join(current))
                current, count = [], 0
            if chunk:
                current.append(chunk)
                count += size
    if current:
        parts.append("\n\n".join(current))
    return parts or [passage]


def clip(text: str, words: int) -> str:
    parts = text.split()
    return " ".join(parts) if len(parts) <= words else " ".join(parts[:words]) + " …"


def clip_sentence(text: str, words: int) -> str:
    """A digest sentence clipped to `words`; one cut by the start or end of a presence span is marked cut
    there too, so it never runs into a neighbouring sentence of the note."""
    clipped = clip(text, words)
    if clipped and not clipped.endswith(("…", ".", "!", "?", '"', "”", "’", "'")):
        clipped += " …"
    return f"… {clipped}" if clipped[:1].islower() else clipped


# -- the deterministic digest ----------------------------------------------------


class _Digester:
    """Extractive digests of a character's presence passages."""

    def __init__(self, book: Book, character: Character, utterances: pl.DataFrame):
        self.book = book
        self.character = character
        self.matcher = AliasMatcher(book.characters)
        self.speech = utterances.filter(pl.col("speaker") == character.slug).sort("start") \
            if utterances.height else utterances
        self.speakers = {int(r["start"]): r["speaker"] for r in utterances.iter_rows(named=True) if r["speaker"]} \
            if utterances.height else {}

    def _hidden(self, presence: ScenePresence) -> list[tuple[int, int]]:
        """Sentences of the presence passage that the Semantic layer gives to nobody present but the
        character's own (a thought of another's, backstory nobody there perceives): left out of the note, so
        that the note holds nothing the character's facts do not."""
        units = evidence_units(self.book, [(presence.scene_id, a, b) for a, b in presence.spans], self.speakers)
        return [(u.evidence_start, u.evidence_end) for u in units
                if all(st.private for st in u.evidence_facts.statements)
                and self.character.slug not in u.evidence_facts.participants]

    def digest(self, presence: ScenePresence) -> Summary:
        text = self.book.text
        paragraphs = [p for start, end in presence.spans for p in split_paragraphs(text, start, end)]
        sentences: list[Sentence] = []
        acting: list[Sentence] = []
        feeling: list[Sentence] = []
        hidden = self._hidden(presence)
        for paragraph in paragraphs:
            spans, _ = quote_spans(paragraph)
            found = [s for s in sentences_of(paragraph) if not any(a < s.end and s.start < b for a, b in hidden)]
            sentences.extend(found)
            mentions = [m for m in self.matcher.find(text, paragraph.start, paragraph.end)
                        if m.character == self.character.slug and not in_spans(m.start, spans)]
            narrating = any(a <= paragraph.start < b for a, b in self.character.narrator_spans)
            anchors = [m.start for m in mentions]
            if narrating:
                mentions.extend(self._self_references(paragraph, spans))
                anchors.extend(paragraph.start + m.start() for m in _FIRST_PERSON_ANY.finditer(paragraph.text)
                               if not in_spans(paragraph.start + m.start(), spans))
            previous_acting = False
            for sentence in found:
                inside = [m for m in mentions if sentence.start <= m.start < sentence.end]
                acts = any(is_action_subject(text, m, _fragment_start(paragraph, spans, m.start)) for m in inside)
                near = [a for a in anchors if sentence.start <= a < sentence.end]
                if not acts and previous_acting and self._pronoun_acts(sentence, spans):
                    acts = True
                    near.append(sentence.start)
                if acts:
                    acting.append(sentence)
                if near and (_exclaims(text, sentence) or _feeling_near(text, sentence, spans, near)):
                    feeling.append(sentence)
                previous_acting = acts
        said = self._speech(presence)
        understanding = " ".join(p for p in (_setting_phrase(presence), _opening_and_close(sentences)) if p)
        # what I did and said, in the order it happened
        actions = sorted([(s.start, clip_sentence(s.text, SENTENCE_WORDS)) for s in acting[:MAX_ACTIONS]]
                         + [(start, f"I said: “{clip(u, SENTENCE_WORDS)}”") for start, u in said[:MAX_SPEECH]])
        emotions = [(s.start, clip_sentence(s.text, SENTENCE_WORDS)) for s in feeling[:MAX_EMOTIONS]]
        emotions += [(start, f"“{clip(u, SENTENCE_WORDS)}”") for start, u in said
                     if u.rstrip().endswith("!") or _EMOTION.search(u)][: max(0, MAX_EMOTIONS - len(emotions))]
        return Summary(understanding, " ".join(a for _, a in actions), " ".join(e for _, e in sorted(emotions)))

    def _self_references(self, paragraph: Paragraph, spans: Sequence[tuple[int, int]]) -> list[Mention]:
        """'I' in the narration of a paragraph the character narrates."""
        return [
            Mention(self.character.slug, paragraph.start + m.start(), paragraph.start + m.end(), "I", "name", False)
            for m in _FIRST_PERSON.finditer(paragraph.text)
            if not in_spans(paragraph.start + m.start(), spans)
        ]

    def _pronoun_acts(self, sentence: Sentence, spans: Sequence[tuple[int, int]]) -> bool:
        """A sentence opening with the character's pronoun, right after one where they act."""
        pronouns = _PRONOUNS.get(self.character.gender)
        if pronouns is None or in_spans(sentence.start, spans):
            return False
        first = sentence.text.split(" ", 1)[0]
        if first not in pronouns:
            return False
        mention = Mention(self.character.slug, sentence.start, sentence.start + len(first), first, "name", False)
        return is_action_subject(self.book.text, mention, sentence.start)

    def _speech(self, presence: ScenePresence) -> list[tuple[int, str]]:
        """The character's attributed utterances within the presence spans (none from a gap): (offset, text)."""
        if not self.speech.height:
            return []
        rows = self.speech.filter(
            (pl.col("scene_id") == presence.scene_id) & (pl.col("start") >= presence.source_start)
            & (pl.col("start") < presence.source_end)
        )
        return [(int(start), normalise_space(t)) for start, t in zip(rows["start"].to_list(), rows["text"].to_list())
                if t and t.strip() and any(a <= start < b for a, b in presence.spans)]


def _fragment_start(paragraph: Paragraph, spans: Sequence[tuple[int, int]], position: int) -> int:
    return max([paragraph.start] + [b for a, b in spans if b <= position])


def _exclaims(text: str, sentence: Sentence) -> bool:
    """The narration itself ends the sentence with "!" (not a quoted speaker)."""
    return text[sentence.start:sentence.end].rstrip().endswith("!")


def _feeling_near(text: str, sentence: Sentence, spans: Sequence[tuple[int, int]], anchors: Sequence[int]) -> bool:
    """An emotion word in the narration, close after (or just before) a reference to the character."""
    for match in _EMOTION.finditer(text, sentence.start, sentence.end):
        if in_spans(match.start(), spans):
            continue
        if any(-EMOTION_BEFORE <= match.start() - anchor <= EMOTION_AFTER for anchor in anchors):
            return True
    return False


def _setting_phrase(presence: ScenePresence) -> str:
    where = ", ".join(p for p in (presence.location, presence.time) if p)
    mood = f" ({presence.atmosphere})" if presence.atmosphere else ""
    return f"Setting: {where}{mood}." if where else (f"Mood: {presence.atmosphere}." if mood else "")


def _opening_and_close(sentences: Sequence[Sentence], each: int = 2) -> str:
    """The first and last sentences of a passage, passing over headings and signatures."""
    sentences = [s for s in sentences if len(s.text.split()) >= MIN_SENTENCE_WORDS] or list(sentences)
    if len(sentences) <= 2 * each:
        return " ".join(clip_sentence(s.text, SENTENCE_WORDS) for s in sentences)
    head = " ".join(clip_sentence(s.text, SENTENCE_WORDS) for s in sentences[:each])
    tail = " ".join(clip_sentence(s.text, SENTENCE_WORDS) for s in sentences[-each:])
    return f"{head} {tail}" if head.endswith("…") else f"{head} … {tail}"
