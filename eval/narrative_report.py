"""The Markdown and self-contained HTML report of a Task 2 batch (`eval.narrative_runner`).

Laid out with the KBF-QA report's blocks and templates (`eval.report`); every figure is
labelled with its generator and judge models, and a fake or tiny model's figures are
marked as wiring only (`eval.report_run.model_label`). The paper's Task 2 win rates
(generator gpt-5-mini, judge gpt-4o) stand beside ours for reference.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eval.report import Paragraph, Section, Table, render_html, render_markdown
from eval.report_run import model_label, model_note
from reveriemem.narrative.log import Story

MARKDOWN_NAME, HTML_NAME = "report.md", "report.html"
STORY_CHARS = 1500  # of each story shown in the report

# The paper's Table (task2-full), generator gpt-5-mini, judge gpt-4o: RM's win rate (%) per dimension.
PAPER_GPT5_MINI = {
    ("direct", "script"): [86.8, 98.6, 97.9, 99.0, 99.4], ("hollmwood", "script"): [83.1, 97.5, 90.9, 94.7, 97.6],
    ("bookworld", "script"): [68.3, 93.1, 67.7, 90.5, 96.3], ("direct", "free"): [95.2, 85.5, 99.6, 99.4, 98.8],
    ("hollmwood", "free"): [71.0, 76.5, 97.4, 98.4, 97.3], ("bookworld", "free"): [65.3, 67.6, 78.2, 94.4, 92.6],
}
# The paper's ablation table (task2): the full system's win rate (%) over each ablated variant.
PAPER_ABLATION = {
    ("reveriemem-no-episodic", "script"): [61.7, 66.7, 83.3, 86.7, 75.0],
    ("reveriemem-no-semantic", "script"): [66.7, 65.0, 81.7, 86.7, 81.7],
    ("reveriemem-no-personality", "script"): [61.7, 58.3, 66.7, 93.3, 86.7],
    ("reveriemem-no-episodic", "free"): [53.3, 51.7, 68.3, 91.7, 76.7],
    ("reveriemem-no-semantic", "free"): [51.7, 53.3, 80.0, 96.7, 75.0],
    ("reveriemem-no-personality", "free"): [55.0, 50.0, 75.0, 93.3, 85.0],
}
ORDER = ["An", "CF", "IS", "WQ", "SQ", "Cr"]


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def _header(summary: dict[str, Any]) -> Section:
    judge = summary["judge_model"]
    blocks: list[Any] = [
        Paragraph(f"Book: {summary['book']}. Generator: {model_label(summary['model'])}"
                  f"{_resolved(summary['model'], summary.get('model_name', ''))}. "
                  f"Judge: {model_label(judge) + _resolved(judge, summary.get('judge_model_name', '')) if judge else 'none (stories only)'}."),
        Paragraph(f"Scripts: {len(summary['scripts'])}; methods: {', '.join(summary['methods'])}; "
                  f"judgements: {summary['judgements']} (each judged in both orders; an order disagreement is a tie)"
                  f"{_unparsed(summary.get('unparsed_verdicts', 0))}."),
    ]
    if not summary.get("complete", True):
        blocks.append(Paragraph(f"Partial: {summary['stories_done']} of {summary['stories_total']} stories and the "
                                f"judgements of their pairs so far; the batch is still running or was stopped (a "
                                f"rerun resumes it).", note=True))
    notes = {model_note(summary["model"]), model_note(summary["judge_model"])} - {""}
    if notes:
        blocks.append(Paragraph("Wiring only: " + "; ".join(sorted(notes)) + ". These figures say nothing about "
                                "the quality of any method.", note=True))
    return Section("Run", blocks)


def _resolved(spec: str, name: str) -> str:
    return f", run as {name}" if name and name != spec else ""


def _unparsed(count: int) -> str:
    return f"; {count} verdict(s) never parsed and were counted as ties" if count else ""


def _win_section(summary: dict[str, Any]) -> Section:
    rows = []
    cells: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in summary["win_rates"]:
        cells[(r["second"], r["mode"], r["short"])] = r
    for (second, mode) in sorted({(k[0], k[1]) for k in cells}):
        row = [f"{summary['methods'][0]} vs {second}", mode]
        for short in ORDER:
            r = cells.get((second, mode, short))
            row.append(f"{_pct(r['win_rate'])} [{_pct(r['ci'][0])}, {_pct(r['ci'][1])}] "
                       f"({r['wins']}/{r['ties']}/{r['losses']})" if r else "")
        rows.append(row)
    label = f"generator {model_label(summary['model'], short=True)}, judge {model_label(summary['judge_model'], short=True)}"
    blocks: list[Any] = [Paragraph(f"Win rate (%) of the first method, (wins + ties/2) / judged, with a 95% "
                                   f"bootstrap interval and wins/ties/losses; {label}.")]
    blocks.append(Table(["comparison", "mode", *ORDER], rows, numeric=set(range(2, 8))) if rows
                  else Paragraph("No judgements (no judge model was given).", note=True))
    return Section("Pairwise win rates (ours)", blocks)


def _paper_section() -> Section:
    rows = [[f"RM vs {other}", mode, *[f"{v:.1f}" for v in values]]
            for source in (PAPER_GPT5_MINI, PAPER_ABLATION) for (other, mode), values in source.items()]
    return Section("The paper's win rates (for reference)", [
        Paragraph("From the paper's Task 2 tables: generator gpt-5-mini, judge gpt-4o, BookWorld's scripts "
                  "(ablations: the paper's ablation table). The fifth column is SQ with a script, Cr without."),
        Table(["comparison", "mode", "An", "CF", "IS", "WQ", "SQ/Cr"], rows, numeric=set(range(2, 7)))])


def _methods_section(summary: dict[str, Any]) -> Section:
    rows = []
    for method, m in summary["per_method"].items():
        realised = f"{m['stages_realised']}/{m['stages']}" if m["stages"] else "n/a"
        steps = "; ".join(f"{k}: {', '.join(v)}" for k, v in m["steps"].items())
        rows.append([method, str(m["stories"]), str(m["moves"]), str(m.get("goal_moves", "")), realised,
                     str(m["calls"]), f"{m['seconds']:.1f}", steps])
    return Section("Stories", [
        Table(["method", "stories", "moves", "moves = goal", "stages realised", "model calls", "seconds",
               "how each step was decided"], rows, numeric={1, 2, 3, 5, 6}),
        Paragraph("'moves = goal': moves that are the director's goal word for word, the fallback when the "
                  "model's move never parsed (or a model that only echoed its goal).", note=True)])


def _samples(run_dir: Path, summary: dict[str, Any]) -> Section:
    blocks: list[Any] = []
    for script in summary["scripts"][:1]:
        for method in summary["methods"]:
            path = run_dir / "stories" / script / f"{method}.json"
            if path.is_file():
                story = Story.from_dict(json.loads(path.read_text(encoding="utf-8")))
                text = story.text if len(story.text) <= STORY_CHARS else story.text[:STORY_CHARS] + " ..."
                blocks.append(Paragraph(f"{method}: {text}"))
    return Section(f"Sample stories ({summary['scripts'][0] if summary['scripts'] else 'none'})", blocks)


def write_report(run_dir: Path) -> tuple[Path, Path]:
    """Write report.md and report.html of a batch folder from its summary.json and stories."""
    run_dir = Path(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    title = f"Task 2 stories and pairwise judgements: {summary['book']}"
    sections = [_header(summary), _win_section(summary), _methods_section(summary), _paper_section(),
                _samples(run_dir, summary)]
    md, html = run_dir / MARKDOWN_NAME, run_dir / HTML_NAME
    md.write_text(render_markdown(title, sections), encoding="utf-8")
    html.write_text(render_html(title, sections), encoding="utf-8")
    return md, html
