"""Scoring scenes and rosters against a gold annotation (docs/formats.md)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from reveriemem.core.text import find_text
from reveriemem.models import ModelHandle
from reveriemem.source_to_memory.preparation import judge_rosters, prepare_scenes
from reveriemem.source_to_memory.reading import BookReading
from reveriemem.source_to_memory.scenes import Span


@dataclass
class RosterScore:
    method: str
    correct: int
    total: int
    boundary_precision: float
    boundary_recall: float
    confusion: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0


def gold_scene_spans(reading: BookReading, gold: dict[str, Any]) -> list[Span]:
    """Gold scenes as spans of the book's prose paragraphs, from their start markers."""
    text = reading.book.text
    starts = []
    for scene in gold["scenes"]:
        offset = find_text(text, scene["start_marker"], reading.book.body_start)
        if offset < 0:
            raise ValueError(f"Gold start marker not found: {scene['start_marker']!r}")
        starts.append(offset)
    prose = [p for span in reading.candidates for p in span.paragraphs]
    spans = []
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else reading.book.body_end + 1
        members = [p for p in prose if start <= reading.paragraphs[p].start < end]
        spans.append(Span(chapter=0, chapter_title="", first=members[0], last=members[-1], boundary="gold",
                          words=sum(reading.paragraphs[p].words for p in members), paragraphs=members))
    return spans


def boundary_scores(predicted: list[Span], gold: list[Span]) -> tuple[float, float]:
    """Precision and recall of scene starts (paragraph indices), the first scene excluded."""
    p = {s.first for s in predicted[1:]}
    g = {s.first for s in gold[1:]}
    hits = len(p & g)
    return (hits / len(p) if p else 1.0), (hits / len(g) if g else 1.0)


def score_rosters(reading: BookReading, gold: dict[str, Any], handle: ModelHandle) -> RosterScore:
    """Roster accuracy over gold scenes x characters, plus scene-boundary precision/recall.

    Rosters are judged on the gold scene spans, so segmentation errors do not
    hide roster errors; segmentation is scored separately.
    """
    gold_spans = gold_scene_spans(reading, gold)
    evidence = reading.roster_evidence(gold_spans)
    judged, method, _ = judge_rosters(reading, gold_spans, evidence, handle)
    names = {c.slug: c.name for c in reading.book.characters}
    correct = total = 0
    confusion: Counter = Counter()
    errors = []
    for scene, predicted in zip(gold["scenes"], judged):
        for slug, (status, _) in predicted.items():
            expected = scene["roster"][names[slug]]
            total += 1
            correct += status == expected
            confusion[(expected, status)] += 1
            if status != expected:
                errors.append(f"scene {scene['id']} {names[slug]}: gold {expected}, got {status}")
    prepared = prepare_scenes(reading, handle)
    precision, recall = boundary_scores(prepared.scenes, gold_spans)
    return RosterScore(method, correct, total, precision, recall, confusion, errors)
