"""Scene preparation as DSPy programs: where scenes begin, their setting, and rosters.

The prompts live here only, as signature docstrings and field descriptions.
Programs are pure: plain inputs in, `dspy.Prediction` out; callers run them
under `dspy.context(lm=...)` (see `reveriemem.models.run_program`).
"""

from __future__ import annotations

from typing import Literal

import dspy
from pydantic import BaseModel, Field

RosterStatus = Literal["present_active", "present_silent", "referenced", "absent"]


class SceneContinuity(dspy.Signature):
    """You segment a novel into scenes: dramatic units of continuous action in one
    place and stretch of time. Two consecutive passages are shown. Say whether the
    second passage starts a new scene (the place, the time or the group of people
    changes, or the narrative jumps elsewhere) or carries on the same one."""

    passage_before: str = dspy.InputField(desc="the last lines of the earlier passage")
    passage_after: str = dspy.InputField(desc="the first lines of the passage that follows it")
    new_scene: bool = dspy.OutputField(desc="true if the second passage opens a new scene, false if it continues")


class SceneSetting(dspy.Signature):
    """Read the opening and the close of one scene of a novel and describe its setting
    briefly, using only what the text says or clearly implies."""

    scene_text: str = dspy.InputField(desc="the beginning and the end of the scene")
    location: str = dspy.OutputField(desc="where the scene takes place, a short phrase")
    time: str = dspy.OutputField(desc="when it takes place (time of day, date or period), a short phrase")
    atmosphere: str = dspy.OutputField(desc="the mood of the scene in a few words")


class CharacterStatus(BaseModel):
    character: str = Field(description="the character's canonical name, exactly as listed")
    status: RosterStatus = Field(
        description=(
            "present_active: physically there for part of the scene and speaks; present_silent: "
            "there but never speaks; referenced: only talked or thought about; absent: not there and not mentioned"
        )
    )


class SceneRoster(dspy.Signature):
    """Decide, for each listed character, what part they play in this scene of a novel.
    Being named is not being present: a character who is only talked about is
    referenced; one who arrives late is present from the arrival; a first-person
    narrator who narrates the scene is present. Unnamed people in the text (a
    cabman, a stranger) may be a listed character if the text allows it."""

    scene_text: str = dspy.InputField(desc="the scene, or the passages of it that concern the characters")
    characters: list[str] = dspy.InputField(desc="the characters to judge, each as 'Name (aliases...)'")
    evidence: str = dspy.InputField(desc="mechanical notes: who is named, who is quoted speaking, who narrates")
    roster: list[CharacterStatus] = dspy.OutputField(desc="one entry for every listed character")


def scene_boundary_program() -> dspy.Module:
    return dspy.Predict(SceneContinuity)


def scene_setting_program() -> dspy.Module:
    return dspy.Predict(SceneSetting)


def scene_roster_program() -> dspy.Module:
    return dspy.Predict(SceneRoster)
