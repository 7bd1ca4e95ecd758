"""Scene preparation: the paper's LLM-guided merging of candidate spans into
scenes, their setting, and rosters that combine deterministic evidence with
the model's judgement. With no model (`handle.lm is None`) every step takes
its deterministic fallback; each row records the method that produced it.
A boundary or scene whose model output fails after retries falls back too,
and is counted in `failures`, so one bad answer never loses the book.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dspy_programs.scenes import scene_boundary_program, scene_roster_program, scene_setting_program
from reveriemem.core import progress
from reveriemem.core.errors import ModelOutputError
from reveriemem.core.text import normalise_space
from reveriemem.models import ModelHandle, map_calls, run_program
from reveriemem.source_to_memory.reading import (
    HEURISTIC_METHOD,
    MAX_SCENE_WORDS,
    ROSTER_METHOD,
    BookReading,
    Setting,
    heuristic_setting,
    presence_offsets,
)
from reveriemem.source_to_memory.rosters import STATUSES, RosterEvidence
from reveriemem.source_to_memory.scenes import HARD_BOUNDARIES, Span, heuristic_boundaries, merge_spans, split_long

log = logging.getLogger(__name__)

MIN_MODEL_SCENE_WORDS = 120
CONTEXT_WORDS = 80
RANK = {status: rank for rank, status in enumerate(reversed(STATUSES))}  # absent=0 ... present_active=3


@dataclass
class PreparedScenes:
    scenes: list[Span]
    settings: list[Setting]
    method: str
    setting_methods: list[str]
    failures: list[str] = field(default_factory=list)


def _words(text: str) -> list[str]:
    return normalise_space(text).split()


def span_text(reading: BookReading, span: Span) -> str:
    first, last = reading.paragraphs[span.first], reading.paragraphs[span.last]
    return reading.book.text[first.start : last.end]


def prepare_scenes(reading: BookReading, handle: ModelHandle) -> PreparedScenes:
    candidates = reading.candidates
    failures: list[str] = []
    if handle.lm is None:
        keep = heuristic_boundaries(candidates)
        method = HEURISTIC_METHOD
    else:
        fallback = heuristic_boundaries(candidates)
        program = scene_boundary_program()
        keep = []
        step = "scenes (boundaries)"
        progress.step_started(reading.book.slug, step, sum(s.boundary not in HARD_BOUNDARIES for s in candidates))

        def ask_boundary(index: int) -> Any:
            before = " ".join(_words(span_text(reading, candidates[index - 1]))[-CONTEXT_WORDS:])
            after = " ".join(_words(span_text(reading, candidates[index]))[:CONTEXT_WORDS])
            return run_program(handle, program, passage_before=before, passage_after=after)

        soft = [i for i, span in enumerate(candidates) if span.boundary not in HARD_BOUNDARIES]
        answers = dict(zip(soft, map_calls(handle, ask_boundary, soft)))
        for index, span in enumerate(candidates):
            if span.boundary in HARD_BOUNDARIES:
                keep.append(True)
                continue
            try:
                prediction = answers[index].result()
                keep.append(bool(prediction.new_scene))
            except ModelOutputError as exc:
                failures.append(f"boundary before paragraph {span.first}: {exc}")
                keep.append(fallback[index])
            progress.unit_done(reading.book.slug, step)
        keep = _enforce_min_words(candidates, keep, MIN_MODEL_SCENE_WORDS)
        method = f"model:{handle.name}+{HEURISTIC_METHOD}"
    scenes = split_long(merge_spans(candidates, keep), reading.paragraphs, MAX_SCENE_WORDS)
    settings: list[Setting] = []
    setting_methods: list[str] = []
    setting_program = scene_setting_program() if handle.lm is not None else None
    names = [n for c in reading.book.characters for n in (c.name, *c.aliases)]
    if setting_program is not None:
        progress.step_started(reading.book.slug, "scenes (settings)", len(scenes))

    def ask_setting(scene: Span) -> Any:
        words = _words(span_text(reading, scene))
        excerpt = " ".join(words[:250]) + (" ... " + " ".join(words[-80:]) if len(words) > 330 else "")
        return run_program(handle, setting_program, scene_text=excerpt)

    setting_answers = map_calls(handle, ask_setting, scenes if setting_program is not None else [])
    for number, scene in enumerate(scenes):
        text = span_text(reading, scene)
        guess = heuristic_setting(text, names)
        if setting_program is None:
            settings.append(guess)
            setting_methods.append(HEURISTIC_METHOD)
            continue
        try:
            prediction = setting_answers[number].result()
            settings.append(Setting(
                location=str(prediction.location or guess.location).strip(),
                time=str(prediction.time or guess.time).strip(),
                atmosphere=str(prediction.atmosphere or "").strip(),
            ))
            setting_methods.append(f"model:{handle.name}")
        except ModelOutputError as exc:
            failures.append(f"setting of scene at paragraph {scene.first}: {exc}")
            settings.append(guess)
            setting_methods.append(HEURISTIC_METHOD)
        progress.unit_done(reading.book.slug, "scenes (settings)")
    return PreparedScenes(scenes, settings, method, setting_methods, failures)


def _enforce_min_words(spans: Sequence[Span], keep: list[bool], min_words: int) -> list[bool]:
    """Undo soft boundaries that would leave a scene shorter than `min_words`."""
    result = list(keep)
    words_since = 0
    for index, span in enumerate(spans):
        hard = span.boundary in HARD_BOUNDARIES
        if index > 0 and result[index] and not hard and words_since < min_words:
            result[index] = False
        if result[index]:
            words_since = 0
        words_since += span.words
    return result


def evidence_floor(record: RosterEvidence) -> str:
    """The least status the hard evidence allows: speech, address, mention."""
    if record.utterances or record.narration:
        return "present_active"
    if record.addressed:
        return "present_silent"
    if record.mentions:
        return "referenced"
    return "absent"


def combine_status(record: RosterEvidence, model_status: str | None) -> str:
    """The model may raise a status above the hard-evidence floor, never lower it.

    Soft evidence (narrated actions) only shapes the heuristic status, which
    the model's judgement replaces when there is one.
    """
    if model_status not in RANK:
        return record.status()
    floor = evidence_floor(record)
    return model_status if RANK[model_status] >= RANK[floor] else floor


def evidence_notes(reading: BookReading, evidence: dict[str, RosterEvidence]) -> str:
    names = {c.slug: c.name for c in reading.book.characters}
    lines = []
    for slug, record in evidence.items():
        lines.append(
            f"{names[slug]}: named {record.mentions} times, quoted speaking {record.utterances} times, "
            f"addressed {record.addressed} times, narrating {record.narration} paragraphs, "
            f"acting in narration {record.actions} times"
        )
    return "\n".join(lines)


def roster_excerpt(reading: BookReading, scene: Span, max_words: int = 900) -> str:
    """The scene itself when short; else the paragraphs that name a character, with their neighbours."""
    text = span_text(reading, scene)
    if len(_words(text)) <= max_words:
        return normalise_space(text)
    chosen: list[int] = []
    for index in scene.paragraphs:
        if index in reading.mentions_by_paragraph:
            chosen.extend(i for i in (index - 1, index, index + 1) if scene.first <= i <= scene.last)
    pieces, total = [], 0
    for index in sorted(set(chosen)):
        words = _words(reading.paragraphs[index].text)
        if total + len(words) > max_words:
            break
        pieces.append(" ".join(words))
        total += len(words)
    return " [...] ".join(pieces)


def judge_rosters(
    reading: BookReading,
    scenes: Sequence[Span],
    evidence: Sequence[dict[str, RosterEvidence]],
    handle: ModelHandle,
) -> tuple[list[dict[str, tuple[str, str | None]]], str, list[str]]:
    """Per scene, per character slug: (final status, model status or None)."""
    failures: list[str] = []
    results: list[dict[str, tuple[str, str | None]]] = []
    if handle.lm is None:
        for scene_evidence in evidence:
            results.append({slug: (record.status(), None) for slug, record in scene_evidence.items()})
        return results, ROSTER_METHOD, failures
    program = scene_roster_program()
    by_name = {c.name.lower(): c.slug for c in reading.book.characters}
    listing = [
        f"{c.name} ({', '.join(c.aliases + c.descriptors)})" if c.aliases or c.descriptors else c.name
        for c in reading.book.characters
    ]
    progress.step_started(reading.book.slug, "scene_rosters", len(scenes))

    def ask_roster(pair: tuple[Span, dict[str, RosterEvidence]]) -> Any:
        return run_program(
            handle, program, scene_text=roster_excerpt(reading, pair[0]), characters=listing,
            evidence=evidence_notes(reading, pair[1]),
        )

    answers = map_calls(handle, ask_roster, list(zip(scenes, evidence)))
    for scene, scene_evidence, answer in zip(scenes, evidence, answers):
        judged: dict[str, str] = {}
        try:
            prediction = answer.result()
            for entry in prediction.roster or []:
                slug = by_name.get(str(entry.character).split("(")[0].strip().lower())
                if slug:
                    judged[slug] = entry.status
        except ModelOutputError as exc:
            failures.append(f"roster of scene at paragraph {scene.first}: {exc}")
        progress.unit_done(reading.book.slug, "scene_rosters")
        results.append({
            slug: (combine_status(record, judged.get(slug)), judged.get(slug))
            for slug, record in scene_evidence.items()
        })
    return results, f"model:{handle.name}+{ROSTER_METHOD}", failures


def roster_rows(
    reading: BookReading,
    spans: Sequence[Span],
    evidence: Sequence[dict[str, RosterEvidence]],
    judged: Sequence[dict[str, tuple[str, str | None]]],
    method: str,
) -> list[dict[str, Any]]:
    """Rows of the `scene_rosters` table: status, evidence counts and presence offsets per scene and character.

    A character judged present without a paragraph of presence evidence (the
    model raised them) is present over the whole scene, up to their death. A
    character dead before the scene opens is never present in it ("just as he
    had when Lucy died" is no act of Lucy's), whatever the evidence or a model said.
    """
    book = reading.book
    names = {c.slug: c.name for c in book.characters}
    deaths = reading.deaths
    rows = []
    for scene_id, (span, scene_evidence, scene_judged) in enumerate(zip(spans, evidence, judged), start=1):
        scene_start, scene_end = reading.paragraphs[span.first].start, reading.paragraphs[span.last].end
        for slug, record in scene_evidence.items():
            status, model_status = scene_judged[slug]
            death = deaths.get(slug)
            if death is not None and death <= scene_start and status.startswith("present"):
                status = "referenced" if record.mentions or record.addressed else "absent"
            present_start, present_end = presence_offsets(reading, record, span)
            if status.startswith("present") and present_start is None:
                present_start, present_end = scene_start, scene_end if death is None else min(scene_end, death)
            if not status.startswith("present"):
                present_start = present_end = None
            presence = [list(span) for span in record.spans] if status.startswith("present") else []
            if status.startswith("present") and not presence and present_start is not None and present_end is not None:
                presence = [[present_start, present_end]]
            rows.append({
                "book": book.slug, "scene_id": scene_id, "character": slug, "character_name": names[slug],
                "status": status, "heuristic_status": record.status(), "model_status": model_status,
                "utterances": record.utterances, "narration": record.narration, "addressed": record.addressed,
                "actions": record.actions, "mentions": record.mentions, "present_start": present_start,
                "present_end": present_end, "presence_spans": presence, "first_offset": record.first_offset,
                "scene_start": scene_start, "scene_end": scene_end, "method": method,
            })
    return rows
