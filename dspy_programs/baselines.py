"""The model steps of the KBF-QA reference methods (`eval/methods/`), as DSPy programs.

RAPTOR summarises clusters of passages into tree nodes; HippoRAG names the
entities a question is about; ComoRAG writes a probing query, folds retrieved
passages into a working memory and says whether that memory is enough. The
final answer of every method is `dspy_programs.kbfqa.AnswerInCharacter`.
The prompts live here only, in our own words.
"""

from __future__ import annotations

import dspy


class SummariseForTree(dspy.Signature):
    """Several passages of a novel were grouped together because they deal with related
    matters. Write one compact summary of the group that keeps the concrete details a
    reader might later ask about: who did what, where, when, with which objects, and what
    was said. Leave out commentary and do not add anything the passages do not say."""

    passages: str = dspy.InputField(desc="the grouped passages, one after another, in story order")
    summary: str = dspy.OutputField(desc="a summary of about 120 words, in plain prose")


class ExtractQueryEntities(dspy.Signature):
    """List the named things a quiz question and its answer options mention: people,
    places, ships, organisations, objects with names, and similar. Copy each name as it
    is written; do not add names that are not there."""

    question: str = dspy.InputField(desc="the question with its lettered options")
    entities: list[str] = dspy.OutputField(desc="the names, each as written, without repeats")


class ProbeForEvidence(dspy.Signature):
    """You are gathering evidence from a novel to settle a question. Given the question
    and what has been gathered so far, write the next search query: aim it at what is
    still missing to decide between the options, not at what is already known."""

    question: str = dspy.InputField(desc="the question with its lettered options")
    memory: str = dspy.InputField(desc="the evidence gathered so far; empty on the first round")
    probe: str = dspy.OutputField(desc="one short search query")


class ConsolidateMemory(dspy.Signature):
    """Fold newly found passages of a novel into the working notes kept for a question.
    Keep every detail that bears on the question, drop what does not, and merge
    repetitions. Then say whether the notes now settle the question."""

    question: str = dspy.InputField(desc="the question with its lettered options")
    memory: str = dspy.InputField(desc="the working notes so far; may be empty")
    passages: str = dspy.InputField(desc="the passages just found")
    updated_memory: str = dspy.OutputField(desc="the revised working notes")
    can_answer: bool = dspy.OutputField(desc="true only if the notes are enough to choose an option with confidence")


def summarise_program() -> dspy.Module:
    return dspy.Predict(SummariseForTree)


def query_entities_program() -> dspy.Module:
    return dspy.Predict(ExtractQueryEntities)


def probe_program() -> dspy.Module:
    return dspy.Predict(ProbeForEvidence)


def consolidate_program() -> dspy.Module:
    return dspy.Predict(ConsolidateMemory)
