"""KBF-QA scores: the KBF formula, split scores, bootstrap intervals, run summaries and the DSPy metrics."""

from __future__ import annotations

import json

import dspy
import polars as pl
import pytest

from eval.items import REFUSAL_OPTION
from eval.metrics import (
    Scores,
    bootstrap_ci,
    kbf,
    kbf_metric,
    kbf_of,
    score,
    summarise,
    weighted_metric,
)


def _results(krf_right: int, krf_wrong: int, kr_right: int, kr_wrong: int) -> list[tuple[str, bool]]:
    return ([("KRf", True)] * krf_right + [("KRf", False)] * krf_wrong
            + [("KR", True)] * kr_right + [("KR", False)] * kr_wrong)


def test_kbf_is_the_sample_weighted_harmonic_mean():
    assert kbf(0.5, 1.0, 1, 1) == pytest.approx(2 / (1 / 0.5 + 1 / 1.0))  # 2/3
    assert kbf(0.6, 0.6, 30, 70) == pytest.approx(0.6)
    assert kbf(0.8, 0.4, 3, 1) == pytest.approx(4 / (3 / 0.8 + 1 / 0.4))  # 0.64
    # the paper's pooled ReverieMem row: KRf 68.1, KR 81.2 over 2442:1944 items
    assert round(100 * kbf(0.681, 0.812, 2442, 1944), 1) == 73.3  # type: ignore[operator]


def test_kbf_is_zero_when_either_accuracy_is_zero_and_falls_back_to_the_split_it_has():
    assert kbf(0.0, 0.9, 10, 10) == 0.0
    assert kbf(0.9, 0.0, 10, 10) == 0.0
    assert kbf(0.0, 0.0, 10, 10) == 0.0
    assert kbf(0.7, None, 10, 0) == 0.7  # no KR items: KBF is the KRf accuracy
    assert kbf(None, 0.4, 0, 5) == 0.4  # and vice versa
    assert kbf(None, None, 0, 0) is None


def test_score_counts_each_split_from_pairs_or_a_frame():
    results = _results(7, 3, 4, 4)
    expected = Scores(krf_acc=0.7, kr_acc=0.5, kbf=18 / (10 / 0.7 + 8 / 0.5), n_krf=10, n_kr=8)
    assert score(results) == expected
    frame = pl.DataFrame({"split": [s for s, _ in results], "correct": [c for _, c in results]})
    assert score(frame) == expected
    assert score([]) == Scores(None, None, None, 0, 0)
    assert score([("KRf", True), ("KRf", None)]) == Scores(0.5, None, 0.5, 2, 0)  # unmatched counts wrong
    with pytest.raises(ValueError, match="KRf or KR"):
        score([("KRF", True)])


def test_bootstrap_is_deterministic_for_a_seed_and_contains_the_point_estimate():
    results = _results(14, 6, 11, 9)
    point = score(results)
    for stat in ("krf_acc", "kr_acc", "kbf"):
        low, high = bootstrap_ci(results, stat, seed=3)
        assert (low, high) == bootstrap_ci(results, stat, seed=3)
        assert low is not None and high is not None
        assert 0.0 <= low <= getattr(point, stat) <= high <= 1.0
    assert bootstrap_ci(results, seed=1) != bootstrap_ci(results, seed=2)
    narrow, wide = bootstrap_ci(results, level=0.5), bootstrap_ci(results, level=0.99)
    assert wide[0] <= narrow[0] <= narrow[1] <= wide[1]  # type: ignore[operator]


def test_bootstrap_resamples_within_each_split():
    # all KRf right, all KR wrong: every replicate keeps both splits, so KBF is 0 in all of them
    assert bootstrap_ci(_results(5, 0, 0, 5)) == (0.0, 0.0)
    assert bootstrap_ci(_results(5, 0, 5, 0)) == (1.0, 1.0)
    assert bootstrap_ci(_results(3, 2, 0, 0), "kr_acc") == (None, None)
    assert bootstrap_ci([], "kbf") == (None, None)
    with pytest.raises(ValueError, match="stat"):
        bootstrap_ci(_results(1, 1, 1, 1), "f1")


def _run_frame() -> pl.DataFrame:
    rows = []
    # reveriemem: book-a Mara 3/4 KRf, 2/2 KR; book-b Tobin 1/2 KRf, 1/2 KR
    for book, character, split, correct in [
        ("book-a", "Mara", "KRf", True), ("book-a", "Mara", "KRf", True), ("book-a", "Mara", "KRf", True),
        ("book-a", "Mara", "KRf", False), ("book-a", "Mara", "KR", True), ("book-a", "Mara", "KR", True),
        ("book-b", "Tobin", "KRf", True), ("book-b", "Tobin", "KRf", False), ("book-b", "Tobin", "KR", True),
        ("book-b", "Tobin", "KR", False),
    ]:
        rows.append({"method": "reveriemem", "model": "qwen", "book": book, "character": character, "split": split,
                     "correct": correct})
    # naive-rag: answers every KRf item right and never refuses
    for book, character, split in [("book-a", "Mara", "KRf"), ("book-a", "Mara", "KR"), ("book-b", "Tobin", "KRf"),
                                   ("book-b", "Tobin", "KR")]:
        rows.append({"method": "naive-rag", "model": "qwen", "book": book, "character": character, "split": split,
                     "correct": split == "KRf"})
    return pl.DataFrame(rows)


def test_summarise_scores_each_method_per_book_and_per_character():
    summary = summarise(_run_frame(), n=200)
    assert list(summary) == ["reveriemem", "naive-rag"]
    ours = summary["reveriemem"]
    assert ours["model"] == "qwen"
    assert (ours["krf_acc"], ours["kr_acc"], ours["n_krf"], ours["n_kr"]) == (pytest.approx(4 / 6), 0.75, 6, 4)
    assert ours["kbf"] == pytest.approx(10 / (6 / (4 / 6) + 4 / 0.75))
    assert set(ours["ci"]) == {"krf_acc", "kr_acc", "kbf"}
    for stat, (low, high) in ours["ci"].items():
        assert low <= ours[stat] <= high
    assert ours["per_book"]["book-a"] == {"krf_acc": 0.75, "kr_acc": 1.0, "kbf": pytest.approx(6 / (4 / 0.75 + 2)),
                                          "n_krf": 4, "n_kr": 2}
    assert ours["per_book"]["book-b"]["kbf"] == 0.5
    assert list(ours["per_character"]) == ["book-a/Mara", "book-b/Tobin"]
    assert ours["per_character"]["book-b/Tobin"]["n_krf"] == 2
    theirs = summary["naive-rag"]
    assert (theirs["krf_acc"], theirs["kr_acc"], theirs["kbf"]) == (1.0, 0.0, 0.0)
    assert theirs["ci"]["kbf"] == [0.0, 0.0]
    json.dumps(summary, allow_nan=False)  # plain JSON: no NaN, no numpy scalars


def test_summarise_gives_none_for_a_split_a_book_lacks():
    frame = pl.DataFrame({"method": ["m", "m"], "model": ["x", "x"], "book": ["b", "b"], "character": ["c", "c"],
                          "split": ["KRf", "KRf"], "correct": [True, False]})
    method = summarise(frame, n=50)["m"]
    assert (method["kr_acc"], method["kbf"], method["ci"]["kr_acc"]) == (None, 0.5, [None, None])
    json.dumps(method, allow_nan=False)
    with pytest.raises(ValueError, match="character"):
        summarise(frame.drop("character"))


def _example(gold: str, split: str) -> dspy.Example:
    options = {"A": "A cask fresh off Greaves's cart", "B": "The cask nearest the door",
               "C": "A cask from the back of the north wall", "D": "The cask kept at the Horn Lamp post",
               "E": REFUSAL_OPTION}
    return dspy.Example(question="Mara, from which cask did you fill the Horn Lamp on the fourteenth?",
                        options=options, gold=gold, split=split).with_inputs("question", "options")


def test_kbf_metric_matches_the_reply_against_the_gold_letter():
    krf, kr = _example("B", "KRf"), _example("E", "KR")
    assert kbf_metric(krf, dspy.Prediction(reply="The one nearest the door, as ever.")) == 1.0
    assert kbf_metric(krf, dspy.Prediction(answer="(C)")) == 0.0
    assert kbf_metric(kr, dspy.Prediction(reply="I wasn't there; I couldn't tell you.")) == 1.0
    assert kbf_metric(kr, dspy.Prediction(reply="")) == 0.0  # unmatched is wrong on either split
    assert kbf_metric(krf, dspy.Prediction(reply="B or C"), trace=[]) == 0.0


def test_kbf_of_aggregates_with_the_kbf_formula_and_weighted_metric_balances_the_splits():
    examples = [_example("B", "KRf")] * 3 + [_example("E", "KR")]
    predictions = [dspy.Prediction(reply=r) for r in ("(B)", "(B)", "(A)", "I cannot say.")]
    assert kbf_of(examples, predictions) == pytest.approx(4 / (3 / (2 / 3) + 1 / 1.0))
    assert kbf_of([], []) == 0.0
    # plain accuracy is 3/4; the split-balanced mean is (2/3 + 1) / 2
    metric = weighted_metric(examples)
    assert sum(metric(e, p) for e, p in zip(examples, predictions)) / len(examples) == pytest.approx((2 / 3 + 1) / 2)
    assert metric(examples[3], predictions[3], trace=[]) == 1.0  # bootstrapping: pass or fail, unweighted
    assert weighted_metric(examples[:3]).weights == {"KRf": 1.0}
