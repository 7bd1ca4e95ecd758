"""The pairwise judge of Task 2 and its win rates (the five-dimension protocol of BookWorld).

For one script and two stories, the judge model is asked once per dimension in each
order (story of method X as A, then as B). A verdict stands only when both orders name
the same method; a tie in either order, or two orders that disagree, is a tie (so a
judge that always prefers the first text gives ties, not wins). The judge model is
configured apart from the generator. Win rate of X over Y = (wins + ties / 2) / judged,
with a percentile bootstrap interval over the judged pairs.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dspy_programs.narrative import judge_program
from reveriemem.core.errors import ModelUnavailableError
from reveriemem.models import ModelHandle, run_or_fallback, run_program
from reveriemem.narrative.log import Story
from reveriemem.narrative.scripts import Script

SHARED = {
    "Anthropomorphism": "How human the characters are: each acts on its own goals and personality rather than "
                        "being agreeable, verbose or preachy; feelings are layered and shown through subtext; "
                        "the persona holds steady; each responds sensibly and tactfully to the others.",
    "Character Fidelity": "How true the main characters are to the book: their language suits their background; "
                          "they know what they would know at this point of the story and nothing from later or "
                          "from scenes they never saw; their values, decisions and relations to the others fit "
                          "the book.",
    "Immersion & Setting": "How well the text keeps the reader inside the book's world: consistent, concrete "
                           "use of its places, customs and period; nothing that breaks the setting.",
    "Writing Quality": "How well written the text is: vivid and precise language, varied sentences, no "
                       "repetition or filler, dialogue that sounds spoken.",
}
WITH_SCRIPT = {"Storyline Quality": "How well the story follows the plot and holds together: it realises every "
                                    "stage in order, develops naturally, adds no contradictions, and its dialogue "
                                    "moves things on."}
WITHOUT_SCRIPT = {"Creativity": "How inventive the story is from its opening event: fresh yet plausible "
                                "developments that stay true to the characters and the world."}
SHORT = {"Anthropomorphism": "An", "Character Fidelity": "CF", "Immersion & Setting": "IS", "Writing Quality": "WQ",
         "Storyline Quality": "SQ", "Creativity": "Cr"}


def dimensions(with_script: bool) -> dict[str, str]:
    """The five dimensions of a mode: four shared, then Storyline Quality (with a script) or Creativity."""
    return {**SHARED, **(WITH_SCRIPT if with_script else WITHOUT_SCRIPT)}


@dataclass
class Judgement:
    script_id: str
    mode: str
    first: str  # method X (the one whose win rate is reported)
    second: str  # method Y
    dimension: str
    x_as_a: str  # the verdict with X's story shown as A: "A", "B" or "tie"
    x_as_b: str  # the verdict with X's story shown as B
    winner: str  # X, Y or "tie"
    judge_model: str
    unparsed: int = 0  # orders whose verdict never parsed: each counted as a tie

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def combine(x_as_a: str, x_as_b: str, x: str, y: str) -> str:
    """The pair's verdict from both orders: a method only when both orders name it, else a tie."""
    first = {"A": x, "B": y}.get(x_as_a, "tie")
    second = {"A": y, "B": x}.get(x_as_b, "tie")
    return first if first == second else "tie"


def _verdict(value: Any) -> str:
    word = str(value or "").strip().strip(".\"'").lower()
    return {"a": "A", "b": "B", "story a": "A", "story b": "B"}.get(word, "tie")


def judge_pair(handle: ModelHandle, script: Script, x: Story, y: Story,
               only: Sequence[str] | None = None) -> list[Judgement]:
    """Both orders on every dimension of the script's mode (or the dimensions named in `only`)."""
    if handle.lm is None:
        raise ModelUnavailableError("The pairwise judge needs a model; give one with --judge-lm (any LiteLLM "
                                    "model string, a GGUF file, or 'bundled').")
    out = []
    for name, criteria in dimensions(script.with_script).items():
        if only and name not in only:
            continue
        common: dict[str, Any] = {"dimension": f"{name}: {criteria}", "profiles": script.profile_lines(),
                                  "scenario": script.plot_text()}
        first, missed_first = _ask(handle, x.text, y.text, common)
        second, missed_second = _ask(handle, y.text, x.text, common)
        out.append(Judgement(script.id, script.mode, x.method, y.method, name, first, second,
                             combine(first, second, x.method, y.method), handle.name,
                             unparsed=missed_first + missed_second))
    return out


def _ask(handle: ModelHandle, story_a: str, story_b: str, common: dict[str, Any]) -> tuple[str, int]:
    """One order's verdict, and 1 when the judge's output never parsed (then a tie: the batch goes on)."""
    outcome = run_or_fallback(
        handle, lambda h: _verdict(run_program(h, judge_program(), story_a=story_a, story_b=story_b, **common).better),
        lambda: "tie", fallback_method="heuristic:unparsed-verdict-as-tie")
    return outcome.value, int(outcome.method != f"model:{handle.name}")


# -- win rates -------------------------------------------------------------------------------


def _rate(outcomes: Sequence[float]) -> float:
    return sum(outcomes) / len(outcomes) if outcomes else 0.0


def bootstrap(outcomes: Sequence[float], n: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """A percentile bootstrap interval of the mean of per-pair outcomes (1 win, 0.5 tie, 0 loss)."""
    if not outcomes:
        return (0.0, 0.0)
    rng = random.Random(seed)
    means = sorted(_rate([rng.choice(outcomes) for _ in outcomes]) for _ in range(n))
    lo = means[int((1 - level) / 2 * (n - 1))]
    hi = means[int((1 + level) / 2 * (n - 1))]
    return (lo, hi)


def win_rates(judgements: Sequence[Judgement | dict[str, Any]], n: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """Per (book-less) comparison, mode and dimension: wins, ties, losses, win rate and its interval."""
    groups: dict[tuple[str, str, str, str], list[float]] = {}
    for item in judgements:
        j = item.to_dict() if isinstance(item, Judgement) else item
        key = (j["first"], j["second"], j["mode"], j["dimension"])
        groups.setdefault(key, []).append(1.0 if j["winner"] == j["first"] else 0.5 if j["winner"] == "tie" else 0.0)
    rows = []
    for (x, y, mode, dim), outcomes in sorted(groups.items()):
        lo, hi = bootstrap(outcomes, n=n, seed=seed)
        rows.append({"first": x, "second": y, "mode": mode, "dimension": dim, "short": SHORT.get(dim, dim),
                     "judged": len(outcomes), "wins": outcomes.count(1.0), "ties": outcomes.count(0.5),
                     "losses": outcomes.count(0.0), "win_rate": _rate(outcomes), "ci": [lo, hi]})
    return rows
