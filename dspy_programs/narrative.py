"""The model steps of Task 2 (stories played by characters, and their pairwise judge), as DSPy programs.

A director turns one stage of a plot script into a goal per character; characters act
(ReverieMem's characters act through their own agent, `dspy_programs.inference`; the
profile-driven reference methods through `ActFromProfile`); a narrator turns the action
log into prose. `WriteWholeStory` is the single-call reference method, `DraftOutline` and
`ReviseOutline` the writer and editor of the screenplay-style method. `JudgeStoryPair`
compares two stories on one dimension. `DraftScript` proposes a plot script from a
book's scene memory. The prompts live here only, in our own words.
"""

from __future__ import annotations

from typing import Literal

import dspy

ACTION_FORM = ("one move written as [private thought] (visible action) spoken words; any part may be "
               "left out; at most about 40 words")


class DirectStage(dspy.Signature):
    """You direct an improvised scene played by characters from a novel. Turn the current
    stage of the plot into one concrete goal for each character taking part, so that
    playing those goals makes the stage happen. Reveal nothing of later stages, and do not
    hand a character knowledge it has no way to have: say what it wants or does, not what
    it should learn."""

    world: str = dspy.InputField(desc="the setting of the story")
    stage: str = dspy.InputField(desc="what must happen in this part of the plot")
    cast: list[str] = dspy.InputField(desc="the characters taking part, each with where they are")
    events: list[str] = dspy.InputField(desc="what has visibly happened so far, oldest first")
    goals: list[str] = dspy.OutputField(desc="one line per character, written 'Name: goal'")


class ActFromProfile(dspy.Signature):
    """Play one character of a novel for a single move in an improvised scene. Stay true to
    the profile, pursue the goal, and answer what just happened. Write the move as a private
    thought in square brackets, a visible action in round brackets, and then the spoken
    words; keep it short."""

    character: str = dspy.InputField(desc="the character you play")
    profile: str = dspy.InputField(desc="who the character is")
    world: str = dspy.InputField(desc="the setting and the character's place in it")
    goal: str = dspy.InputField(desc="what the character wants in this part of the scene")
    history: list[str] = dspy.InputField(desc="the recent moves of the scene, oldest first")
    move: str = dspy.OutputField(desc=ACTION_FORM)


class NarrateLog(dspy.Signature):
    """Rewrite the log of an improvised scene as a passage of the novel it comes from, in
    that book's register. Keep every event and the gist of every spoken line, in order.
    Render a character's private thoughts in close third person, as that character's inner
    life only: no other character may react to them."""

    book: str = dspy.InputField(desc="the novel's title and setting")
    log: list[str] = dspy.InputField(desc="the moves in order, each 'Name [thought] (action) speech'")
    story: str = dspy.OutputField(desc="the scene as continuous prose")


class WriteWholeStory(dspy.Signature):
    """Write a scene of a novel in which the named characters play out the given plot, in
    the book's register, from the character profiles alone."""

    book: str = dspy.InputField(desc="the novel's title and setting")
    profiles: list[str] = dspy.InputField(desc="one line per character: name and profile")
    plot: str = dspy.InputField(desc="the plot to play out, stage by stage, or the opening event")
    story: str = dspy.OutputField(desc="the scene as continuous prose with dialogue")


class DraftOutline(dspy.Signature):
    """As the writer of a screenplay adapted from a novel, draft a beat outline of the scene
    the plot describes: one beat per line, each naming the character who acts."""

    book: str = dspy.InputField(desc="the novel's title and setting")
    profiles: list[str] = dspy.InputField(desc="one line per character: name and profile")
    plot: str = dspy.InputField(desc="the plot to play out")
    beats: list[str] = dspy.OutputField(desc="the outline, one beat per line, written 'Name: what they do'")


class ReviseOutline(dspy.Signature):
    """As the editor, revise a writer's beat outline so that it follows the plot, keeps every
    character in character, and flows; return the revised outline in the same form."""

    plot: str = dspy.InputField(desc="the plot to play out")
    profiles: list[str] = dspy.InputField(desc="one line per character: name and profile")
    beats: list[str] = dspy.InputField(desc="the writer's outline, one beat per line")
    revised: list[str] = dspy.OutputField(desc="the revised outline, one beat per line, 'Name: what they do'")


class JudgeStoryPair(dspy.Signature):
    """You are a literary critic. Two stories were generated for the same plot and the same
    characters of a novel. Compare them on ONE dimension only, using its criteria, and name
    the better one, or 'tie' when neither is better on this dimension. Text in square
    brackets is a character's unspoken thought, text in round brackets a visible action.
    Judge the texts, not their length or their order."""

    dimension: str = dspy.InputField(desc="the dimension's name and criteria")
    profiles: list[str] = dspy.InputField(desc="the main characters: name and profile")
    scenario: str = dspy.InputField(desc="the plot the stories were written for, or its opening event")
    story_a: str = dspy.InputField(desc="story A")
    story_b: str = dspy.InputField(desc="story B")
    better: Literal["A", "B", "tie"] = dspy.OutputField(desc="A, B, or tie")


class DraftScript(dspy.Signature):
    """Propose a plot script for an improvised scene, taken from what happens in a stretch of
    a novel: a short title, and two to four stages, each one sentence saying what happens,
    in story order. Use only the characters listed and the events of the scenes given."""

    book: str = dspy.InputField(desc="the novel's title")
    characters: list[str] = dspy.InputField(desc="the characters who take part")
    scenes: list[str] = dspy.InputField(desc="summaries of consecutive scenes of the book, in order")
    title: str = dspy.OutputField(desc="a short title for the script")
    stages: list[str] = dspy.OutputField(desc="two to four stages, one sentence each")


def direct_stage_program() -> dspy.Module:
    return dspy.Predict(DirectStage)


def act_from_profile_program() -> dspy.Module:
    return dspy.Predict(ActFromProfile)


def narrate_program() -> dspy.Module:
    return dspy.Predict(NarrateLog)


def whole_story_program() -> dspy.Module:
    return dspy.Predict(WriteWholeStory)


def outline_program() -> dspy.Module:
    return dspy.Predict(DraftOutline)


def revise_outline_program() -> dspy.Module:
    return dspy.Predict(ReviseOutline)


def judge_program() -> dspy.Module:
    return dspy.Predict(JudgeStoryPair)


def draft_script_program() -> dspy.Module:
    return dspy.Predict(DraftScript)


# The turn a ReverieMem character is asked to take, put to its own agent as the question
# (the agent's Memory-Fusion writes the move from the character's bounded memory).
MOVE_REQUEST = ("You are at {location}, with {company}. What you want now: {goal} "
                "Make your next move, written as [your private thought] (what you visibly do) "
                "then what you say aloud; at most about 40 words.")
