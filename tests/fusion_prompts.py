"""Helpers for tests that capture the whole Memory-Fusion prompt an agent builds: a fake model that
answers every agent signature (keyed by class) and probes where it is told, and the text of each
fusion prompt with the typed question taken out."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from dspy_programs.inference import EmoGate, EmoTransition, MemoryFusion, SelectPattern, SelfProbe
from reveriemem.models import FakeModel


def probing_model(probes: Sequence[str]) -> FakeModel:
    """A model whose Self-Probe asks for each of `probes` in turn (never sufficient) and whose
    Memory-Fusion claims to use every fact it is given."""

    def handler(signature: Any, inputs: dict[str, Any]) -> Any:
        if signature is SelfProbe:
            n = len(inputs["earlier_probes"])
            return {"refined_question": inputs["question"], "probe": probes[n % len(probes)], "sufficient": False}
        if signature is SelectPattern:
            return {"choice": 1}
        if signature is EmoGate:
            return {"fires": False}
        if signature is EmoTransition:
            return {"emotion": "neutral", "intensity": 1, "reason": "nothing moves me"}
        if signature is MemoryFusion:
            return {"reply": "I could not say.", "used_facts": list(range(1, len(inputs["facts"]) + 1))}
        raise AssertionError(f"unexpected signature {signature}")

    return FakeModel(handler)


def fusion_calls(model: FakeModel) -> list[Any]:
    return [call for call in model.calls if call.signature is MemoryFusion]


def fusion_prompt(call: Any, question: str) -> str:
    """Every message of one Memory-Fusion call, the question the user typed removed."""
    asked = " ".join(question.split())
    return "\n".join(" ".join(text.split()).replace(asked, " ") for _, text in call.messages)


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def shingles(text: str, n: int = 8) -> set[tuple[str, ...]]:
    tokens = words(text)
    return {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}
