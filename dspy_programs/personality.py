"""Dialogue annotation and personality patterns as DSPy programs.

The prompts live here only, as signature docstrings and field descriptions.
Programs are pure: plain inputs in, `dspy.Prediction` out; callers run them
through `reveriemem.models.run_program`. Prompts stay short on purpose: a
scene is annotated in one call that carries only its focus characters' lines,
each with a few words of what came just before, never the whole scene.
"""

from __future__ import annotations

from typing import Literal

import dspy
from pydantic import BaseModel, Field

# Plutchik's eight basic emotions plus neutral.
EMOTIONS: tuple[str, ...] = (
    "joy", "trust", "fear", "surprise", "sadness", "disgust", "anger", "anticipation", "neutral",
)
Emotion = Literal["joy", "trust", "fear", "surprise", "sadness", "disgust", "anger", "anticipation", "neutral"]


class LineAnnotation(BaseModel):
    n: int = Field(description="line number")
    emotion: Emotion = Field(description="feeling shown")
    intensity: int = Field(description="1 faint to 5 overwhelming")
    trigger: str = Field(description="what provoked it, a few words")
    intent: str = Field(description="the speaker's aim, a few words")


class AnnotateDialogue(dspy.Signature):
    """Numbered lines from one scene of a novel, in order: speaker, a bracketed
    hint of what came just before (none: it follows the line above), words.
    For every line judge the feeling shown, its strength, what set it off,
    and the speaker's aim."""

    lines: str = dspy.InputField()
    annotations: list[LineAnnotation] = dspy.OutputField(desc="one per line")


class DescribePattern(dspy.Signature):
    """Lines a character of a novel speaks in similar situations, each tagged
    (feeling strength, act). In one line, name the behavioural register they
    share: mood, manner of speaking, stance towards others (e.g. 'clipped,
    impatient orders to subordinates'). No plot details, no other names."""

    character: str = dspy.InputField()
    lines: list[str] = dspy.InputField()
    description: str = dspy.OutputField(desc="at most 25 words")


def annotate_dialogue_program() -> dspy.Module:
    return dspy.Predict(AnnotateDialogue)


def describe_pattern_program() -> dspy.Module:
    return dspy.Predict(DescribePattern)
