"""The KBF-QA report: Markdown tables and model labels, escaped self-contained HTML, the paper's
figures, and the recall-versus-refusal plot as rendered by headless Chromium.

The browser test needs Debian's `chromium` (`apt-get install -y chromium`; `.ci/run` installs it).
Without it the test is skipped, unless REVERIEMEM_REQUIRE_BROWSER=1 (set by CI), when it fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from eval import paper_figures as paper
from eval.report import SVG_NAME, model_label, write_report

ROOT = Path(__file__).resolve().parents[1]
RUN_MODEL = "bundled:SmolLM2-135M-Instruct-Q8_0"
NASTY = "<b>O'Brien & \"Co\"</b>"  # a character name that must be escaped


def _scores(krf: float | None, kr: float | None, n_krf: int, n_kr: int) -> dict[str, Any]:
    if krf is None or kr is None:
        kbf = None
    else:
        kbf = (n_krf + n_kr) / (n_krf / krf + n_kr / kr) if krf and kr else 0.0
    return {"krf_acc": krf, "kr_acc": kr, "kbf": kbf, "n_krf": n_krf, "n_kr": n_kr}


def _method(model: str, krf: float | None, kr: float | None, n_krf: int = 20, n_kr: int = 10) -> dict[str, Any]:
    pooled = _scores(krf, kr, n_krf, n_kr)

    def ci(value: float | None) -> list[float] | None:
        return None if value is None else [max(value - 0.1, 0.0), min(value + 0.1, 1.0)]

    return {
        "model": model, **pooled,
        "ci": {key: ci(pooled[key]) for key in ("krf_acc", "kr_acc", "kbf")},
        "per_book": {
            "dracula": _scores(krf, kr, n_krf // 2, n_kr // 2),
            "demo-tale": _scores(krf, kr, n_krf - n_krf // 2, n_kr - n_kr // 2),
        },
        "per_character": {
            "dracula/Mina Harker": _scores(krf, kr, n_krf // 2, n_kr // 2),
            f"demo-tale/{NASTY}": _scores(krf, kr, n_krf - n_krf // 2, n_kr - n_kr // 2),
        },
        "calls_per_item": {"median": 2.0, "max": 5},
        "seconds": 12.5,
    }


def make_run(directory: Path, compiled: bool = True) -> Path:
    """A small synthetic run directory: summary.json and results.parquet."""
    directory.mkdir(parents=True, exist_ok=True)
    methods = {
        "direct": _method(RUN_MODEL, 0.40, 0.30),
        "naive-rag": _method(RUN_MODEL, 0.55, None, n_kr=0),  # no KR items: not plotted
        "reveriemem": _method(RUN_MODEL, 0.62, 0.75),
        "evidence": _method("none", 0.50, 0.90),
    }
    summary: dict[str, Any] = {
        "model": RUN_MODEL, "embedder": "hash", "created": "2026-11-02T10:00:00+00:00",
        "machine": "Test CPU, 2 cores",
        "items": {"source": "generated", "n": 30, "books": ["dracula", "demo-tale"]},
        "methods": methods,
    }
    if compiled:
        summary["compiled"] = {
            "before": {"reveriemem": _scores(0.50, 0.60, 8, 4)},
            "after": {"reveriemem": _scores(0.625, 0.75, 8, 4)},
            "split": "held-out", "optimizer": "BootstrapFewShot",
        }
    (directory / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    rows = []
    for method, spec in methods.items():
        for i in range(6):
            split = "KRf" if i < 4 else "KR"
            gold = "B" if split == "KRf" else "E"
            choice = ["B", "E", "A", None, "E", "C"][i]
            rows.append({"method": method, "model": spec["model"], "book": "dracula", "character": "Mina Harker",
                         "item_id": f"q{i}", "split": split, "gold": gold, "choice": choice,
                         "correct": choice == gold, "reply": f"reply {i}"})
    pl.DataFrame(rows).write_parquet(directory / "results.parquet")
    return directory


def _table_row(markdown: str, *cells: str) -> str:
    """The first Markdown table row whose leading cells are `cells`."""
    prefix = "| " + " | ".join(cells) + " |"
    for line in markdown.splitlines():
        if line.startswith(prefix):
            return line
    raise AssertionError(f"no table row starts with {prefix!r}")


def test_markdown_tables_and_model_labels(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    markdown_path, html_path = write_report(run)
    assert markdown_path == run / "report.md" and html_path == run / "report.html"
    markdown = markdown_path.read_text(encoding="utf-8")

    bundled = model_label(RUN_MODEL)
    assert "proves the wiring, not quality" in bundled
    assert model_label("none") == "none (deterministic, no model)"
    tiny = model_label(RUN_MODEL, short=True)  # the breakdown tables' terse label
    assert tiny == f"{RUN_MODEL} (tiny model: wiring only)"
    assert model_label("fake:scripted", short=True) == "fake:scripted (fake model: wiring only)"
    assert model_label("openai/gpt-5-mini") == "openai/gpt-5-mini"
    # the main table: percent with one decimal and the 95% CI, counts, calls, and the model
    row = _table_row(markdown, "reveriemem", bundled)
    assert "62.0 (52.0–72.0)" in row and "75.0 (65.0–85.0)" in row and "| 20:10 |" in row and "2 (max 5)" in row
    assert "| — (—) |" not in markdown
    assert _table_row(markdown, "naive-rag", bundled).count("—") >= 2  # no KR items: KR acc and KBF are null
    assert "50.0 (40.0–60.0)" in _table_row(markdown, "evidence", "none (deterministic, no model)")
    # beside the paper: our figures and the paper's (gpt-5-mini), including rows we did not run
    assert "73.3" in _table_row(markdown, "reveriemem", "ReverieMem")
    assert "| evidence | (not in the paper) |" in markdown
    assert "| raptor | RAPTOR | (not run) |" in markdown
    assert "KBF % paper (gpt-5-mini)" in markdown
    # per book: the paper's KBF for Dracula beside ours; none for a book the paper does not have
    assert "| 75.5 | 502:419 |" in _table_row(markdown, "dracula", "reveriemem", tiny)
    assert "| 29.1 | 502:419 |" in _table_row(markdown, "dracula", "direct")
    assert _table_row(markdown, "demo-tale", "reveriemem").endswith("| — | — |")
    # per character, with the name's Markdown-active characters escaped
    assert _table_row(markdown, "Mina Harker", "dracula", "evidence", "none (no model)", "50.0", "90.0")
    assert "&lt;b&gt;O'Brien & \"Co\"&lt;/b&gt;" in markdown
    # compiled before/after on the held-out split
    assert "Compiled programs (BootstrapFewShot), held-out split" in markdown
    assert "| +13.2 |" in _table_row(markdown, "reveriemem", tiny, "50.0")
    # answers from results.parquet: E on 2 of 6, 1 of 4 KRf refused, 1 of 2 KR answered A-D, 1 unmatched
    assert _table_row(markdown, "direct", tiny, "6", "33.3", "25.0", "50.0", "16.7")
    # the plot, as a separate SVG file
    assert f"]({SVG_NAME})" in markdown
    svg = (run / SVG_NAME).read_text(encoding="utf-8")
    assert svg.startswith("<?xml") and svg.count('class="point ours"') == 3 and svg.count('class="point paper"') == 9


def test_html_is_escaped_and_self_contained(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", compiled=False)
    _, html_path = write_report(run)
    page = html_path.read_text(encoding="utf-8")
    assert NASTY not in page and "<b>O'Brien" not in page
    assert "&lt;b&gt;O&#x27;Brien &amp; &quot;Co&quot;&lt;/b&gt;" in page
    assert "<script" not in page and "<link" not in page and "src=" not in page and "@import" not in page
    assert not [url for url in re.findall(r"https?://[^\s\"'<>]+", page) if url != "http://www.w3.org/2000/svg"]
    assert page.count("<svg") == 1 and page.count('class="point paper"') == 9
    assert "Compiled programs" not in page
    assert "proves the wiring, not quality" in page and "gpt-5-mini" in page


def test_paper_figures_are_consistent() -> None:
    """The typed figures agree with the paper's own totals and with its KBF formula."""
    assert sum(b.n_krf for b in paper.BY_BOOK.values()) == paper.PAPER_N_KRF == 2442
    assert sum(b.n_kr for b in paper.BY_BOOK.values()) == paper.PAPER_N_KR == 1944
    n_krf, n_kr = paper.PAPER_N_KRF, paper.PAPER_N_KR
    for score in paper.POOLED.values():
        kbf = (n_krf + n_kr) / (n_krf / score.krf_acc + n_kr / score.kr_acc)
        assert abs(kbf - score.kbf) < 0.15, score
    for book in paper.BY_BOOK.values():
        assert max(book.kbf, key=lambda row: book.kbf[row]) == paper.REVERIEMEM  # bold in every row
    assert paper.paper_book_kbf("hipporag", "treasure-island") == 37.3
    assert paper.paper_pooled("reveriemem-no-semantic") == paper.POOLED["w/o Semantic Layer"]
    assert paper.paper_row("evidence") is None and paper.paper_row("reveriemem-no-personality") is None


def test_module_entry_rewrites_the_report(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    done = subprocess.run([sys.executable, "-m", "eval.report", str(run)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert (run / "report.md").is_file() and (run / "report.html").is_file() and (run / SVG_NAME).is_file()
    missing = subprocess.run([sys.executable, "-m", "eval.report", str(tmp_path / "nowhere")], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and "summary.json does not exist" in missing.stderr


# ---------------------------------------------------------------------------
# Headless Chromium


CHROMIUM_PATHS = ("/usr/bin/chromium",)


def _chromium() -> str:
    """Chromium's path; skip without it, or fail if REVERIEMEM_REQUIRE_BROWSER=1 (CI)."""
    found = shutil.which("chromium") or next((path for path in CHROMIUM_PATHS if Path(path).exists()), None)
    if found:
        return found
    if os.environ.get("REVERIEMEM_REQUIRE_BROWSER") == "1":
        pytest.fail("Chromium is missing but REVERIEMEM_REQUIRE_BROWSER=1: install it with `apt-get install -y "
                    "chromium` (.ci/run does)")
    pytest.skip("Chromium is not installed (apt-get install -y chromium); the rendered report is not checked. "
                "Set REVERIEMEM_REQUIRE_BROWSER=1 to make this a failure.")


def test_missing_browser_skips_unless_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(sys.modules[__name__], "CHROMIUM_PATHS", ())
    monkeypatch.delenv("REVERIEMEM_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install -y chromium"):
        _chromium()
    monkeypatch.setenv("REVERIEMEM_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="REVERIEMEM_REQUIRE_BROWSER=1"):
        _chromium()


def _run_chromium(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--hide-scrollbars", f"--user-data-dir={profile}", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{command} exited {done.returncode}: {done.stderr[-2000:]}"
    return done


def read_png(path: Path) -> np.ndarray:
    """Decode an 8-bit RGB or RGBA, non-interlaced PNG into an (height, width, channels) uint8 array."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, idat = 8, bytearray()
    width = height = channels = 0
    while position < len(data):
        (length,) = struct.unpack(">I", data[position:position + 4])
        kind = data[position + 4:position + 8]
        body = data[position + 8:position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    stride = width * channels
    raw = np.frombuffer(zlib.decompress(bytes(idat)), dtype=np.uint8).reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    previous = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:]
        if kind == 0:
            row = line.copy()
        elif kind == 1:  # Sub: a running sum along each channel
            row = (np.cumsum(line.reshape(width, channels).astype(np.uint32), axis=0) % 256).astype(np.uint8).ravel()
        elif kind == 2:  # Up
            row = line + previous
        else:  # Average and Paeth depend on the reconstructed left byte: byte by byte
            cur, up, values = line.tolist(), previous.tolist(), [0] * stride
            for i in range(stride):
                a = values[i - channels] if i >= channels else 0
                b = up[i]
                if kind == 3:
                    values[i] = (cur[i] + ((a + b) >> 1)) & 0xFF
                    continue
                c = up[i - channels] if i >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                predictor = a if pa <= pb and pa <= pc else b if pb <= pc else c
                values[i] = (cur[i] + predictor) & 0xFF
            row = np.array(values, dtype=np.uint8)
        out[y] = row
        previous = row
    return out.reshape(height, width, channels)


def _solid_centres(pixels: np.ndarray, colour: str, size: int = 5) -> list[tuple[float, float]]:
    """Centres (x, y) of the solid blots of `colour` at least size x size pixels (filled markers, not text)."""
    rgb = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.int16)
    mask = (np.abs(pixels - rgb).max(axis=2) <= 6).astype(np.int32)
    total = np.pad(mask.cumsum(axis=0).cumsum(axis=1), ((1, 0), (1, 0)))
    window = total[size:, size:] - total[:-size, size:] - total[size:, :-size] + total[:-size, :-size]
    ys, xs = np.nonzero(window == size * size)
    centres: list[list[float]] = []  # [x sum, y sum, count]
    for x, y in zip(xs.tolist(), ys.tolist()):
        for centre in centres:
            if abs(centre[0] / centre[2] - x) < 12 and abs(centre[1] / centre[2] - y) < 12:
                centre[0] += x
                centre[1] += y
                centre[2] += 1
                break
        else:
            centres.append([x, y, 1])
    half = (size - 1) / 2
    return [(cx / n + half, cy / n + half) for cx, cy, n in centres]


def test_html_plot_renders_in_headless_chromium(tmp_path: Path) -> None:
    chromium = _chromium()
    run = make_run(tmp_path / "run")
    _, html_path = write_report(run)
    url = html_path.resolve().as_uri()

    dom = _run_chromium(chromium, tmp_path / "profile-dom", "--dump-dom", url).stdout
    assert "<svg" in dom and "Recall versus refusal" in dom
    ours = re.findall(r'<g class="point ours" data-method="([^"]+)"[^>]*>.*?<circle cx="([\d.]+)" cy="([\d.]+)"[^>]*'
                      r'fill="(#[0-9a-f]{6})"', dom, flags=re.S)
    assert sorted(method for method, *_ in ours) == ["direct", "evidence", "reveriemem"]
    theirs = re.findall(r'<g class="point paper" data-method="([^"]+)"[^>]*>.*?<path d="M([\d.]+),([\d.]+) ', dom,
                        flags=re.S)
    assert len(theirs) == 9
    assert 'data-model="gpt-5-mini"' in dom and 'data-model="none"' in dom

    screenshot = tmp_path / "report.png"
    _run_chromium(chromium, tmp_path / "profile-shot", f"--screenshot={screenshot}", "--window-size=1200,1600", url)
    pixels = read_png(screenshot)[:, :, :3].astype(np.int16)
    assert pixels.shape[:2] == (1600, 1200)

    # Our filled circles: each method's colour forms a solid disc, and all three sit where the SVG
    # puts them, shifted by one common offset (the plot's place on the page).
    candidates = []
    for method, cx, cy, colour in ours:
        discs = _solid_centres(pixels, colour)
        assert discs, f"the marker of {method} ({colour}) is not drawn in the screenshot"
        candidates.append([(x - float(cx), y - float(cy)) for x, y in discs])
    offsets = [offset for offset in candidates[0]
               if all(any(abs(offset[0] - o[0]) <= 2 and abs(offset[1] - o[1]) <= 2 for o in other)
                      for other in candidates[1:])]
    assert offsets, f"the markers are not where the plot puts them: {candidates}"
    dx, dy = offsets[0]

    # The paper's hollow diamonds: white inside, a dark outline, at the paper's figures.
    for method, top_x, top_y in theirs:
        x, y = round(float(top_x) + dx), round(float(top_y) + 7 + dy)
        assert pixels[y - 1:y + 2, x - 1:x + 2].min() > 200, f"the paper's {method} marker is not hollow"
        edge = pixels[y - 5:y - 2, x + 2:x + 5]  # around the upper-right edge's midpoint
        assert edge.max(axis=2).min() < 160, f"the paper's {method} marker has no outline"

    # and the plot region as a whole is drawn, not blank
    region = pixels[max(round(dy), 0):round(dy) + 700, max(round(dx), 0):round(dx) + 700]
    not_white = (region < 235).any(axis=2).mean()
    assert 0.02 < not_white < 0.6, f"the plot region is {not_white:.1%} non-white"
