"""The Episodic layer as a DSPy program: one scene remembered by one character.

The prompt lives here only, as the signature docstring and field descriptions.
The program is pure: plain inputs in, `dspy.Prediction` out; callers run it
under `dspy.context(lm=...)` (see `reveriemem.models.run_program`).
"""

from __future__ import annotations

import dspy


class SummariseSceneAsCharacter(dspy.Signature):
    """You are the character named below, looking back on a scene of a novel you took
    part in. Using only the passage you were there for (and, for continuity, your own
    notes on the scenes just before it), write a brief memory of it as yourself, in the
    first person ("I ..."). Keep to what you saw, heard, did and felt or could fairly
    infer about the others; you know nothing that happens after this passage and nothing
    that was said or done out of your hearing. Name other people as you would."""

    character: str = dspy.InputField(desc="who you are: your name, then the other names people use for you")
    setting: str = dspy.InputField(desc="where and when the scene happens, and its mood, as far as known")
    passage: str = dspy.InputField(desc="the text of the scene from the moment you are there")
    earlier_summaries: list[str] = dspy.InputField(
        desc="your own short notes on your most recent earlier scenes, oldest first; may be empty"
    )
    scene_understanding: str = dspy.OutputField(
        desc="two to four sentences, first person: what went on in this scene as you understood it"
    )
    my_actions: str = dspy.OutputField(
        desc="one or two sentences, first person: what you yourself said and did, in order"
    )
    my_emotions: str = dspy.OutputField(
        desc="one sentence, first person: how you felt and how that changed during the scene"
    )


def episodic_program() -> dspy.Module:
    return dspy.Predict(SummariseSceneAsCharacter)
