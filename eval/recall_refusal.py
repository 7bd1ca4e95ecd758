"""The report's recall-versus-refusal plot, drawn by matplotlib as SVG.

Recall (KRf accuracy, x) against refusal (KR accuracy, y): one filled circle
per method of this run (with its 95% intervals as error bars), one hollow
diamond per row the paper publishes (`eval.paper_figures`, gpt-5-mini), a
dashed link from a method to the paper's row of the same method, and curves
of equal KBF at this run's KRf share. Labels are kept clear of each other and
of the markers by adjustText.

matplotlib (Agg, no display) lays out and draws the whole plot. Each point's
marker is then written as a plain SVG shape (`<g class="point ours|paper"
data-method=... data-model=...>` holding a `<circle>` or a diamond `<path>`
at the centre matplotlib gave it, with a tooltip), so a reader of the report,
and its tests, can find every method's point. The SVG is sized in pixels
(one user unit, one CSS pixel), references nothing outside itself and holds
no metadata, so it can be embedded inline in a self-contained HTML page.
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # no display: the plot is only ever written to SVG

from adjustText import adjust_text  # noqa: E402  (after choosing the backend)
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from eval import paper_figures as paper  # noqa: E402
from eval.report_run import Run, ci_pair, count, model_label, model_note, number  # noqa: E402

# Marker colours of this run's methods, in summary order (the paper's markers are grey).
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#bcbd22", "#393b79", "#637939", "#843c39")
PAPER_COLOUR = "#555555"

_SVG = "http://www.w3.org/2000/svg"
_XLINK = "http://www.w3.org/1999/xlink"
_SIZE = 700  # the figure is _SIZE x _SIZE pixels (at 72 dpi, one point is one pixel)
_PLOT = (72, 48, 672, 528)  # the plot area: left, top, right, bottom, in pixels from the top left
_FONT = 11.5
_TEXT, _MUTED, _GRID, _FRAME, _ISO = "#1f2328", "#57606a", "#eceff3", "#8c959f", "#c9d1d9"
_CIRCLE_R, _DIAMOND_R = 6.5, 7.0  # marker radii in pixels
_GID = "rr-point-"  # matplotlib group id of a point's marker, followed by its index


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

    @property
    def tooltip(self) -> str:
        who = "this run" if self.source == "ours" else "paper"
        return (f"{self.method} ({who}, {model_label(self.model)}): KRf {100 * self.x:.1f}%, "
                f"KR {100 * self.y:.1f}%")


def plot_points(run: Run) -> tuple[list[PlotPoint], list[str]]:
    """This run's points and the paper's, and the names of our methods that cannot be plotted."""
    points: list[PlotPoint] = []
    missing: list[str] = []
    for index, (name, method) in enumerate(run.methods.items()):
        x, y = number(method.get("krf_acc")), number(method.get("kr_acc"))
        if x is None or y is None:
            missing.append(name)
            continue
        model = run.method_model(name)
        label = name if model == run.model else f"{name} [{model}]"
        ci = method.get("ci") or {}
        points.append(PlotPoint(label, x, y, "ours", name, model, PALETTE[index % len(PALETTE)],
                                ci_pair(ci.get("krf_acc")), ci_pair(ci.get("kr_acc")), paper.paper_row(name)))
    for score in paper.POOLED.values():
        points.append(PlotPoint(score.row, score.krf_acc / 100, score.kr_acc / 100, "paper", score.row,
                                paper.PAPER_MODEL, PAPER_COLOUR))
    return points, missing


def iso_kbf(level: float, weight: float) -> list[tuple[float, float]]:
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


def run_weight(run: Run) -> float:
    """This run's KRf share n_krf / (n_krf + n_kr) (the paper's when the run has no counts)."""
    n_krf = n_kr = 0
    for method in run.methods.values():
        n_krf, n_kr = max(n_krf, count(method.get("n_krf"))), max(n_kr, count(method.get("n_kr")))
    if n_krf + n_kr == 0:
        return paper.PAPER_N_KRF / (paper.PAPER_N_KRF + paper.PAPER_N_KR)
    return n_krf / (n_krf + n_kr)


def _clip(value: float) -> float:
    return 100 * min(max(value, 0.0), 1.0)


def _figure(run: Run, points: Sequence[PlotPoint]) -> Figure:
    """The plot as a matplotlib figure; point i's marker is the artist with gid `rr-point-i`."""
    figure = Figure(figsize=(_SIZE / 72, _SIZE / 72), dpi=72, facecolor="#ffffff")
    FigureCanvasAgg(figure)  # text extents for label placement are measured with Agg
    left, top, right, bottom = _PLOT
    ax = figure.add_axes((left / _SIZE, 1 - bottom / _SIZE, (right - left) / _SIZE, (bottom - top) / _SIZE))
    ax.set(xlim=(0, 100), ylim=(0, 100), xticks=range(0, 101, 10), yticks=range(0, 101, 10))
    ax.tick_params(length=0, labelsize=_FONT, labelcolor=_MUTED, pad=6)
    ax.grid(color=_GRID, linewidth=1)
    ax.set_axisbelow(True)
    for spine in ax.spines.values():
        spine.set_color(_FRAME)
    ax.set_xlabel("KRf accuracy, % (answers what the character could know)", fontsize=13, color=_TEXT)
    ax.set_ylabel("KR accuracy, % (refuses what it could not)", fontsize=13, color=_TEXT)
    figure.text(left / _SIZE, 1 - 28 / _SIZE, "Recall versus refusal", fontsize=15, fontweight="bold",
                color=_TEXT)

    weight = run_weight(run)
    for level in (0.2, 0.4, 0.6, 0.8):  # curves of equal KBF, weighted by this run's n_krf:n_kr
        curve = iso_kbf(level, weight)
        if len(curve) < 2:
            continue
        ax.plot([_clip(x) for x, _ in curve], [_clip(y) for _, y in curve], color=_ISO, linewidth=1,
                dashes=(4, 3), zorder=1)
        ax.annotate(f"KBF {round(level * 100)}", (_clip(curve[-1][0]), _clip(curve[-1][1])), xytext=(-4, 5),
                    textcoords="offset points", ha="right", fontsize=10, color=_FRAME)

    paper_at = {p.method: p for p in points if p.source == "paper"}
    for point in points:  # a dashed link from our method to the paper's row of the same method
        partner = paper_at.get(point.partner or "") if point.source == "ours" else None
        if partner is not None:
            ax.plot([_clip(point.x), _clip(partner.x)], [_clip(point.y), _clip(partner.y)], color=point.colour,
                    alpha=0.45, linewidth=1.2, dashes=(3, 3), zorder=2)

    for index, point in enumerate(points):  # the paper's markers first, ours on top
        x, y = _clip(point.x), _clip(point.y)
        if point.source == "paper":
            ax.plot([x], [y], marker="D", markersize=_DIAMOND_R * 2 ** 0.5, markerfacecolor="#ffffff",
                    markeredgecolor=PAPER_COLOUR, markeredgewidth=1.8, linestyle="none", zorder=3,
                    gid=f"{_GID}{index}")
            continue
        if point.x_ci is not None or point.y_ci is not None:
            ax.errorbar([x], [y], xerr=_error(point.x, point.x_ci), yerr=_error(point.y, point.y_ci), fmt="none",
                        ecolor=point.colour, alpha=0.7, elinewidth=1.3, capsize=4, zorder=4)
        ax.plot([x], [y], marker="o", markersize=2 * _CIRCLE_R, markerfacecolor=point.colour,
                markeredgecolor="#ffffff", markeredgewidth=1.5, linestyle="none", zorder=5, gid=f"{_GID}{index}")

    labels = [ax.text(_clip(p.x), _clip(p.y), p.label, fontsize=_FONT, zorder=6, clip_on=False,
                      color=p.colour if p.source == "ours" else PAPER_COLOUR,
                      fontweight="bold" if p.source == "ours" else "normal",
                      fontstyle="normal" if p.source == "ours" else "italic",
                      bbox={"boxstyle": "round,pad=0.1", "facecolor": "#ffffff", "edgecolor": "none",
                            "alpha": 0.75})
              for p in points]
    adjust_text(labels, x=[_clip(p.x) for p in points], y=[_clip(p.y) for p in points], ax=ax,
                ensure_inside_axes=True, prevent_crossings=False, expand=(1.15, 1.4), force_static=(0.3, 0.5),
                iter_lim=500, min_arrow_len=12, arrowprops={"arrowstyle": "-", "color": _FRAME, "linewidth": 0.6})

    details = "; ".join(d for d in (model_note(run.model),
                                    "error bars: 95% CI" if any(p.x_ci or p.y_ci for p in points) else "") if d)
    ours = f"this run — {run.model}" + (f"\n{details}" if details else "")
    theirs = (f"paper — {paper.PAPER_MODEL} (tab:task1-pooled, tab:ablation-task1; "
              f"{paper.PAPER_N_KRF:,}:{paper.PAPER_N_KR:,} items)")
    curves = f"curves of equal KBF, at this run's KRf share of {weight:.2f}"
    handles = [Line2D([], [], marker="o", markersize=12, markerfacecolor=PALETTE[0], markeredgecolor="#ffffff",
                      linestyle="none"),
               Line2D([], [], marker="D", markersize=9, markerfacecolor="#ffffff", markeredgecolor=PAPER_COLOUR,
                      markeredgewidth=1.8, linestyle="none"),
               Line2D([], [], color=_ISO, linewidth=1.2, dashes=(4, 3))]
    legend = figure.legend(handles, [ours, theirs, curves], loc="upper left", frameon=False, fontsize=_FONT,
                           bbox_to_anchor=(left / _SIZE - 0.01, 1 - (bottom + 50) / _SIZE), handlelength=1.6,
                           labelcolor=_TEXT)
    legend.texts[2].set_color(_MUTED)
    return figure


def _error(value: float, ci: tuple[float, float] | None) -> list[list[float]] | None:
    """matplotlib's asymmetric error (below, above) of one value, in percent."""
    if ci is None:
        return None
    return [[max(_clip(value) - _clip(ci[0]), 0.0)], [max(_clip(ci[1]) - _clip(value), 0.0)]]


def _marker(point: PlotPoint, cx: float, cy: float) -> ET.Element:
    """A point's marker as a plain SVG shape, with its method, model and tooltip."""
    group = ET.Element(f"{{{_SVG}}}g", {"class": f"point {point.source}", "data-method": point.method,
                                        "data-model": point.model})
    ET.SubElement(group, f"{{{_SVG}}}title").text = point.tooltip
    if point.source == "paper":
        r = _DIAMOND_R
        ET.SubElement(group, f"{{{_SVG}}}path", {
            "d": f"M{cx:.1f},{cy - r:.1f} L{cx + r:.1f},{cy:.1f} L{cx:.1f},{cy + r:.1f} L{cx - r:.1f},{cy:.1f} Z",
            "fill": "#ffffff", "stroke": PAPER_COLOUR, "stroke-width": "1.8"})
    else:
        ET.SubElement(group, f"{{{_SVG}}}circle", {"cx": f"{cx:.1f}", "cy": f"{cy:.1f}", "r": f"{_CIRCLE_R}",
                                                   "fill": point.colour, "stroke": "#ffffff",
                                                   "stroke-width": "1.5"})
    return group


def _tidy(svg: str, run: Run, points: Sequence[PlotPoint]) -> ET.Element:
    """matplotlib's SVG made fit to embed: pixel size, a title, plain markers, `href` for `xlink:href`."""
    root = ET.fromstring(svg)
    for element in root.iter():
        link = element.attrib.pop(f"{{{_XLINK}}}href", None)
        if link is not None:
            element.set("href", link)
    for parent in root.iter():
        for position, child in enumerate(list(parent)):
            gid = child.get("id") or ""
            if gid.startswith(_GID):
                use = next(child.iter(f"{{{_SVG}}}use"))  # matplotlib places the marker at the point's centre
                parent[position] = _marker(points[int(gid[len(_GID):])], float(use.get("x", 0)),
                                           float(use.get("y", 0)))
    attributes = {"class": "recall-refusal", "viewBox": f"0 0 {_SIZE} {_SIZE}", "width": str(_SIZE),
                  "height": str(_SIZE), "font-family": "Helvetica, Arial, sans-serif", "role": "img",
                  "aria-labelledby": "rr-title"}
    root.attrib.clear()
    root.attrib.update(attributes)
    title = ET.Element(f"{{{_SVG}}}title", {"id": "rr-title"})
    title.text = (f"Recall versus refusal: KRf accuracy against KR accuracy; this run ({model_label(run.model)}) "
                  f"and the paper ({paper.PAPER_MODEL})")
    root.insert(0, title)
    return root


def recall_refusal_svg(run: Run, standalone: bool = False) -> str:
    """The plot as SVG markup (with an XML declaration when `standalone`, for the .svg file)."""
    points, _ = plot_points(run)
    ordered = [p for p in points if p.source == "paper"] + [p for p in points if p.source == "ours"]
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "recall-refusal",
                                "font.family": "sans-serif"}):
        figure = _figure(run, ordered)
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None, "Format": None,
                                                       "Type": None})
    ET.register_namespace("", _SVG)  # write SVG elements unprefixed
    markup = ET.tostring(_tidy(buffer.getvalue(), run, ordered), encoding="unicode")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n' if standalone else "") + markup + "\n"
