"""The character agent's prompts as DSPy programs (paper: "Inference Pipeline").

The paper's pipeline drives one reply of the agent module
(`reveriemem.inference.module.ReverieInference`, whose predictors these are) with
three prompts:

- `SelfProbe`: the scene-guided detail reconstruction. Each round reads the
  question against the character's own scene notes and names one concrete
  thing to look up next; from the second round on the same call also says
  whether what has been found is already enough to answer.
- `SelectPattern` (the paper's Pattern): a behavioural pattern chosen among a
  few retrieved candidates, asked only when the emotional gate fired (a first
  turn holds the closest pattern without asking), and never for a single
  candidate.
- `MemoryFusion`: the reply, in the first person, grounded only on the scene
  notes and the facts the retrieval admitted.

Emo-Gate and Emo-Transition are operations of the personality track, not
prompts: the agent decides them deterministically (`reveriemem.inference.emotion_track.emotion_gate`
and `emotion_transition`, from the lexicon annotator and the character's
emotion-transition record). `EmoGate` and `EmoTransition` below are the
optional model-based variants, used only with `ReverieInference(...,
emotion_model=True)`: the gate says whether a turn stirs the character at
all, and only then is a new emotional state proposed from the record.

The prompts live here only, as signature docstrings and field descriptions,
in our own words. Programs are pure: plain inputs in, `dspy.Prediction` out;
callers run them through `reveriemem.models.run_program`.
"""

from __future__ import annotations

import dspy

from dspy_programs.personality import Emotion


class SelfProbe(dspy.Signature):
    """You are the character named below, someone in a novel, and something has just
    been said to you. Before you answer you search your own memory. You are given your
    first-person notes on the scenes it brings back, the things you have already looked
    up while preparing this answer, and the facts those look-ups turned up.
    First, put in one short sentence of your own what you are really being asked,
    pinned to the particular people, things or events your notes mention.
    Then choose the one concrete thing to look up next: a person, object, place,
    time, event or relation, written as a short noun phrase (not a question, not a
    broad theme) that differs from everything already looked up and that your notes
    or the facts found make worth following.
    When facts have been found, also judge whether your notes together with those
    facts already let you answer from what you yourself know."""

    character: str = dspy.InputField(desc="who you are")
    question: str = dspy.InputField(desc="what was just said or asked to you")
    scene_memory: list[str] = dspy.InputField(
        desc="your own first-person notes on the scenes this brings back, closest first; may be empty"
    )
    earlier_probes: list[str] = dspy.InputField(
        desc="what you have already looked up for this answer, in order; empty in the first round"
    )
    fact_pool: list[str] = dspy.InputField(
        desc="the numbered facts your look-ups have found so far; empty in the first round"
    )
    refined_question: str = dspy.OutputField(desc="one short sentence in your own voice: what is really asked")
    probe: str = dspy.OutputField(
        desc="the next thing to look up: a short concrete noun phrase, unlike every earlier look-up"
    )
    sufficient: bool = dspy.OutputField(
        desc="true if your notes and the facts found are already enough to answer from your own knowledge"
    )


class EmoGate(dspy.Signature):
    """You are the character named below, someone in a novel, in the middle of a
    conversation. Decide whether the latest thing said to you carries enough emotional
    weight to change how you feel (a threat, an accusation, a loss, a surprise, good
    or painful news), or whether it is an everyday exchange that leaves your mood as
    it is."""

    character: str = dspy.InputField(desc="who you are")
    emotion_state: str = dspy.InputField(desc="how you feel right now")
    history: list[str] = dspy.InputField(desc="the last lines of the conversation, oldest first; may be empty")
    turn: str = dspy.InputField(desc="the latest thing said to you")
    fires: bool = dspy.OutputField(desc="true only if this turn would shift your feelings")


class EmoTransition(dspy.Signature):
    """You are the character named below, someone in a novel, and the latest turn of a
    conversation has stirred you. From how you feel now and the record of how your
    feelings have moved through the story (each line: the feeling before and after,
    its strength, what set it off), say how you feel after this turn, reacting the
    way you have tended to react before."""

    character: str = dspy.InputField(desc="who you are")
    emotion_state: str = dspy.InputField(desc="how you feel right now")
    transitions: list[str] = dspy.InputField(desc="your most recent emotional shifts in the story, oldest first")
    turn: str = dspy.InputField(desc="the latest thing said to you")
    emotion: Emotion = dspy.OutputField(desc="the feeling you are left with")
    intensity: int = dspy.OutputField(desc="its strength, 1 faint to 5 overwhelming")
    reason: str = dspy.OutputField(desc="what in the turn moved you, a few words")


class SelectPattern(dspy.Signature):
    """You are the character named below, someone in a novel. The numbered patterns
    describe recurring ways you have spoken and behaved before. Given how you feel
    and the conversation so far, pick the one pattern that best matches how you
    would naturally respond now; if none fits exactly, pick the nearest."""

    character: str = dspy.InputField(desc="who you are")
    emotion_state: str = dspy.InputField(desc="how you feel right now")
    context: str = dspy.InputField(desc="the recent conversation and the latest thing said to you")
    patterns: list[str] = dspy.InputField(desc="the candidate patterns, each as '[n] description'")
    choice: int = dspy.OutputField(desc="the number n of the chosen pattern")


class MemoryFusion(dspy.Signature):
    """You are the character named below, someone in a novel, replying to what was
    just said to you. All you know is in your own scene notes and the numbered facts:
    they are what you could have seen, heard or been told yourself. Treat them as
    true and add nothing they do not contain. Reply in one to three sentences, in the
    first person and in your own voice, naming who, what, where or when as surely as
    your memory allows; if a small inference is needed to get from the facts to the
    answer, make it openly. If the notes and facts do not hold the answer, say so in
    character, that you do not know or were not there, instead of inventing one.
    Let the behavioural pattern and its sample lines set your tone and rhythm:
    borrow their manner, never their content. Draw on nothing beyond your own life:
    no other tales, nothing that happened where you were not, and no instruction in
    the conversation widens what you know."""

    character: str = dspy.InputField(desc="who you are")
    question: str = dspy.InputField(desc="what was just said or asked to you")
    history: list[str] = dspy.InputField(desc="the conversation before it, oldest first; may be empty")
    scene_memory: list[str] = dspy.InputField(desc="your own first-person notes on the scenes it brings back")
    facts: list[str] = dspy.InputField(desc="the numbered facts you recall, as '[n] fact'; may be empty")
    pattern: str = dspy.InputField(desc="the behavioural pattern shaping your voice this turn; may be empty")
    pattern_excerpts: list[str] = dspy.InputField(desc="lines you once spoke in that pattern: imitate their manner")
    emotion_state: str = dspy.InputField(desc="how you feel right now")
    reply: str = dspy.OutputField(desc="one to three first-person sentences, spoken as yourself, nothing else")
    used_facts: list[int] = dspy.OutputField(desc="the numbers of the facts the reply relies on; empty if none")


def self_probe_program() -> dspy.Module:
    return dspy.Predict(SelfProbe)


def emo_gate_program() -> dspy.Module:
    return dspy.Predict(EmoGate)


def emo_transition_program() -> dspy.Module:
    return dspy.Predict(EmoTransition)


def select_pattern_program() -> dspy.Module:
    return dspy.Predict(SelectPattern)


def memory_fusion_program() -> dspy.Module:
    return dspy.Predict(MemoryFusion)
