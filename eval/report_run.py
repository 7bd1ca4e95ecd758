"""One evaluation run as the report reads it: its summary, its answers, and how its figures are written.

`load_run(run_dir)` reads the run directory's `summary.json` (scores per
method, pooled, per book and per character, with 95% CIs) and, when it can,
`results.parquet` (one row per method and item); a damaged or missing
results file leaves `Run.results` None and says why, it never stops the
report.

The labels here are the report's one vocabulary for models and numbers: every
figure is labelled with the model that produced it, and a run on no model
(`none`), a fake model or the bundled tiny model says so plainly, since such a
run proves the wiring, not quality.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from reveriemem.core.errors import ReverieMemError

SUMMARY_NAME = "summary.json"
RESULTS_NAME = "results.parquet"
NO_VALUE = "—"


class ReportError(ReverieMemError):
    """A run directory has no readable summary.json."""


# ---------------------------------------------------------------------------
# Models


_NOTES = {  # kind -> (caveat, terse caveat for the breakdown tables)
    "none": ("deterministic, no model", "no model"),
    "fake": ("a fake test model: proves the wiring, not quality", "fake model: wiring only"),
    "tiny": ("bundled SmolLM2-135M, a tiny model: proves the wiring, not quality", "tiny model: wiring only"),
}


def _model_kind(model: str | None) -> str | None:
    word = (model or "").strip().lower()
    if word in {"", "none", "heuristic", "offline"} or word.startswith("heuristic:"):
        return "none"
    if word == "fake" or word.startswith(("fake:", "fake/", "fake-")):
        return "fake"
    if word.startswith("bundled") or "smollm" in word or "135m" in word:
        return "tiny"
    return None


def model_note(model: str | None) -> str:
    """What a reader must know about a model's figures ("" for a real model).

    `none` is the deterministic path (no model); a fake model or the bundled
    SmolLM2-135M only proves that the wiring works, not the method's quality.
    """
    kind = _model_kind(model)
    return _NOTES[kind][0] if kind else ""


def model_label(model: str | None, short: bool = False) -> str:
    """The model's name with its caveat, e.g. `none (deterministic, no model)`.

    `short` gives the terse caveat of the breakdown tables, e.g. `(tiny model: wiring only)`.
    """
    name = (model or "none").strip() or "none"
    kind = _model_kind(name)
    return f"{name} ({_NOTES[kind][1 if short else 0]})" if kind else name


# ---------------------------------------------------------------------------
# Numbers


def number(value: Any) -> float | None:
    """A finite int or float as a float; None for anything else (null, NaN, a bool, text)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    result = float(value)
    return result if math.isfinite(result) else None


def count(value: Any) -> int:
    """A count from the summary; 0 when it is absent or not a number."""
    result = number(value)
    return int(result) if result is not None else 0


def ci_pair(value: Any) -> tuple[float, float] | None:
    """A 95% interval `[low, high]` from the summary, or None when it is absent or incomplete."""
    if not isinstance(value, list | tuple) or len(value) != 2:
        return None
    low, high = number(value[0]), number(value[1])
    return (low, high) if low is not None and high is not None else None


def percent(value: Any) -> str:
    """A fraction in [0, 1] as a percentage with one decimal; `—` for null."""
    result = number(value)
    return NO_VALUE if result is None else f"{100 * result:.1f}"


def with_ci(value: Any, ci: Any) -> str:
    """`68.1 (60.2–75.0)`: a percentage and its 95% interval, when there is one."""
    text = percent(value)
    interval = ci_pair(ci)
    if text == NO_VALUE or interval is None:
        return text
    return f"{text} ({100 * interval[0]:.1f}–{100 * interval[1]:.1f})"


def counts(scores: dict[str, Any]) -> str:
    """`n_krf:n_kr` of a score record."""
    return f"{count(scores.get('n_krf'))}:{count(scores.get('n_kr'))}"


def paper_percent(value: float | None) -> str:
    """A percentage as the paper prints it (already in percent)."""
    return NO_VALUE if value is None else f"{value:.1f}"


def delta(ours: Any, theirs: float | None) -> str:
    """Our fraction minus the paper's percentage, in points with a sign."""
    result = number(ours)
    if result is None or theirs is None:
        return NO_VALUE
    return f"{100 * result - theirs:+.1f}"


def calls(method: dict[str, Any]) -> str:
    """`2 (max 5)`: the median and most model calls per item."""
    per_item = method.get("calls_per_item") or {}
    median, most = number(per_item.get("median")), number(per_item.get("max"))
    if median is None:
        return NO_VALUE
    text = f"{median:g}"
    return f"{text} (max {most:g})" if most is not None else text


def seconds(value: Any) -> str:
    """Seconds with one decimal and thousands separators."""
    result = number(value)
    return NO_VALUE if result is None else f"{result:,.1f}"


# ---------------------------------------------------------------------------
# The run


@dataclass
class Run:
    directory: Path
    summary: dict[str, Any]
    results: pl.DataFrame | None
    results_problem: str = ""  # why results.parquet could not be used

    @property
    def model(self) -> str:
        return str(self.summary.get("model") or "none")

    @property
    def methods(self) -> dict[str, dict[str, Any]]:
        methods = self.summary.get("methods") or {}
        return {str(name): value for name, value in methods.items() if isinstance(value, dict)}

    def method_model(self, method: str) -> str:
        return str(self.methods.get(method, {}).get("model") or self.model)


def load_run(run_dir: Path) -> Run:
    """Read a run directory's summary.json and (if readable) results.parquet."""
    summary_path = run_dir / SUMMARY_NAME
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise ReportError(f"{summary_path} does not exist: is {run_dir} an evaluation run directory?") from error
    except (OSError, json.JSONDecodeError) as error:
        raise ReportError(f"{summary_path} cannot be read as JSON: {error}") from error
    if not isinstance(summary, dict):
        raise ReportError(f"{summary_path} holds no JSON object.")
    results: pl.DataFrame | None = None
    problem = ""
    results_path = run_dir / RESULTS_NAME
    if results_path.is_file():
        try:
            results = pl.read_parquet(results_path)
        except Exception as error:  # a damaged file must not stop the report
            problem = f"{RESULTS_NAME} could not be read ({type(error).__name__}: {error})"
    else:
        problem = f"the run has no {RESULTS_NAME}"
    return Run(run_dir, summary, results, problem)
