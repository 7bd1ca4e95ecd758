"""The KBF-QA runner, `reveriemem eval` and the Dagster evaluation jobs on the demo story."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from eval.runner import RunError, RunSpec, run_evaluation
from reveriemem.core.demo import DEMO_SLUG, demo_gold
from reveriemem_dagster.cli import main

FAST = ["direct", "evidence", "reveriemem-no-semantic"]


def _gold_file(tmp_path: Path, items: list[dict] | None = None) -> Path:
    path = tmp_path / "gold.jsonl"
    records = items if items is not None else demo_gold()["items"]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_a_run_writes_results_summary_and_report_and_repeats_exactly(built_demo, tmp_path: Path) -> None:
    out = tmp_path / "run"
    spec = RunSpec(book=DEMO_SLUG, out=out, items=_gold_file(tmp_path), methods=FAST, lm="none")
    first = run_evaluation(spec)
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["methods"]) == FAST and summary["model"] == "none"
    for name in FAST:
        entry = summary["methods"][name]
        assert entry["n_krf"] == 15 and entry["n_kr"] == 15 and entry["model"] == "none"
        assert {"krf_acc", "kr_acc", "kbf", "ci", "per_book", "per_character"} <= set(entry)
    results = pl.read_parquet(out / "results.parquet")
    assert results.height == 30 * len(FAST)
    assert results.filter(pl.col("choice").is_null()).height == 0  # offline methods always choose a letter
    # without a fact pool the agent reads only its own scene notes: it recalls far less than the evidence answerer
    no_semantic = summary["methods"]["reveriemem-no-semantic"]
    details = results.filter(pl.col("method") == "reveriemem-no-semantic")["detail"].to_list()
    assert all(not (json.loads(d) if isinstance(d, str) else d)["facts"] for d in details)
    assert no_semantic["kbf"] < summary["methods"]["evidence"]["kbf"], (no_semantic, summary["methods"]["evidence"])
    assert (out / "report.md").is_file() and (out / "report.html").is_file()
    assert "evidence" in (out / "report.md").read_text()

    # the same items with the same model: nothing is answered again and the numbers are the same
    again = run_evaluation(spec)
    assert again.answered == 0 and again.resumed == 30 * len(FAST)
    assert {k: v["kbf"] for k, v in again.summary["methods"].items()} == \
           {k: v["kbf"] for k, v in first.summary["methods"].items()}


def test_an_interrupted_run_resumes_where_it_stopped(built_demo, tmp_path: Path) -> None:
    out = tmp_path / "run"
    spec = RunSpec(book=DEMO_SLUG, out=out, items=_gold_file(tmp_path), methods=["evidence"], lm="none")
    complete = run_evaluation(spec).summary["methods"]["evidence"]
    partial = out / "partial" / "evidence.jsonl"
    lines = partial.read_text().splitlines()
    partial.write_text("\n".join(lines[:12]) + "\n" + lines[12][:25])  # killed while writing line 13
    resumed = run_evaluation(spec)
    assert resumed.answered == 18 and resumed.resumed == 12
    assert resumed.summary["methods"]["evidence"]["kbf"] == complete["kbf"]


def test_a_folder_holding_another_run_is_not_mixed(built_demo, tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_evaluation(RunSpec(book=DEMO_SLUG, out=out, items=_gold_file(tmp_path), methods=["evidence"], lm="none"))
    fewer = _gold_file(tmp_path / "other", demo_gold()["items"][:10]) if (tmp_path / "other").mkdir() is None else None
    assert fewer is not None
    with pytest.raises(RunError, match="another items"):
        run_evaluation(RunSpec(book=DEMO_SLUG, out=out, items=fewer, methods=["evidence"], lm="none"))


def test_unknown_methods_and_parts_get_one_sentence(built_demo, tmp_path: Path) -> None:
    with pytest.raises(RunError, match="Unknown method"):
        run_evaluation(RunSpec(book=DEMO_SLUG, out=tmp_path / "x", methods=["oracle"], lm="none"))
    with pytest.raises(RunError, match="part 'train'"):
        run_evaluation(RunSpec(book=DEMO_SLUG, out=tmp_path / "y", items=_gold_file(tmp_path), part="train",
                               methods=["evidence"], lm="none"))


def test_eval_command_on_generated_held_out_items(built_demo, tmp_path: Path) -> None:
    out = tmp_path / "cli-run"
    result = CliRunner().invoke(main, ["eval", DEMO_SLUG, "--methods", "evidence,direct", "--part", "held-out",
                                       "--limit", "24", "--out", str(out), "--lm", "none", "-q"])
    assert result.exit_code == 0, result.output
    assert "evidence" in result.output and "Report:" in result.output
    items = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
    assert len(items) == 24 and {i["provenance"]["part"] for i in items} == {"held-out"}
    assert {i["split"] for i in items} == {"KRf", "KR"}
    items_out = tmp_path / "items.jsonl"
    result = CliRunner().invoke(main, ["items", DEMO_SLUG, "--out", str(items_out), "--per-split", "5"])
    assert result.exit_code == 0, result.output
    assert "KRf" in result.output and items_out.is_file()


def test_eval_of_a_book_not_built_says_what_to_run(demo_book, tmp_path: Path) -> None:
    from reveriemem.core.registry import write_book

    write_book(demo_book)
    result = CliRunner().invoke(main, ["eval", DEMO_SLUG, "--out", str(tmp_path / "r")])
    assert result.exit_code == 1 and f"reveriemem build {DEMO_SLUG}" in result.output


@pytest.mark.slow
def test_dagster_items_assets_and_the_evaluation_job(built_demo, isolated_home, tmp_path: Path) -> None:
    """kbf_items materialised per pair, then `dagster job execute -j kbf_evaluation` for the book."""
    import os
    import subprocess
    import sys

    import dagster as dg

    from reveriemem.core.registry import load_book
    from reveriemem.core.settings import data_home
    from reveriemem.core.storage import ParquetStore, PartitionRef
    from reveriemem_dagster.definitions import ALL_ASSETS
    from reveriemem_dagster.definitions import evaluation_assets as ev
    from reveriemem_dagster.instance import get_instance
    from reveriemem_dagster.io_managers import MemoryIOManager
    from reveriemem_dagster.partitions import pair_key
    from reveriemem_dagster.resources import EmbeddingModel, LanguageModel

    instance = get_instance()
    book = load_book(DEMO_SLUG)
    resources = {"lm": LanguageModel(), "embedder": EmbeddingModel(), "memory_io": MemoryIOManager()}
    for character in book.characters:
        result = dg.materialize(ALL_ASSETS, selection=[ev.kbf_items], partition_key=pair_key(DEMO_SLUG, character.slug),
                                instance=instance, resources=resources)
        assert result.success
        [check] = result.get_asset_check_evaluations()
        assert check.passed
    mara = ParquetStore(data_home() / "parquet").read("kbf_items", PartitionRef(DEMO_SLUG, "mara-quell"))
    assert mara.height > 0 and set(mara["split"]) == {"KRf", "KR"}

    config = tmp_path / "run.yaml"
    config.write_text("ops:\n  kbf_report:\n    config:\n      methods: [evidence, direct]\n      part: held-out\n")
    run = subprocess.run([sys.executable, "-m", "dagster", "job", "execute", "-m", "reveriemem_dagster.definitions",
                          "-j", "kbf_evaluation", "-c", str(config),
                          "--tags", json.dumps({"dagster/partition": DEMO_SLUG})],
                         cwd=Path(__file__).resolve().parents[1], env={**os.environ}, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads((data_home() / "eval" / DEMO_SLUG / "none" / "summary.json").read_text())
    assert list(summary["methods"]) == ["evidence", "direct"]
    assert summary["methods"]["evidence"]["n_kr"] > 0
