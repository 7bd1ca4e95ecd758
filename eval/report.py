"""The KBF-QA report of one evaluation run: Markdown, self-contained HTML and an SVG plot.

A run directory (written by the evaluation runner) holds `summary.json` (the
scores per method, pooled, per book and per character, with 95% CIs) and
`results.parquet` (one row per method and item). `write_report(run_dir)`
writes, beside them:

- `report.md` — the tables, embedding the plot as `recall_refusal.svg`;
- `report.html` — the same tables and the plot as inline SVG, in one file with
  no scripts and no network (open it anywhere);
- `recall_refusal.svg` — recall (KRf accuracy) against refusal (KR accuracy),
  one filled circle per method of this run, one hollow diamond per row the
  paper publishes (gpt-5-mini).

Every figure is labelled with the model that produced it; a run on no model
(`none`, the deterministic path) or on a fake or tiny model (the bundled
SmolLM2-135M) says so plainly: such a run proves the wiring, not quality.
The paper's figures (`eval.paper_figures`) stand beside ours, labelled
gpt-5-mini.

`python -m eval.report DIR` rewrites the report of an existing run.
"""

from __future__ import annotations

import html
import json
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from eval import paper_figures as paper
from reveriemem.core.errors import ReverieMemError

SUMMARY_NAME = "summary.json"
RESULTS_NAME = "results.parquet"
MARKDOWN_NAME = "report.md"
HTML_NAME = "report.html"
SVG_NAME = "recall_refusal.svg"

NO_VALUE = "—"
_SCORES = ("krf_acc", "kr_acc", "kbf")
_LETTERS = ("A", "B", "C", "D", "E")
_REFUSAL = "E"
# Marker colours of this run's methods, in summary order (the paper's markers are grey).
_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
            "#bcbd22", "#393b79", "#637939", "#843c39")
_PAPER_COLOUR = "#555555"


class ReportError(ReverieMemError):
    """A run directory has no readable summary.json."""


# ---------------------------------------------------------------------------
# Models and numbers


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


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def percent(value: Any) -> str:
    """A fraction in [0, 1] as a percentage with one decimal; `—` for null."""
    number = _number(value)
    return NO_VALUE if number is None else f"{100 * number:.1f}"


def with_ci(value: Any, ci: Any) -> str:
    """`68.1 (60.2–75.0)`: a percentage and its 95% interval, when there is one."""
    text = percent(value)
    if text == NO_VALUE or not isinstance(ci, list | tuple) or len(ci) != 2:
        return text
    low, high = _number(ci[0]), _number(ci[1])
    if low is None or high is None:
        return text
    return f"{text} ({100 * low:.1f}–{100 * high:.1f})"


def _count(value: Any) -> int:
    number = _number(value)
    return int(number) if number is not None else 0


def _counts(scores: dict[str, Any]) -> str:
    return f"{_count(scores.get('n_krf'))}:{_count(scores.get('n_kr'))}"


def _paper_percent(value: float | None) -> str:
    return NO_VALUE if value is None else f"{value:.1f}"


def _delta(ours: Any, theirs: float | None) -> str:
    number = _number(ours)
    if number is None or theirs is None:
        return NO_VALUE
    return f"{100 * number - theirs:+.1f}"


def _calls(method: dict[str, Any]) -> str:
    calls = method.get("calls_per_item") or {}
    median, most = _number(calls.get("median")), _number(calls.get("max"))
    if median is None:
        return NO_VALUE
    text = f"{median:g}"
    return f"{text} (max {most:g})" if most is not None else text


def _seconds(value: Any) -> str:
    number = _number(value)
    return NO_VALUE if number is None else f"{number:,.1f}"


# ---------------------------------------------------------------------------
# The document: sections of paragraphs and tables, rendered to Markdown and HTML


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    numeric: set[int] = field(default_factory=set)  # right-aligned columns
    kind: str = ""  # a CSS class for the HTML table


@dataclass
class Paragraph:
    text: str
    note: bool = False  # a caveat, set apart


@dataclass
class Figure:
    svg: str
    markdown_src: str
    caption: str
    alt: str


Block = Table | Paragraph | Figure


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)


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


def _md_escape(text: str) -> str:
    text = " ".join(str(text).split())
    for char in ("\\", "|", "*", "`", "[", "]"):
        text = text.replace(char, "\\" + char)
    return text.replace("<", "&lt;").replace(">", "&gt;")


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def render_markdown(title: str, sections: Sequence[Section]) -> str:
    lines = [f"# {_md_escape(title)}", ""]
    for section in sections:
        lines += [f"## {_md_escape(section.title)}", ""]
        for block in section.blocks:
            if isinstance(block, Paragraph):
                lines.append(f"> **Note:** {_md_escape(block.text)}" if block.note else _md_escape(block.text))
            elif isinstance(block, Figure):
                lines.append(f"![{_md_escape(block.alt)}]({block.markdown_src})")
                lines += ["", f"*{_md_escape(block.caption)}*"]
            else:
                lines.append("| " + " | ".join(_md_escape(h) for h in block.headers) + " |")
                lines.append("|" + "|".join("---:" if i in block.numeric else "---"
                                            for i in range(len(block.headers))) + "|")
                for row in block.rows:
                    lines.append("| " + " | ".join(_md_escape(cell) for cell in row) + " |")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


_CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: #1f2328;
       background: #ffffff; margin: 0; }
main { max-width: 1120px; margin: 0 auto; padding: 24px 32px 48px; }
h1 { font-size: 26px; margin: 8px 0 16px; }
h2 { font-size: 19px; margin: 32px 0 10px; padding-bottom: 4px; border-bottom: 1px solid #d8dee4; }
p { line-height: 1.5; margin: 8px 0; }
p.note { background: #fff8e1; border-left: 4px solid #e0a800; padding: 8px 12px; }
table { border-collapse: collapse; margin: 10px 0 4px; font-size: 13.5px; }
th, td { border: 1px solid #d8dee4; padding: 4px 9px; text-align: left; vertical-align: top; }
th { background: #f3f5f7; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num, td:first-child { white-space: nowrap; }
.scroll { overflow-x: auto; }
tbody tr:nth-child(even) td { background: #fafbfc; }
table.facts td:first-child { font-weight: 600; background: #f3f5f7; width: 110px; }
table.facts td:last-child { min-width: 560px; }
figure { margin: 12px 0; }
figure svg { max-width: 100%; height: auto; border: 1px solid #e5e7eb; }
figcaption { font-size: 13px; color: #57606a; margin-top: 4px; max-width: 720px; }
"""


def render_html(title: str, sections: Sequence[Section]) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{_esc(title)}</title>", f"<style>{_CSS}</style>", "</head>", "<body>", "<main>",
           f"<h1>{_esc(title)}</h1>"]
    for section in sections:
        out.append(f"<section><h2>{_esc(section.title)}</h2>")
        for block in section.blocks:
            if isinstance(block, Paragraph):
                out.append(f'<p class="note"><strong>Note:</strong> {_esc(block.text)}</p>' if block.note
                           else f"<p>{_esc(block.text)}</p>")
            elif isinstance(block, Figure):
                out.append(f'<figure id="recall-refusal">{block.svg}<figcaption>{_esc(block.caption)}</figcaption>'
                           "</figure>")
            else:
                kind = f' class="{_esc(block.kind)}"' if block.kind else ""
                head = "" if not any(block.headers) else "".join(f'<th{" class=num" if i in block.numeric else ""}>{_esc(h)}</th>'
                               for i, h in enumerate(block.headers))
                body = "".join("<tr>" + "".join(f'<td{" class=num" if i in block.numeric else ""}>{_esc(c)}</td>'
                                                for i, c in enumerate(row)) + "</tr>" for row in block.rows)
                thead = f"<thead><tr>{head}</tr></thead>" if head else ""
                out.append(f'<div class="scroll"><table{kind}>{thead}<tbody>{body}</tbody></table></div>')
        out.append("</section>")
    out += ["</main>", "</body>", "</html>"]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------
# The recall-versus-refusal plot


@dataclass
class PlotPoint:
    label: str
    x: float  # KRf accuracy, fraction
    y: float  # KR accuracy, fraction
    source: str  # "ours" or "paper"
    method: str
    model: str
    colour: str
    x_ci: tuple[float, float] | None = None
    y_ci: tuple[float, float] | None = None
    partner: str | None = None  # ours: the paper row of the same method


_W, _H = 700, 700
_X0, _X1, _Y0, _Y1 = 72, 672, 48, 528  # the plot area (x grows right, y grows down)
_FONT = 11.5
_CHAR_W = 6.3  # estimated width of one character at _FONT


def _sx(x: float) -> float:
    return _X0 + (_X1 - _X0) * min(max(x, 0.0), 1.0)


def _sy(y: float) -> float:
    return _Y1 - (_Y1 - _Y0) * min(max(y, 0.0), 1.0)


def _ci_pair(value: Any) -> tuple[float, float] | None:
    if not isinstance(value, list | tuple) or len(value) != 2:
        return None
    low, high = _number(value[0]), _number(value[1])
    return (low, high) if low is not None and high is not None else None


def plot_points(run: Run) -> tuple[list[PlotPoint], list[str]]:
    """This run's points and the paper's, and the names of our methods that cannot be plotted."""
    points: list[PlotPoint] = []
    missing: list[str] = []
    for index, (name, method) in enumerate(run.methods.items()):
        x, y = _number(method.get("krf_acc")), _number(method.get("kr_acc"))
        if x is None or y is None:
            missing.append(name)
            continue
        model = run.method_model(name)
        label = name if model == run.model else f"{name} [{model}]"
        ci = method.get("ci") or {}
        points.append(PlotPoint(label, x, y, "ours", name, model, _PALETTE[index % len(_PALETTE)],
                                _ci_pair(ci.get("krf_acc")), _ci_pair(ci.get("kr_acc")), paper.paper_row(name)))
    for score in paper.POOLED.values():
        points.append(PlotPoint(score.row, score.krf_acc / 100, score.kr_acc / 100, "paper", score.row,
                                paper.PAPER_MODEL, _PAPER_COLOUR))
    return points, missing


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    return width * height if width > 0 and height > 0 else 0.0


def _place_labels(points: Sequence[PlotPoint]) -> list[tuple[float, float, str]]:
    """A position and anchor for each point's label, greedily avoiding markers and earlier labels."""
    taken = [(_sx(p.x) - 7, _sy(p.y) - 7, _sx(p.x) + 7, _sy(p.y) + 7) for p in points]
    placed: list[tuple[float, float, str]] = []
    for point in points:
        px, py = _sx(point.x), _sy(point.y)
        width, height = _CHAR_W * len(point.label), _FONT + 2
        best: tuple[float, tuple[float, float, str], tuple[float, float, float, float]] | None = None
        for distance in (1.0, 1.8, 2.6):
            for dx, dy, anchor in ((10, 4, "start"), (-10, 4, "end"), (8, -9, "start"), (-8, -9, "end"),
                                   (8, 16, "start"), (-8, 16, "end"), (0, -12, "middle"), (0, 21, "middle")):
                x, y = px + dx * distance, py + (dy - 4) * distance + 4
                left = x if anchor == "start" else x - width if anchor == "end" else x - width / 2
                box = (left, y - height + 3, left + width, y + 3)
                cost = sum(_overlap(box, other) for other in taken)
                if box[0] < 2 or box[2] > _W - 2 or box[1] < _Y0 - 14 or box[3] > _Y1 + 2:
                    cost += 10_000
                cost += distance  # prefer near positions
                if best is None or cost < best[0]:
                    best = (cost, (x, y, anchor), box)
            if best is not None and best[0] < 3:
                break
        assert best is not None
        placed.append(best[1])
        taken.append(best[2])
    return placed


def _iso_kbf(level: float, weight: float) -> list[tuple[float, float]]:
    """Points (x, y) of the curve KBF = level, where KBF = 1 / (w/x + (1-w)/y)."""
    curve: list[tuple[float, float]] = []
    x_min = weight / (1 / level - (1 - weight))
    steps = 60
    for i in range(steps + 1):
        x = x_min + (1 - x_min) * (i / steps) ** 2
        denominator = 1 / level - weight / x
        if denominator <= 0:
            continue
        curve.append((x, min((1 - weight) / denominator, 1.0)))
    return curve


def _run_weight(run: Run) -> float:
    n_krf = n_kr = 0
    for method in run.methods.values():
        n_krf, n_kr = max(n_krf, _count(method.get("n_krf"))), max(n_kr, _count(method.get("n_kr")))
    if n_krf + n_kr == 0:
        return paper.PAPER_N_KRF / (paper.PAPER_N_KRF + paper.PAPER_N_KR)
    return n_krf / (n_krf + n_kr)


def recall_refusal_svg(run: Run, standalone: bool = False) -> str:
    """The plot as SVG markup (with an XML declaration when `standalone`, for the .svg file)."""
    points, _ = plot_points(run)
    weight = _run_weight(run)
    run_model = model_label(run.model)
    parts: list[str] = []
    add = parts.append
    if standalone:
        add('<?xml version="1.0" encoding="UTF-8"?>')
    add(f'<svg xmlns="http://www.w3.org/2000/svg" class="recall-refusal" viewBox="0 0 {_W} {_H}" width="{_W}" '
        f'height="{_H}" font-family="Helvetica, Arial, sans-serif" font-size="{_FONT}" role="img" '
        'aria-labelledby="rr-title">')
    add(f'<title id="rr-title">Recall versus refusal: KRf accuracy against KR accuracy; this run '
        f'({_esc(run_model)}) and the paper ({paper.PAPER_MODEL})</title>')
    add(f'<rect x="0" y="0" width="{_W}" height="{_H}" fill="#ffffff"/>')
    add(f'<text x="{_X0}" y="28" font-size="15" font-weight="600" fill="#1f2328">Recall versus refusal</text>')
    # grid, ticks and axes
    for tick in range(0, 101, 10):
        gx, gy = _sx(tick / 100), _sy(tick / 100)
        add(f'<line x1="{gx:.1f}" y1="{_Y0}" x2="{gx:.1f}" y2="{_Y1}" stroke="#eceff3" stroke-width="1"/>')
        add(f'<line x1="{_X0}" y1="{gy:.1f}" x2="{_X1}" y2="{gy:.1f}" stroke="#eceff3" stroke-width="1"/>')
        add(f'<text x="{gx:.1f}" y="{_Y1 + 18}" text-anchor="middle" fill="#57606a">{tick}</text>')
        add(f'<text x="{_X0 - 8}" y="{gy + 4:.1f}" text-anchor="end" fill="#57606a">{tick}</text>')
    add(f'<rect x="{_X0}" y="{_Y0}" width="{_X1 - _X0}" height="{_Y1 - _Y0}" fill="none" stroke="#8c959f"/>')
    add(f'<text x="{(_X0 + _X1) / 2}" y="{_Y1 + 42}" text-anchor="middle" font-size="13" fill="#1f2328">'
        "KRf accuracy, % (answers what the character could know)</text>")
    add(f'<text transform="translate(22 {(_Y0 + _Y1) / 2}) rotate(-90)" text-anchor="middle" font-size="13" '
        'fill="#1f2328">KR accuracy, % (refuses what it could not)</text>')
    # iso-KBF curves, weighted by this run's n_krf:n_kr
    for level in (0.2, 0.4, 0.6, 0.8):
        curve = _iso_kbf(level, weight)
        if len(curve) < 2:
            continue
        path = " ".join(f"{'M' if i == 0 else 'L'}{_sx(x):.1f},{_sy(y):.1f}" for i, (x, y) in enumerate(curve))
        add(f'<path class="iso-kbf" d="{path}" fill="none" stroke="#c9d1d9" stroke-width="1" '
            'stroke-dasharray="4 3"/>')
        end_x, end_y = curve[-1]
        add(f'<text x="{_sx(end_x) - 4:.1f}" y="{_sy(end_y) - 5:.1f}" text-anchor="end" font-size="10" '
            f'fill="#8c959f">KBF {round(level * 100)}</text>')
    # dashed links from our method to the paper's row of the same method
    paper_at = {p.method: p for p in points if p.source == "paper"}
    for point in points:
        partner = paper_at.get(point.partner or "") if point.source == "ours" else None
        if partner is not None:
            add(f'<line class="link" x1="{_sx(point.x):.1f}" y1="{_sy(point.y):.1f}" x2="{_sx(partner.x):.1f}" '
                f'y2="{_sy(partner.y):.1f}" stroke="{point.colour}" stroke-opacity="0.45" stroke-width="1.2" '
                'stroke-dasharray="3 3"/>')
    # markers: the paper's first, ours on top
    ordered = [p for p in points if p.source == "paper"] + [p for p in points if p.source == "ours"]
    for point in ordered:
        px, py = _sx(point.x), _sy(point.y)
        tooltip = (f"{point.method} ({'this run' if point.source == 'ours' else 'paper'}, "
                   f"{model_label(point.model)}): KRf {100 * point.x:.1f}%, KR {100 * point.y:.1f}%")
        add(f'<g class="point {point.source}" data-method="{_esc(point.method)}" data-model="{_esc(point.model)}">'
            f"<title>{_esc(tooltip)}</title>")
        if point.source == "paper":
            add(f'<path d="M{px:.1f},{py - 7:.1f} L{px + 7:.1f},{py:.1f} L{px:.1f},{py + 7:.1f} '
                f'L{px - 7:.1f},{py:.1f} Z" fill="#ffffff" stroke="{_PAPER_COLOUR}" stroke-width="1.8"/>')
        else:
            if point.x_ci is not None:
                lo, hi = _sx(point.x_ci[0]), _sx(point.x_ci[1])
                add(f'<path d="M{lo:.1f},{py - 4:.1f} V{py + 4:.1f} M{lo:.1f},{py:.1f} H{hi:.1f} '
                    f'M{hi:.1f},{py - 4:.1f} V{py + 4:.1f}" stroke="{point.colour}" stroke-opacity="0.7" '
                    'stroke-width="1.3" fill="none"/>')
            if point.y_ci is not None:
                lo, hi = _sy(point.y_ci[0]), _sy(point.y_ci[1])
                add(f'<path d="M{px - 4:.1f},{lo:.1f} H{px + 4:.1f} M{px:.1f},{lo:.1f} V{hi:.1f} '
                    f'M{px - 4:.1f},{hi:.1f} H{px + 4:.1f}" stroke="{point.colour}" stroke-opacity="0.7" '
                    'stroke-width="1.3" fill="none"/>')
            add(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="6.5" fill="{point.colour}" stroke="#ffffff" '
                'stroke-width="1.5"/>')
        add("</g>")
    # labels, on top of everything, with a white halo
    for point, (lx, ly, anchor) in zip(ordered, _place_labels(ordered)):
        style = (f'fill="{point.colour}" font-weight="600"' if point.source == "ours"
                 else f'fill="{_PAPER_COLOUR}" font-style="italic"')
        add(f'<text class="label {point.source}" x="{lx:.1f}" y="{ly:.1f}" text-anchor="{anchor}" {style} '
            f'stroke="#ffffff" stroke-width="3" stroke-linejoin="round" paint-order="stroke">'
            f"{_esc(point.label)}</text>")
    # legend
    ly = _Y1 + 72
    add(f'<circle cx="{_X0 + 6}" cy="{ly - 4}" r="6" fill="{_PALETTE[0]}" stroke="#ffffff" stroke-width="1.5"/>')
    add(f'<text x="{_X0 + 18}" y="{ly}" fill="#1f2328">this run — {_esc(run.model)}</text>')
    details = [model_note(run.model), "error bars: 95% CI" if any(p.x_ci or p.y_ci for p in points) else ""]
    if any(details):
        ly += 16
        add(f'<text x="{_X0 + 18}" y="{ly}" font-size="10.5" fill="#57606a">'
            f"{_esc('; '.join(d for d in details if d))}</text>")
    ly += 24
    add(f'<path d="M{_X0 + 6},{ly - 11} L{_X0 + 13},{ly - 4} L{_X0 + 6},{ly + 3} L{_X0 - 1},{ly - 4} Z" '
        f'fill="#ffffff" stroke="{_PAPER_COLOUR}" stroke-width="1.8"/>')
    add(f'<text x="{_X0 + 18}" y="{ly}" fill="#1f2328">paper — {paper.PAPER_MODEL} (tab:task1-pooled, '
        f"tab:ablation-task1; {paper.PAPER_N_KRF:,}:{paper.PAPER_N_KR:,} items)</text>")
    ly += 22
    add(f'<path d="M{_X0 - 2},{ly - 4} H{_X0 + 14}" stroke="#c9d1d9" stroke-width="1.2" stroke-dasharray="4 3"/>')
    add(f'<text x="{_X0 + 18}" y="{ly}" font-size="10.5" fill="#57606a">curves of equal KBF, at this run\'s '
        f"KRf share of {weight:.2f}</text>")
    add("</svg>")
    return "\n".join(parts) + "\n"


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
        ["Items", f"{_count(items.get('n'))} ({items.get('source') or 'source not recorded'})"],
        ["Books", ", ".join(str(book) for book in books) or NO_VALUE],
        ["Created", str(summary.get("created") or NO_VALUE)],
        ["Machine", str(summary.get("machine") or NO_VALUE)],
    ]
    section = Section("Run", [Table(["", ""], rows, kind="facts")])
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
        rows.append([name, model_label(run.method_model(name)), *_score_cells(method, True), _counts(method),
                     _calls(method), _seconds(method.get("seconds"))])
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
    section = Section("Recall versus refusal", [Figure(recall_refusal_svg(run), SVG_NAME, caption,
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
                     percent(method.get("krf_acc")), _paper_percent(score.krf_acc if score else None),
                     percent(method.get("kr_acc")), _paper_percent(score.kr_acc if score else None),
                     percent(method.get("kbf")), _paper_percent(score.kbf if score else None),
                     _delta(method.get("kbf"), score.kbf if score else None)])
    for row, score in paper.POOLED.items():
        if row not in shown:
            ours_name = next((m for m, r in paper.METHOD_TO_PAPER.items() if r == row), row)
            rows.append([ours_name, row, "(not run)", NO_VALUE, _paper_percent(score.krf_acc), NO_VALUE,
                         _paper_percent(score.kr_acc), NO_VALUE, _paper_percent(score.kbf), NO_VALUE])
    pm = paper.PAPER_MODEL
    table = Table(["Method", "Paper row", "Our model", "KRf % ours", f"KRf % paper ({pm})", "KR % ours",
                   f"KR % paper ({pm})", "KBF % ours", f"KBF % paper ({pm})", "KBF Δ (points)"],
                  rows, numeric=set(range(3, 10)))
    n_items = _count((run.summary.get("items") or {}).get("n"))
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
                         _counts(scores), _paper_percent(theirs),
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
                         *_score_cells(scores, False), _counts(scores)])
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
        kbf_old, kbf_new = _number(old.get("kbf")), _number(new.get("kbf"))
        change = NO_VALUE if kbf_old is None or kbf_new is None else f"{100 * (kbf_new - kbf_old):+.1f}"
        rows.append([name, model_label(model, short=True), *_score_cells(old, False), *_score_cells(new, False),
                     change, _counts(new or old)])
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
