"""A Task 2 batch: stories for every script and method, pairwise judgements, summary.json and a report.

The folder `out` holds `run.json` (book, generator and judge models, scripts, methods),
`stories/<script>/<method>.json` (the narrated story and its log), `judgements.jsonl` (one
line per script, pair and dimension, both orders) and `summary.json`; `report.md` and
`report.html` are written from them (`eval.narrative_report`). A rerun skips every story
and judgement already stored, so an interrupted batch resumes where it stopped and a
finished one is repeated for free; a folder that holds a run with another book or other
models is refused. Every method is compared with `reveriemem` (the first method).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reveriemem.core.errors import ReverieMemError
from reveriemem.models import open_model
from reveriemem.narrative.judge import Judgement, judge_pair, win_rates
from reveriemem.narrative.log import Story, parse_move
from reveriemem.narrative.methods import METHODS, tell
from reveriemem.narrative.scripts import Script, load_script, shipped_scripts

DEFAULT_METHODS = ("reveriemem", "direct", "hollmwood", "bookworld", "reveriemem-no-episodic",
                   "reveriemem-no-semantic", "reveriemem-no-personality")
Progress = Callable[[str], None]


class NarrativeRunError(ReverieMemError):
    """A Task 2 batch cannot start: unknown method, no scripts, or a folder holding another run."""


@dataclass
class NarrativeSpec:
    book: str
    out: Path
    scripts: list[Path] = field(default_factory=list)  # empty: the scripts shipped for the book
    methods: Sequence[str] = DEFAULT_METHODS
    lm: str = ""  # the generator
    judge_lm: str = ""  # the judge ("" = no judgements: stories only)
    dimensions: Sequence[str] = ()  # empty: all five of each mode
    limit: int | None = None  # at most this many scripts
    turns: int | None = None  # moves per character per stage, for every script (None: each script's own)


def _load_scripts(spec: NarrativeSpec) -> list[Script]:
    paths = list(spec.scripts) or shipped_scripts(spec.book)
    if not paths:
        raise NarrativeRunError(f"No scripts for {spec.book}: give --script FILE (or ship some in "
                                f"reveriemem/data/scripts/{spec.book}/).")
    scripts = [load_script(p) for p in paths][: spec.limit or None]
    for script in scripts:
        script.book = script.book or spec.book
        script.turns = spec.turns or script.turns
    return scripts


def _check_run(out: Path, identity: dict[str, Any]) -> None:
    path = out / "run.json"
    if path.is_file():
        before = json.loads(path.read_text(encoding="utf-8"))
        identity["judge_model"] = identity["judge_model"] or before.get("judge_model", "")  # stories only: keep it
        differs = [k for k in ("book", "model", "judge_model") if before.get(k) != identity.get(k)
                   and (k != "judge_model" or before.get(k))]  # a stories-only folder takes its first judge
        if differs:
            raise NarrativeRunError(f"{out} holds a run with another {', '.join(differs)}; choose another --out "
                                    f"or remove that folder.")
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(identity, indent=2), encoding="utf-8")


def _story(out: Path, script: Script, method: str, lm: str, progress: Progress) -> Story:
    path = out / "stories" / script.id / f"{method}.json"
    if path.is_file():
        return Story.from_dict(json.loads(path.read_text(encoding="utf-8")))
    progress(f"story {script.id} / {method}")
    story = tell(script, method, lm)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(story.to_dict(), indent=1), encoding="utf-8")
    tmp.replace(path)  # a story is stored whole or not at all
    return story


def _stored_judgements(path: Path) -> list[dict[str, Any]]:
    rows = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut short by an interruption: judged again
    return rows


def run_narrative(spec: NarrativeSpec, progress: Progress | None = None) -> dict[str, Any]:
    """Run (or resume) a batch and write summary.json and the report; return the summary."""
    say = progress or (lambda _msg: None)
    unknown = [m for m in spec.methods if m not in METHODS]
    if unknown:
        raise NarrativeRunError(f"Unknown story method(s) {', '.join(unknown)} (known: {', '.join(METHODS)}).")
    if not spec.methods:
        raise NarrativeRunError("Name at least one story method.")
    scripts = _load_scripts(spec)
    generator = open_model(spec.lm or None)
    judge = open_model(spec.judge_lm) if spec.judge_lm else None
    if judge is not None and judge.lm is None:
        raise NarrativeRunError(f"The judge model {spec.judge_lm!r} is no model: the pairwise judge needs one "
                                f"(leave --judge-lm out for stories only).")
    identity = {"book": spec.book, "model": spec.lm or generator.name, "judge_model": spec.judge_lm,
                "model_name": generator.name, "judge_model_name": judge.name if judge is not None else "",
                "methods": list(spec.methods), "scripts": [s.id for s in scripts],
                "dimensions": list(spec.dimensions), "turns": spec.turns}
    out = Path(spec.out)
    _check_run(out, identity)
    path = out / "judgements.jsonl"
    rows = _stored_judgements(path)
    if path.is_file():
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            path.write_bytes(data[: data.rfind(b"\n") + 1])
    done = {(r["script_id"], r["first"], r["second"], r["dimension"]) for r in rows}
    first, others = spec.methods[0], list(spec.methods[1:])
    stories: dict[tuple[str, str], Story] = {}
    total = len(scripts) * len(spec.methods)
    # Each pair is judged as soon as its two stories exist and the report is rewritten after it,
    # so a long batch (the bundled model takes hours) shows finished figures while it runs.
    for count, script in enumerate(scripts, 1):
        x = stories[(script.id, first)] = _story(out, script, first, spec.lm, say)
        for other in others:
            y = stories[(script.id, other)] = _story(out, script, other, spec.lm, say)
            wanted = [d for d in _dims(script, spec.dimensions) if (script.id, first, other, d) not in done]
            if judge is not None and wanted:
                say(f"judge {script.id}: {first} vs {other}")
                fresh: list[Judgement] = judge_pair(judge, script, x, y, only=wanted)
                with path.open("a", encoding="utf-8") as fh:
                    for j in fresh:
                        fh.write(json.dumps(j.to_dict()) + "\n")
                rows.extend(j.to_dict() for j in fresh)
            _write(out, identity, scripts[:count], stories, rows, total)
    return _write(out, identity, scripts, stories, rows, total)


def _write(out: Path, identity: dict[str, Any], scripts: list[Script], stories: dict[tuple[str, str], Story],
           rows: list[dict[str, Any]], total: int) -> dict[str, Any]:
    summary = {**_summary(identity, scripts, stories, rows), "stories_done": len(stories), "stories_total": total,
               "complete": len(stories) == total}
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    from eval.narrative_report import write_report

    write_report(out)
    return summary


def _dims(script: Script, only: Sequence[str]) -> list[str]:
    from reveriemem.narrative.judge import dimensions

    return [d for d in dimensions(script.with_script) if not only or d in only]


def _summary(identity: dict[str, Any], scripts: list[Script], stories: dict[tuple[str, str], Story],
             rows: list[dict[str, Any]]) -> dict[str, Any]:
    per_method: dict[str, dict[str, Any]] = {}
    for (script_id, method), story in stories.items():
        entry = per_method.setdefault(method, {"stories": 0, "moves": 0, "goal_moves": 0, "calls": 0, "seconds": 0.0,
                                               "stages_realised": 0, "stages": 0, "steps": {}})
        script = next(s for s in scripts if s.id == script_id)
        entry["stories"] += 1
        moves = [m for m in story.log if m.kind == "move"]
        entry["moves"] += len(moves)
        # a move that is its goal word for word: the model's output never parsed (or it only echoed the goal)
        entry["goal_moves"] += sum(1 for m in moves if (m.thought, m.action, m.speech) == parse_move(m.goal))
        entry["calls"] += story.calls
        entry["seconds"] = round(entry["seconds"] + story.seconds, 3)
        if script.with_script and method not in ("direct", "hollmwood"):
            entry["stages"] += len(script.stages)
            entry["stages_realised"] += len(story.rounds_played() & set(range(len(script.stages))))
        for step, how in story.steps.items():
            entry["steps"][step] = sorted({*entry["steps"].get(step, []), how})
    return {**identity, "scripts_detail": [{"id": s.id, "title": s.title, "mode": s.mode, "cast": s.cast,
                                            "source": s.source} for s in scripts],
            "per_method": per_method, "judgements": len(rows),
            "unparsed_verdicts": sum(int(r.get("unparsed", 0)) for r in rows), "win_rates": win_rates(rows)}
