"""What a build will cost in model calls and tokens, before any real model call.

`dry_run` builds the book's whole memory in a scratch data home with a
recording stand-in model that answers every program with output of a
plausible size drawn from its own input (so later prompts, such as earlier
summaries, grow as they would). Every prompt and answer is counted with
`reveriemem.core.text`. The real model is never called; the dry run costs the
time of an offline build.

The stand-in's answer sizes are assumptions, listed in `ANSWER_SIZES`; a
real model writes more or less. Prompt tokens depend only on the book, the
scenes and the programs, so they are the reliable part of the estimate.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import dspy

from dspy_programs.episodic import SummariseSceneAsCharacter
from dspy_programs.knowledge import ExtractSceneGraph
from dspy_programs.personality import AnnotateDialogue, DescribePattern
from dspy_programs.scenes import SceneContinuity, SceneRoster, SceneSetting
from reveriemem.core.registry import books_root, load_book
from reveriemem.core.settings import HOME_ENV, environment
from reveriemem.core.text import count_tokens, counter_name
from reveriemem.models import FakeModel

ANSWER_SIZES: dict[type[dspy.Signature], str] = {
    SummariseSceneAsCharacter: "three fields of 60, 40 and 30 words",
    ExtractSceneGraph: "one relation per 60 words of passage (at most 25), one entity per 100 words",
    AnnotateDialogue: "one annotation per numbered line",
    DescribePattern: "a 20-word description",
    SceneSetting: "three 5-word phrases",
    SceneRoster: "a status per character",
    SceneContinuity: "a boolean",
}
_SENTENCES = re.compile(r"[^.!?]{20,}[.!?]")


@dataclass
class StepCost:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class Estimate:
    book: str
    book_tokens: int
    steps: dict[str, StepCost] = field(default_factory=dict)
    seconds: float = 0.0
    counter: str = ""

    @property
    def calls(self) -> int:
        return sum(s.calls for s in self.steps.values())

    @property
    def prompt_tokens(self) -> int:
        return sum(s.prompt_tokens for s in self.steps.values())

    @property
    def completion_tokens(self) -> int:
        return sum(s.completion_tokens for s in self.steps.values())

    def per_book_token(self, value: int) -> float:
        return value / self.book_tokens if self.book_tokens else 0.0


def _words(text: str, n: int, skip: int = 0) -> str:
    return " ".join(text.split()[skip:skip + n])


def plausible_answer(signature: type[dspy.Signature] | None, inputs: dict[str, Any]) -> dict[str, Any]:
    """An answer of plausible size for one of the project's programs, made from its input."""
    passage = str(inputs.get("passage", ""))
    if signature is SceneContinuity:
        after = str(inputs.get("passage_after", ""))[:200]
        return {"new_scene": bool(re.search(r"CHAPTER|Chapter|\*\s*\*|^\s*(?:Next|That|The next|Later|Meanwhile)",
                                            after))}
    if signature is SceneSetting:
        text = str(inputs.get("scene_text", ""))
        return {"location": _words(text, 5), "time": _words(text, 5, 5), "atmosphere": _words(text, 5, 10)}
    if signature is SceneRoster:
        return {"roster": [{"character": c.split(" (")[0], "status": "absent"} for c in inputs.get("characters", [])]}
    if signature is SummariseSceneAsCharacter:
        return {"scene_understanding": _words(passage, 60), "my_actions": _words(passage, 40, 60),
                "my_emotions": _words(passage, 30, 100)}
    if signature is ExtractSceneGraph:
        words = len(passage.split())
        sentences = _SENTENCES.findall(passage) or [passage]
        relations = []
        for i in range(min(25, max(1, words // 60))):
            sentence = sentences[i % len(sentences)].split()
            relations.append({"subject": " ".join(sentence[:2]), "predicate": " ".join(sentence[2:4]),
                              "object": " ".join(sentence[4:7]), "evidence": " ".join(sentence[:12]),
                              "participants": [" ".join(sentence[:2])]})
        names = sorted(set(re.findall(r"\b[A-Z][a-z]{2,}\b", passage)))[: max(1, words // 100)]
        return {"entities": [{"name": n, "type": "person"} for n in names], "relations": relations, "accounts": []}
    if signature is AnnotateDialogue:
        numbers = [int(m) for m in re.findall(r"^\s*(\d+)\.", str(inputs.get("lines", "")), re.MULTILINE)]
        return {"annotations": [{"n": n, "emotion": "neutral", "intensity": 2, "trigger": "the question put to them",
                                 "intent": "to answer plainly"} for n in numbers]}
    if signature is DescribePattern:
        return {"description": _words(" ".join(map(str, inputs.get("lines", []))), 20) or "speaks plainly"}
    return {}


@contextmanager
def _scratch_home(slug: str) -> Iterator[str]:
    source = books_root() / slug
    with tempfile.TemporaryDirectory(prefix="reveriemem-estimate-") as scratch, \
            environment(**{HOME_ENV: scratch, "DAGSTER_HOME": None}):
        shutil.copytree(source, books_root() / slug)
        yield scratch

BuildFn = Callable[..., object]  # build(slug, lm=..., embedder=...): the orchestration layer's whole-book build


def dry_run(slug: str, build: BuildFn, embedder: str = "hash") -> Estimate:
    """Build the book with `build` and the recording stand-in in a scratch home; count every call's tokens.

    The build is handed in (the CLI passes the Dagster build) so that the library never imports orchestration.
    """
    from reveriemem.models.backends import register_fake, unregister_fake

    book = load_book(slug)
    estimate = Estimate(book=slug, book_tokens=count_tokens(book.text[book.body_start:book.body_end]),
                        counter=counter_name())
    fake = FakeModel(plausible_answer, name="estimate")
    started = time.monotonic()
    with _scratch_home(slug):
        register_fake("estimate", fake)
        try:
            build(slug, lm="fake:estimate", embedder=embedder)
        finally:
            unregister_fake("estimate")
    estimate.seconds = time.monotonic() - started
    for call in fake.calls:
        step = estimate.steps.setdefault(call.label or "other", StepCost())
        step.calls += 1
        step.prompt_tokens += sum(count_tokens(text) for _, text in call.messages)
        step.completion_tokens += count_tokens(call.output)
    return estimate


def format_estimate(estimate: Estimate, model: str) -> str:
    lines = [f"Estimate for {estimate.book} with {model} (dry run with a recording stand-in; no call to {model} "
             f"was made; tokens counted with {estimate.counter}):",
             f"{'step':<28}{'calls':>8}{'prompt tokens':>16}{'completion tokens':>20}"]
    for name, step in sorted(estimate.steps.items(), key=lambda kv: -kv[1].prompt_tokens):
        lines.append(f"{name:<28}{step.calls:>8}{step.prompt_tokens:>16,}{step.completion_tokens:>20,}")
    lines.append(f"{'total':<28}{estimate.calls:>8}{estimate.prompt_tokens:>16,}{estimate.completion_tokens:>20,}")
    lines.append(f"book: {estimate.book_tokens:,} tokens; prompt tokens per book token "
                 f"{estimate.per_book_token(estimate.prompt_tokens):.2f}, completion tokens per book token "
                 f"{estimate.per_book_token(estimate.completion_tokens):.2f}")
    lines.append("Completion sizes are assumptions: " + "; ".join(f"{k.__name__}: {v}" for k, v in ANSWER_SIZES.items()))
    return "\n".join(lines)
