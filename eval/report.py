"""The KBF-QA report of one evaluation run: Markdown, one self-contained HTML page and an SVG plot.

A run directory (written by the evaluation runner) holds `summary.json` and
`results.parquet` (`eval.report_run` reads them). `write_report(run_dir)`
writes, beside them:

- `report.md`: the tables, embedding the plot as `recall_refusal.svg`;
- `report.html`: the same tables and the plot as inline SVG, in one file with
  no scripts, no external files and no network (open it anywhere);
- `recall_refusal.svg`: recall (KRf accuracy) against refusal (KR accuracy),
  drawn by `eval.recall_refusal`.

This module gathers the report's sections (tables and paragraphs of plain
text); the jinja2 templates in `eval/templates/` lay them out, the HTML one
with autoescaping, so a character's name can never become markup. Every figure
is labelled with the model that produced it, and the paper's figures
(`eval.paper_figures`) stand beside ours, labelled gpt-5-mini.

`python -m eval.report DIR` rewrites the report of an existing run.
"""

from __future__ import annotations

import html
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import jinja2
import polars as pl
from markupsafe import Markup

from eval import paper_figures as paper
from eval.recall_refusal import plot_points, recall_refusal_svg
from eval.report_run import (
    NO_VALUE,
    RESULTS_NAME,
    SUMMARY_NAME,
    ReportError,
    Run,
    calls,
    count,
    counts,
    delta,
    load_run,
    model_label,
    model_note,
    number,
    paper_percent,
    percent,
    seconds,
    with_ci,
)

__all__ = ["HTML_NAME", "MARKDOWN_NAME", "RESULTS_NAME", "SUMMARY_NAME", "SVG_NAME", "ReportError", "build_sections",
           "load_run", "main", "model_label", "model_note", "percent", "with_ci", "write_report"]

MARKDOWN_NAME = "report.md"
HTML_NAME = "report.html"
SVG_NAME = "recall_refusal.svg"

_SCORES = ("krf_acc", "kr_acc", "kbf")
_LETTERS = ("A", "B", "C", "D", "E")
_REFUSAL = "E"


# ---------------------------------------------------------------------------
# The document: sections of paragraphs, tables and a figure, laid out by the templates


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    numeric: set[int] = field(default_factory=set)  # right-aligned columns
    css: str = ""  # a CSS class for the HTML table
    block: ClassVar[str] = "table"


@dataclass
class Paragraph:
    text: str
    note: bool = False  # a caveat, set apart
    block: ClassVar[str] = "paragraph"


@dataclass
class Figure:
    svg: Markup  # inline SVG markup, trusted: written by eval.recall_refusal
    markdown_src: str
    caption: str
    alt: str
    anchor: str = "recall-refusal"
    block: ClassVar[str] = "figure"


Block = Table | Paragraph | Figure


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)


# ---------------------------------------------------------------------------
# The sections


def _score_cells(scores: dict[str, Any], with_intervals: bool) -> list[str]:
    ci = scores.get("ci") or {}
    if with_intervals:
        return [with_ci(scores.get(key), ci.get(key)) for key in _SCORES]
    return [percent(scores.get(key)) for key in _SCORES]


def _header_section(run: Run) -> Section:
    summary = run.summary
    items = summary.get("items") or {}
    books = items.get("books") or []
    models = sorted({run.method_model(name) for name in run.methods} | {run.model})
    rows = [
        ["Run", run.directory.name],
        ["Model", model_label(run.model)],
        ["Embedder", str(summary.get("embedder") or NO_VALUE)],
        ["Items", f"{count(items.get('n'))} ({items.get('source') or 'source not recorded'})"],
        ["Books", ", ".join(str(book) for book in books) or NO_VALUE],
        ["Created", str(summary.get("created") or NO_VALUE)],
        ["Machine", str(summary.get("machine") or NO_VALUE)],
    ]
    section = Section("Run", [Table(["", ""], rows, css="facts")])
    notes = [model_note(model) for model in models]
    if any(notes):
        flagged = "; ".join(f"{model} — {note}" for model, note in zip(models, notes) if note)
        section.blocks.append(Paragraph(
            f"Every figure is labelled with the model that produced it. {flagged}. Figures from no model or a fake "
            "or tiny model prove the wiring, not quality; they say nothing about how the method compares with "
            f"the paper's {paper.PAPER_MODEL} figures.", note=True))
    else:
        section.blocks.append(Paragraph(f"Every figure is labelled with the model that produced it: this run's model "
                                        f"is {run.model}; the paper's figures are from {paper.PAPER_MODEL}."))
    return section


def _methods_section(run: Run) -> Section:
    rows = []
    for name, method in run.methods.items():
        rows.append([name, model_label(run.method_model(name)), *_score_cells(method, True), counts(method),
                     calls(method), seconds(method.get("seconds"))])
    table = Table(["Method", "Model", "KRf acc % (95% CI)", "KR acc % (95% CI)", "KBF % (95% CI)", "n_krf:n_kr",
                   "Calls per item (median)", "Seconds"], rows, numeric={2, 3, 4, 5, 6, 7})
    section = Section("Results per method", [table])
    if not rows:
        section.blocks.append(Paragraph("The summary lists no methods."))
    section.blocks.append(Paragraph(
        "KRf: items whose fact the character could know (gold among A–D); KR: items it could not (gold E, refusal). "
        "KBF is their sample-weighted harmonic mean. — means the run had no items of that split."))
    return section


def _plot_section(run: Run) -> Section:
    _, missing = plot_points(run)
    caption = (f"Recall (KRf accuracy, x) against refusal (KR accuracy, y). Filled circles: this run's methods, "
               f"model {model_label(run.model)} (a method run on another model names it in brackets). Hollow "
               f"diamonds: the paper's published figures, {paper.PAPER_MODEL}. A dashed line joins a method to "
               "the paper's row of the same method.")
    section = Section("Recall versus refusal", [Figure(Markup(recall_refusal_svg(run)), SVG_NAME, caption,
                                                         "Recall versus refusal plot")])
    if missing:
        section.blocks.append(Paragraph("Not plotted (no KRf or no KR items): " + ", ".join(missing) + "."))
    return section


def _paper_section(run: Run) -> Section:
    rows = []
    ours = run.methods
    shown: set[str] = set()
    for name, method in ours.items():
        row = paper.paper_row(name)
        score = paper.POOLED.get(row) if row else None
        if row:
            shown.add(row)
        rows.append([name, row or "(not in the paper)", model_label(run.method_model(name), short=True),
                     percent(method.get("krf_acc")), paper_percent(score.krf_acc if score else None),
                     percent(method.get("kr_acc")), paper_percent(score.kr_acc if score else None),
                     percent(method.get("kbf")), paper_percent(score.kbf if score else None),
                     delta(method.get("kbf"), score.kbf if score else None)])
    for row, score in paper.POOLED.items():
        if row not in shown:
            ours_name = next((m for m, r in paper.METHOD_TO_PAPER.items() if r == row), row)
            rows.append([ours_name, row, "(not run)", NO_VALUE, paper_percent(score.krf_acc), NO_VALUE,
                         paper_percent(score.kr_acc), NO_VALUE, paper_percent(score.kbf), NO_VALUE])
    pm = paper.PAPER_MODEL
    table = Table(["Method", "Paper row", "Our model", "KRf % ours", f"KRf % paper ({pm})", "KR % ours",
                   f"KR % paper ({pm})", "KBF % ours", f"KBF % paper ({pm})", "KBF Δ (points)"],
                  rows, numeric=set(range(3, 10)))
    n_items = count((run.summary.get("items") or {}).get("n"))
    return Section("Beside the paper", [table, Paragraph(
        f"The paper's figures (tab:task1-pooled and tab:ablation-task1) are from {pm} under greedy decoding on "
        f"{paper.PAPER_N_KRF + paper.PAPER_N_KR:,} items over {len(paper.BY_BOOK)} books "
        f"({paper.PAPER_N_KRF:,} KRf : {paper.PAPER_N_KR:,} KR); ours are from {run.model} on {n_items:,} items. "
        "Δ is ours minus the paper's.")])


def _book_section(run: Run) -> Section:
    rows = []
    books: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for name, method in run.methods.items():
        for book, scores in (method.get("per_book") or {}).items():
            if isinstance(scores, dict):
                books.setdefault(str(book), []).append((name, scores))
    for book in sorted(books):
        published = paper.BY_BOOK.get(book)
        for name, scores in books[book]:
            theirs = paper.paper_book_kbf(name, book)
            rows.append([book, name, model_label(run.method_model(name), short=True),
                         *_score_cells(scores, False),
                         counts(scores), paper_percent(theirs),
                         f"{published.n_krf}:{published.n_kr}" if published else NO_VALUE])
    table = Table(["Book", "Method", "Model", "KRf acc %", "KR acc %", "KBF %", "n_krf:n_kr",
                   f"Paper KBF % ({paper.PAPER_MODEL})", "Paper n_krf:n_kr"], rows, numeric={3, 4, 5, 6, 7, 8})
    blocks: list[Block] = [table] if rows else [Paragraph("The summary has no per-book scores.")]
    blocks.append(Paragraph(
        f"Paper KBF: tab:task1-by-book ({paper.PAPER_MODEL}), for the books and methods the paper reports "
        "(it gives no per-book figures for the ablations)."))
    return Section("Per book", blocks)


def _character_section(run: Run) -> Section:
    rows = []
    for name, method in run.methods.items():
        for key, scores in sorted((method.get("per_character") or {}).items()):
            if not isinstance(scores, dict):
                continue
            book, _, character = str(key).partition("/")
            if not character:
                book, character = NO_VALUE, book
            rows.append([character, book, name, model_label(run.method_model(name), short=True),
                         *_score_cells(scores, False), counts(scores)])
    rows.sort(key=lambda row: (row[1], row[0]))
    table = Table(["Character", "Book", "Method", "Model", "KRf acc %", "KR acc %", "KBF %", "n_krf:n_kr"], rows,
                  numeric={4, 5, 6, 7})
    return Section("Per character", [table] if rows else [Paragraph("The summary has no per-character scores.")])


def _compiled_section(run: Run) -> Section | None:
    compiled = run.summary.get("compiled")
    if not isinstance(compiled, dict):
        return None
    before, after = compiled.get("before") or {}, compiled.get("after") or {}
    names = list(dict.fromkeys([*before, *after]))
    rows = []
    for name in names:
        old, new = before.get(name) or {}, after.get(name) or {}
        model = str(new.get("model") or old.get("model") or run.method_model(name))
        kbf_old, kbf_new = number(old.get("kbf")), number(new.get("kbf"))
        change = NO_VALUE if kbf_old is None or kbf_new is None else f"{100 * (kbf_new - kbf_old):+.1f}"
        rows.append([name, model_label(model, short=True), *_score_cells(old, False), *_score_cells(new, False),
                     change, counts(new or old)])
    split = str(compiled.get("split") or "held-out")
    optimizer = str(compiled.get("optimizer") or "DSPy optimizer")
    table = Table(["Method", "Model", "KRf % before", "KR % before", "KBF % before", "KRf % after", "KR % after",
                   "KBF % after", "KBF Δ (points)", "n_krf:n_kr"], rows, numeric=set(range(2, 10)))
    return Section(f"Compiled programs ({optimizer}), {split} split",
                   [table, Paragraph(f"Scores before and after compiling the programs with {optimizer}, on the "
                                     f"{split} split only (items not used for compiling).")])


def _share(part: pl.DataFrame, condition: pl.Expr) -> str:
    return NO_VALUE if part.height == 0 else f"{100 * part.filter(condition).height / part.height:.1f}"


def _answers_section(run: Run) -> Section:
    section = Section("Answers")
    frame = run.results
    needed = {"method", "split", "choice"}
    if frame is None or not needed <= set(frame.columns):
        reason = run.results_problem or f"{RESULTS_NAME} lacks the columns {', '.join(sorted(needed))}"
        section.blocks.append(Paragraph(f"No answer breakdown: {reason}."))
        return section
    frame = frame.with_columns(pl.col("choice").cast(pl.Utf8).str.strip_chars().str.to_uppercase().alias("choice"),
                               pl.col("split").cast(pl.Utf8).str.to_lowercase().alias("split"),
                               pl.col("method").cast(pl.Utf8).alias("method"))
    rows = []
    order = list(run.methods) + sorted(set(frame["method"].drop_nulls().unique().to_list()) - set(run.methods))
    for name in order:
        mine = frame.filter(pl.col("method") == name)
        if mine.height == 0:
            continue
        models = sorted({str(m) for m in mine["model"].drop_nulls().unique().to_list()}) if "model" in mine.columns \
            else [run.method_model(name)]
        krf, kr = mine.filter(pl.col("split") == "krf"), mine.filter(pl.col("split") == "kr")
        unmatched = mine.filter(pl.col("choice").is_null() | ~pl.col("choice").is_in(list(_LETTERS))).height

        labels = ", ".join(model_label(m, short=True) for m in models)
        rows.append([name, labels or model_label(run.method_model(name), short=True),
                     str(mine.height), _share(mine, pl.col("choice") == _REFUSAL),
                     _share(krf, pl.col("choice") == _REFUSAL),
                     _share(kr, pl.col("choice").is_in(list(_LETTERS[:4]))),
                     f"{100 * unmatched / mine.height:.1f}"])
    section.blocks.append(Table(["Method", "Model", "Items", "Refused (E) %", "KRf items refused %",
                                 "KR items answered A–D %", "Unmatched reply %"], rows, numeric={2, 3, 4, 5, 6}))
    section.blocks.append(Paragraph(
        "From results.parquet. KRf items refused: over-refusal of what the character could know; KR items answered "
        "A–D: factual overreach. Unmatched: replies that could not be matched to a letter (scored wrong)."))
    return section


def build_sections(run: Run) -> list[Section]:
    """The report's sections, in order (the plot comes right after the main table)."""
    sections = [_header_section(run), _methods_section(run), _plot_section(run), _paper_section(run)]
    compiled = _compiled_section(run)
    if compiled is not None:
        sections.append(compiled)
    sections += [_book_section(run), _character_section(run), _answers_section(run)]
    return sections


def report_title(run: Run) -> str:
    return f"KBF-QA report — {run.directory.name} ({run.model})"


# ---------------------------------------------------------------------------
# Rendering


def _md_escape(text: Any) -> str:
    """Plain text made inert in Markdown: one line, Markdown's active characters and HTML's brackets escaped."""
    text = " ".join(str(text).split())
    for char in ("\\", "|", "*", "`", "[", "]"):
        text = text.replace(char, "\\" + char)
    return text.replace("<", "&lt;").replace(">", "&gt;")


@jinja2.pass_eval_context
def _escape_html(eval_ctx: jinja2.nodes.EvalContext, value: Any) -> Any:
    """Under autoescape, escape as the standard library does (`&quot;`, `&#x27;`); trusted Markup passes."""
    if eval_ctx.autoescape and not isinstance(value, Markup):
        return Markup(html.escape(str(value), quote=True))
    return value


_TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("eval", "templates"),
    autoescape=jinja2.select_autoescape(enabled_extensions=("html",), default_for_string=False),
    finalize=_escape_html,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)
_TEMPLATES.filters["md"] = _md_escape


def render_markdown(title: str, sections: Sequence[Section]) -> str:
    text = _TEMPLATES.get_template("report.md").render(title=title, sections=sections)
    return text.rstrip() + "\n"


def render_html(title: str, sections: Sequence[Section]) -> str:
    return _TEMPLATES.get_template("report.html").render(title=title, sections=sections)


def write_report(run_dir: Path) -> tuple[Path, Path]:
    """Write `report.md` (with `recall_refusal.svg`) and `report.html` into a run directory; return both paths."""
    run_dir = Path(run_dir)
    run = load_run(run_dir)
    sections = build_sections(run)
    title = report_title(run)
    (run_dir / SVG_NAME).write_text(recall_refusal_svg(run, standalone=True), encoding="utf-8")
    markdown_path, html_path = run_dir / MARKDOWN_NAME, run_dir / HTML_NAME
    markdown_path.write_text(render_markdown(title, sections), encoding="utf-8")
    html_path.write_text(render_html(title, sections), encoding="utf-8")
    return markdown_path, html_path


def main(argv: Iterable[str] | None = None) -> int:
    """`python -m eval.report DIR`: rewrite the report of an existing run."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] in {"-h", "--help"}:
        print("usage: python -m eval.report RUN_DIR  (rewrites RUN_DIR/report.md and RUN_DIR/report.html)",
              file=sys.stderr)
        return 0 if args and args[0] in {"-h", "--help"} else 2
    try:
        markdown_path, html_path = write_report(Path(args[0]))
    except ReportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(markdown_path)
    print(html_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
