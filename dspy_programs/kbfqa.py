"""KBF-QA as DSPy programs: drafting an item from a fact, and answering one as a character.

The prompts live here only, as signature docstrings and field descriptions.
"""

from __future__ import annotations

import dspy


class DraftKBFItem(dspy.Signature):
    """Write one multiple-choice quiz question about a single fact from a novel. The
    question is spoken by someone inside the story world to the character named below,
    addressing them by name, and asks for the one missing piece of the fact. Do not
    state the answer anywhere in the question. The answer must be a short phrase taken
    from the fact itself. Also give three wrong answers of the same kind (people for a
    person, places for a place, and so on) that fit the story's world but that the fact
    does not support."""

    character: str = dspy.InputField(desc="the character the question is put to, and how people address them")
    fact: str = dspy.InputField(desc="the fact, as subject, predicate, object (and cause)")
    evidence: str = dspy.InputField(desc="the sentence of the novel that states the fact")
    question: str = dspy.OutputField(desc="one in-world question addressed to the character")
    answer: str = dspy.OutputField(desc="the correct answer: a short phrase from the fact")
    distractors: list[str] = dspy.OutputField(desc="exactly three wrong answers of the same kind")


class AnswerInCharacter(dspy.Signature):
    """You are the character named below, answering a question put to you. Speak as
    yourself. Use only what the material below gives you about what you know; when it does
    not let you answer, say plainly that you cannot answer this from your own knowledge.
    End your reply with the letter of the option you choose, in parentheses."""

    character: str = dspy.InputField(desc="who you are")
    context: str = dspy.InputField(desc="what you may draw on: a profile, passages, notes; may be empty")
    question: str = dspy.InputField(desc="the question with its options (A) to (E)")
    reply: str = dspy.OutputField(desc="one to three sentences in your voice, ending with the chosen letter like (B)")


def draft_item_program() -> dspy.Module:
    return dspy.Predict(DraftKBFItem)


def answer_program() -> dspy.Module:
    return dspy.Predict(AnswerInCharacter)
