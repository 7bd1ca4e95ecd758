"""Dialogue records: every focus character's utterance annotated with an
(emotion, intensity, trigger) triple and the speaker's intent, and, in story
order, each character's emotion-transition record (paper: "Personality
clustering", first half).

Two annotators share one output shape (`Annotation`):

- the model path sends a scene's focus-speaker lines (numbered, each with a
  few words of what came before, never the whole scene) in one call of
  `dspy_programs.personality.AnnotateDialogue`; a scene whose output never
  parses falls back to the deterministic annotator, its rows say so in
  `method` and the reason in `error`, and the rest of the book goes on;
- the deterministic annotator: the lexicon reader of
  `reveriemem.source_to_memory.emotions`, with the trigger taken from the
  line of another speaker or the narration just before.

The form of an utterance (`act`) is always computed deterministically, so
every row has a comparable label whichever annotator produced the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from dspy_programs.personality import annotate_dialogue_program
from reveriemem.core.text import Paragraph, normalise_space, split_sentences
from reveriemem.models import ModelHandle, StepOutcome, map_calls, run_or_fallback, run_program
from reveriemem.source_to_memory.emotions import (
    ACT_INTENT,
    HEURISTIC_METHOD,
    read_utterance,
    utterance_act,
)

log = logging.getLogger(__name__)

MAX_LINES_PER_CALL = 40  # a scene with more focus lines is annotated in several calls
PROMPT_LINE_WORDS = 45  # a long speech is cut to its opening in the prompt
HINT_WORDS = 10  # the "before" hint in the prompt
TRIGGER_WORDS = 20  # the deterministic trigger


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


def lexicon_annotations(batch: Sequence[Line], context: Context) -> list[Annotation]:
    """The deterministic twin of `model_annotations`: the lexicon's annotation of every line of a call."""
    return [heuristic_annotation(line, context) for line in batch]


def model_annotations(handle: ModelHandle, program: Any, batch: Sequence[Line], context: Context) -> list[Annotation]:
    """The model's annotation of every line of one call; a line it gives none for takes the lexicon's."""
    prediction = run_program(handle, program, lines=prompt_lines(batch, context))
    given: dict[int, Any] = {}
    for entry in prediction.annotations or []:
        given.setdefault(int(entry.n), entry)
    annotated: list[Annotation] = []
    for n, line in enumerate(batch, start=1):
        entry = given.get(n)
        if entry is None:
            annotated.append(heuristic_annotation(
                line, context, error="the model gave no annotation for this line; lexicon used"))
            continue
        act = utterance_act(line.text)
        annotated.append(Annotation(
            emotion=str(entry.emotion), intensity=max(1, min(5, int(entry.intensity))),
            trigger=normalise_space(str(entry.trigger or "")), intent=normalise_space(str(entry.intent or ""))
            or ACT_INTENT[act], act=act, method=f"model:{handle.name}"))
    return annotated


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
    program = annotate_dialogue_program()
    annotations: dict[int, Annotation] = {}
    failures: list[str] = []
    scene_ids = sorted(set(first_paragraph) | set(by_scene))

    def annotate(batch: list[Line]) -> StepOutcome[list[Annotation]]:
        return run_or_fallback(handle, partial(model_annotations, program=program, batch=batch, context=context),
                               partial(lexicon_annotations, batch, context), fallback_method=HEURISTIC_METHOD)

    batches = [group[offset:offset + MAX_LINES_PER_CALL] for scene_id in scene_ids
               for group in [by_scene.get(scene_id, [])] for offset in range(0, len(group), MAX_LINES_PER_CALL)]
    outcomes = iter(map_calls(handle, annotate, batches))
    for scene_id in scene_ids:
        scene_lines = by_scene.get(scene_id, [])
        for offset in range(0, len(scene_lines), MAX_LINES_PER_CALL):
            batch = scene_lines[offset:offset + MAX_LINES_PER_CALL]
            outcome = next(outcomes).result()
            annotated = outcome.value
            if outcome.error is not None:
                failures.append(f"scene {scene_id}: {outcome.error}")
                log.warning("Scene %s: fell back to the lexicon annotator: %s", scene_id, outcome.error)
                reason = f"model output never parsed, fell back to the lexicon: {outcome.error}"
                annotated = [replace(annotation, error=reason) for annotation in annotated]
            for line, annotation in zip(batch, annotated):
                annotations[line.start] = annotation
        if on_scene is not None:
            on_scene(scene_id)
    method = HEURISTIC_METHOD if handle.lm is None else f"model:{handle.name}"
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
