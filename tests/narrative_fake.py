"""A fake generator and judge for Task 2 tests, keyed by signature class.

Each character's Memory-Fusion writes a move whose thought is a marker unique to the
character and turn (`THOUGHT-<name>-<n>`) and whose speech quotes the first fact it was
shown, so a leak of a thought or of a fact would show in another prompt. The judge
prefers the story that holds the word 'ledger' more often, in either order, or always
the first text (`first_bias=True`).
"""

from __future__ import annotations

import itertools
from typing import Any

from dspy_programs.inference import MemoryFusion, SelfProbe
from dspy_programs.narrative import (
    ActFromProfile,
    DirectStage,
    DraftOutline,
    DraftScript,
    JudgeStoryPair,
    NarrateLog,
    ReviseOutline,
    WriteWholeStory,
)


def narrative_handler(first_bias: bool = False) -> Any:
    counter = itertools.count(1)

    def handler(signature: Any, inputs: dict[str, Any]) -> dict[str, Any] | str:
        if signature is DirectStage:
            return {"goals": [f"{c.split(' (at ')[0]}: {inputs['stage']}" for c in inputs["cast"]]}
        if signature is MemoryFusion:
            who = inputs["character"].split(" (")[0].replace(" ", "")
            fact = inputs["facts"][0].split("] ", 1)[-1] if inputs["facts"] else "nothing comes to mind"
            return {"reply": f"[THOUGHT-{who}-{next(counter)}] (looks up) I recall: {fact}",
                    "used_facts": [1] if inputs["facts"] else []}
        if signature is SelfProbe:
            return {"refined_question": inputs["question"][:80], "probe": "the Horn Lamp and the ledger",
                    "sufficient": True}
        if signature is ActFromProfile:
            return {"move": f"[I must act] (steps forward) {inputs['goal']}"}
        if signature is NarrateLog:
            return {"story": " ".join(line for line in inputs["log"])}
        if signature is WriteWholeStory:
            return {"story": f"A story of {inputs['book']}: {inputs['plot']}"}
        if signature is DraftOutline:
            return {"beats": [p.split(":")[0] + ": speaks" for p in inputs["profiles"]]}
        if signature is ReviseOutline:
            return {"revised": inputs["beats"]}
        if signature is JudgeStoryPair:
            if first_bias:
                return {"better": "A"}
            a, b = inputs["story_a"].lower().count("ledger"), inputs["story_b"].lower().count("ledger")
            return {"better": "A" if a > b else "B" if b > a else "tie"}
        if signature is DraftScript:
            return {"title": "A drafted scene", "stages": [f"Scene {i + 1} plays out." for i in range(2)]}
        return {}

    return handler
