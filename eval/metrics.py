"""KBF-QA scores: KRf accuracy, KR accuracy and KBF, with bootstrap intervals; DSPy metrics.

KBF is the sample-weighted harmonic mean of the two accuracies,

    KBF = (n_krf + n_kr) / (n_krf / krf_acc + n_kr / kr_acc),

0 when either accuracy is 0. A split with no items has no accuracy (None);
then KBF is the other split's accuracy (with no KR items, KBF = KRf accuracy,
and vice versa), and None when neither split has items. Accuracies and KBF are
fractions in [0, 1]. An unmatched reply (letter None) is a wrong answer on
either split; so is a null `correct`.

`results` everywhere is an iterable of (split, correct) pairs or a polars
DataFrame with columns `split` ("KRf" or "KR") and `correct` (bool).

The DSPy metrics. `kbf_metric(example, prediction)` scores one example 1.0 or
0.0. Averaged over a set (what `dspy.Evaluate` does) that is plain accuracy,
which weighs the splits by their sizes and rewards a method that never
refuses on a KRf-heavy set; `kbf_of(examples, predictions)` gives the set's
KBF instead. For compiling, `weighted_metric(examples)` weights each example
by N / (2 * n_split), so the mean over `examples` is the split-balanced
accuracy (krf_acc + kr_acc) / 2: neither split can be traded away because it
is the smaller one. That mean is the simple additive stand-in for KBF (which
is not a sum over examples): it ranks methods with equal accuracies on both
splits exactly as KBF does, but forgives an imbalance that KBF punishes, so
check a compiled program with `kbf_of` on held-out examples.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import polars as pl

from eval.items import LETTERS, SPLITS, KBFItem
from eval.matching import matched_letter

STATS = ("krf_acc", "kr_acc", "kbf")

Results = Iterable[tuple[str, bool | None]] | pl.DataFrame


def kbf(krf_acc: float | None, kr_acc: float | None, n_krf: int, n_kr: int) -> float | None:
    """The sample-weighted harmonic mean of the two accuracies (see the module docstring)."""
    has_krf = krf_acc is not None and n_krf > 0
    has_kr = kr_acc is not None and n_kr > 0
    if not has_krf and not has_kr:
        return None
    if not has_kr:
        return krf_acc
    if not has_krf:
        return kr_acc
    assert krf_acc is not None and kr_acc is not None
    if krf_acc <= 0 or kr_acc <= 0:
        return 0.0
    return (n_krf + n_kr) / (n_krf / krf_acc + n_kr / kr_acc)


@dataclass(frozen=True)
class Scores:
    krf_acc: float | None
    kr_acc: float | None
    kbf: float | None
    n_krf: int
    n_kr: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _counts(results: Results) -> dict[str, tuple[int, int]]:
    """Split -> (number correct, number of items)."""
    if isinstance(results, pl.DataFrame):
        pairs: Iterable[tuple[str, bool | None]] = zip(results["split"].to_list(), results["correct"].to_list())
    else:
        pairs = results
    correct = dict.fromkeys(SPLITS, 0)
    total = dict.fromkeys(SPLITS, 0)
    for split, ok in pairs:
        if split not in total:
            raise ValueError(f"split must be KRf or KR, not {split!r}.")
        total[split] += 1
        correct[split] += bool(ok)
    return {split: (correct[split], total[split]) for split in SPLITS}


def _accuracy(correct: int, total: int) -> float | None:
    return correct / total if total else None


def score(results: Results) -> Scores:
    """KRf accuracy, KR accuracy and KBF of a set of results."""
    counts = _counts(results)
    (krf_ok, n_krf), (kr_ok, n_kr) = counts["KRf"], counts["KR"]
    krf_acc, kr_acc = _accuracy(krf_ok, n_krf), _accuracy(kr_ok, n_kr)
    return Scores(krf_acc, kr_acc, kbf(krf_acc, kr_acc, n_krf, n_kr), n_krf, n_kr)


def bootstrap_ci(results: Results, stat: str = "kbf", n: int = 1000, seed: int = 0,
                 level: float = 0.95) -> tuple[float | None, float | None]:
    """A percentile bootstrap interval for `stat` ("krf_acc", "kr_acc" or "kbf").

    Each of `n` replicates resamples the KRf items and the KR items separately
    (stratified: every replicate keeps n_krf and n_kr). Resampling n 0/1
    outcomes with replacement gives a Binomial(n, accuracy) count of correct
    ones, which is drawn directly. Deterministic for a `seed`; (None, None)
    when the statistic has no value (its split, or both, empty).
    """
    if stat not in STATS:
        raise ValueError(f"stat must be one of {', '.join(STATS)}, not {stat!r}.")
    if not 0 < level < 1:
        raise ValueError(f"level must lie between 0 and 1, not {level}.")
    counts = _counts(results)
    (krf_ok, n_krf), (kr_ok, n_kr) = counts["KRf"], counts["KR"]
    rng = np.random.default_rng(seed)
    krf = rng.binomial(n_krf, krf_ok / n_krf, size=n) / n_krf if n_krf else None
    kr = rng.binomial(n_kr, kr_ok / n_kr, size=n) / n_kr if n_kr else None
    values = {"krf_acc": krf, "kr_acc": kr, "kbf": _kbf_array(krf, kr, n_krf, n_kr)}[stat]
    if values is None:
        return None, None
    tail = (1 - level) / 2
    low, high = np.quantile(values, [tail, 1 - tail])
    return float(low), float(high)


def _kbf_array(krf: np.ndarray | None, kr: np.ndarray | None, n_krf: int, n_kr: int) -> np.ndarray | None:
    """`kbf` over arrays of replicate accuracies."""
    if krf is None or kr is None:
        return krf if kr is None else kr
    both = (krf > 0) & (kr > 0)
    with np.errstate(divide="ignore"):
        harmonic = (n_krf + n_kr) / (n_krf / np.where(both, krf, 1.0) + n_kr / np.where(both, kr, 1.0))
    return np.where(both, harmonic, 0.0)


# ---------------------------------------------------------------------------
# A run's summary


def summarise(frame: pl.DataFrame, n: int = 1000, seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """Per method: scores, bootstrap intervals, and scores per book and per book/character.

    `frame` has columns method, model, book, character, split, correct. The result
    is JSON-serialisable: plain floats and ints, None for a score with no value.
    Methods keep the order of their first row; books and characters are sorted.
    A method run with several models lists them joined by ", ".
    """
    missing = {"method", "model", "book", "character", "split", "correct"} - set(frame.columns)
    if missing:
        raise ValueError(f"the frame lacks column(s) {', '.join(sorted(missing))}.")
    summary: dict[str, Any] = {}
    for method in frame["method"].unique(maintain_order=True).to_list():
        rows = frame.filter(pl.col("method") == method)
        summary[str(method)] = _method_summary(rows, n, seed, level)
    return summary


def _method_summary(rows: pl.DataFrame, n: int, seed: int, level: float) -> dict[str, Any]:
    models = sorted({str(m) for m in rows["model"].to_list() if m is not None})
    entry: dict[str, Any] = {"model": ", ".join(models) or None, **_scores_dict(rows)}
    entry["ci"] = {stat: list(bootstrap_ci(rows, stat, n=n, seed=seed, level=level)) for stat in STATS}
    entry["per_book"] = {str(book): _scores_dict(rows.filter(pl.col("book") == book))
                         for book in sorted(rows["book"].unique().to_list())}
    pairs = rows.select("book", "character").unique().sort("book", "character").iter_rows()
    entry["per_character"] = {
        f"{book}/{character}": _scores_dict(rows.filter((pl.col("book") == book) & (pl.col("character") == character)))
        for book, character in pairs}
    return entry


def _scores_dict(rows: pl.DataFrame) -> dict[str, Any]:
    return {key: _clean(value) for key, value in score(rows).to_dict().items()}


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# ---------------------------------------------------------------------------
# DSPy metrics


def example_item(example: Any) -> KBFItem:
    """A KBF item from a DSPy example (or any object) carrying question, options, gold and split; an example
    whose `question` is rendered with its options (`eval.compile.to_example`) keeps the bare one as `item_question`."""
    options = _field(example, "options")
    if isinstance(options, Sequence) and not isinstance(options, str):
        options = dict(zip(LETTERS, options))
    if not isinstance(options, dict):
        raise ValueError("the example's options must be a mapping of A-E to texts (or a list of five).")
    return KBFItem(id=str(_field(example, "id", "")), book=str(_field(example, "book", "")),
                   character=str(_field(example, "character", "")), split=str(_field(example, "split")),
                   question=str(_field(example, "item_question", None) or _field(example, "question")), options={str(k): str(v) for k, v in options.items()},
                   gold=str(_field(example, "gold")).strip().upper())


def _field(obj: Any, name: str, default: Any = ...) -> Any:
    if isinstance(obj, dict):
        value = obj.get(name, default)
    else:
        try:
            value = getattr(obj, name)
        except (AttributeError, KeyError):
            value = default
    if value is ...:
        raise ValueError(f"the example has no {name!r}.")
    return value


def predicted_letter(example: Any, prediction: Any) -> str | None:
    """The letter a prediction stands for: its `choice` if it made one, else its `reply` (or `answer`) matched."""
    if isinstance(prediction, str):
        reply, choice = prediction, None
    else:
        reply = _field(prediction, "reply", None)
        if reply is None:
            reply = _field(prediction, "answer", None)
        choice = _field(prediction, "choice", None)
    return matched_letter(str(reply or ""), example_item(example), choice if isinstance(choice, str) else None)


def is_correct(example: Any, prediction: Any) -> bool:
    return predicted_letter(example, prediction) == str(_field(example, "gold")).strip().upper()


def kbf_metric(example: Any, prediction: Any, trace: Any = None) -> float:
    """1.0 if the prediction's reply matches the example's gold letter, else 0.0 (averaged: plain accuracy)."""
    return 1.0 if is_correct(example, prediction) else 0.0


def kbf_of(examples: Iterable[Any], predictions: Iterable[Any]) -> float:
    """KBF of a set of predictions (0.0 for an empty set)."""
    results = [(str(_field(e, "split")), is_correct(e, p)) for e, p in zip(examples, predictions, strict=True)]
    return score(results).kbf or 0.0


@dataclass(frozen=True)
class SplitWeightedMetric:
    """A DSPy metric weighting KRf and KR examples so its mean over a set is the split-balanced accuracy."""

    weights: dict[str, float]  # split -> N / (2 * n_split)

    def __call__(self, example: Any, prediction: Any, trace: Any = None) -> float:
        correct = is_correct(example, prediction)
        if trace is not None:  # bootstrapping demonstrations: a pass or a fail, unweighted
            return 1.0 if correct else 0.0
        return self.weights.get(str(_field(example, "split")), 1.0) if correct else 0.0


def weighted_metric(examples: Iterable[Any]) -> SplitWeightedMetric:
    """The split-balanced metric for `examples` (see the module docstring); one split only: plain accuracy."""
    splits = [str(_field(e, "split")) for e in examples]
    counts = {split: splits.count(split) for split in SPLITS if split in splits}
    weights = {split: len(splits) / (len(counts) * count) for split, count in counts.items()}
    return SplitWeightedMetric(weights)
