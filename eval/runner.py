"""The KBF-QA batch runner: every method on the same items under the same model.

    run_evaluation(RunSpec(book="a-study-in-scarlet", out=Path("runs/scarlet")))

writes into `out`:
- `items.jsonl`: the items judged (generated ones are written out, so a run can be repeated);
- `run.json`: what the run is (book, model, embedder, items' fingerprint, methods);
- `partial/<method>.jsonl`: one line per answered item, appended as it is answered,
  so an interrupted run resumes where it stopped (the same `out`, model and items);
- `results.parquet`: per-item results of every method;
- `summary.json`: per method `krf_acc`, `kr_acc`, `kbf`, `n_krf`, `n_kr`, the model,
  confidence intervals, per-book and per-character breakdowns, calls per item;
- `report.md`, `report.html`, `recall_refusal.svg` (`eval.report`).

Items come from `--items FILE` (the documented JSONL, any alias for characters)
or are generated from the built memory (`eval.generate`); `part` keeps only the
generated items of one part ("train" or "held-out"). A reply that cannot be
matched to a letter, or a model output that never parses, counts as wrong and is
recorded with its reason; an unreachable model stops the run with its message,
keeping what was answered.
"""

from __future__ import annotations

import hashlib
import json
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from eval.compile import compiled_block
from eval.generate import generate_items
from eval.items import KBFItem, read_items, write_items
from eval.matching import match_reply
from eval.memory import load_book_memory
from eval.methods import BASELINES
from eval.methods.base import Answer, Method, MethodContext
from eval.methods.reveriemem import VARIANTS, ReverieMemMethod
from eval.metrics import summarise
from eval.report import write_report
from reveriemem.core.embeddings import Embedder, open_embedder
from reveriemem.core.errors import ModelOutputError, ReverieMemError
from reveriemem.core.registry import Book, load_book
from reveriemem.core.settings import data_home
from reveriemem.models import ModelHandle, open_model

RESULT_COLUMNS = ["method", "model", "book", "character", "item_id", "split", "part", "item_method", "gold",
                  "choice", "correct", "matched_by", "reply", "error", "calls", "prompt_tokens",
                  "completion_tokens", "seconds", "detail"]


def method_names() -> list[str]:
    """Every method the runner knows, in report order."""
    order = ["direct", "naive-rag", "raptor", "hipporag", "comorag", "bookworld", *VARIANTS, "evidence"]
    known = set(BASELINES) | set(VARIANTS)
    return [m for m in order if m in known] + sorted(known - set(order))


def make_method(name: str, ctx: MethodContext) -> Method:
    if name in VARIANTS:
        return ReverieMemMethod(ctx, name)
    if name in BASELINES:
        method: Method = BASELINES[name](ctx)
        return method
    raise RunError(f"Unknown method {name!r}; known: {', '.join(method_names())}.")


class RunError(ReverieMemError):
    """A run cannot start or continue (unknown method, another run in the output folder)."""


@dataclass
class RunSpec:
    book: str
    out: Path
    items: Path | None = None  # None: generate from the built memory
    methods: Sequence[str] = ()  # empty: all
    lm: str | None = None  # None: $REVERIEMEM_LM
    embedder: str | None = None  # None: the one the memory was built with
    part: str | None = None  # "train" or "held-out": keep only generated items of that part
    limit: int | None = None  # at most this many items (spread over the set, both splits kept)
    per_split: int | None = 60  # generated items per character and split


@dataclass
class RunOutcome:
    out: Path
    summary: dict[str, Any]
    answered: int  # items answered in this call (not resumed ones)
    resumed: int
    report: tuple[Path, Path] | None = None
    errors: list[str] = field(default_factory=list)


def _fingerprint(items: Sequence[KBFItem]) -> str:
    digest = hashlib.sha256()
    for item in items:
        digest.update(json.dumps(item.to_record(), sort_keys=True, ensure_ascii=False).encode())
    return digest.hexdigest()[:16]


def select_items(items: Sequence[KBFItem], part: str | None, limit: int | None) -> list[KBFItem]:
    chosen = [i for i in items if part is None or i.provenance.get("part") == part]
    if part is not None and not chosen:
        raise RunError(f"No item is marked as part {part!r} (only generated items carry a part).")
    if limit is None or len(chosen) <= limit:
        return chosen
    out: list[KBFItem] = []
    for split in ("KRf", "KR"):
        group = [i for i in chosen if i.split == split]
        share = round(limit * len(group) / len(chosen))
        step = len(group) / share if share else 0
        out += [group[int(n * step)] for n in range(share)]
    return out


def load_items(book: Book, spec: RunSpec) -> list[KBFItem]:
    if spec.items is not None:
        return read_items(spec.items, book)
    memory = load_book_memory(book.slug)
    items: list[KBFItem] = []
    for character in book.characters:
        items += generate_items(book, character, memory.facts, memory.entities, per_split=spec.per_split)
    return items


def _model_label(handle: ModelHandle) -> str:
    return "none" if handle.lm is None else handle.name


def _check_run(out: Path, identity: dict[str, Any]) -> None:
    path = out / "run.json"
    if path.is_file():
        before = json.loads(path.read_text(encoding="utf-8"))
        differs = [k for k in ("book", "model", "embedder", "items") if before.get(k) != identity.get(k)]
        if differs:
            raise RunError(f"{out} holds a run with another {', '.join(differs)}; choose another --out "
                           f"or remove that folder.")
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(identity, indent=2), encoding="utf-8")


def _drop_torn_line(partial: Path) -> None:
    """Cut a last line left unfinished by an interruption, so appended lines start clean."""
    if partial.is_file():
        data = partial.read_bytes()
        if data and not data.endswith(b"\n"):
            partial.write_bytes(data[: data.rfind(b"\n") + 1])


def _done(partial: Path) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    if partial.is_file():
        for line in partial.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by an interruption: that item is answered again
            rows[row["item_id"]] = row
    return rows


def _row(method: str, model: str, item: KBFItem, answer: Answer | None, error: str = "") -> dict[str, Any]:
    if answer is None:
        choice, how, reply = None, "error", ""
        answer = Answer(reply="")
    elif answer.choice is not None:
        choice, how, reply = answer.choice, "method", answer.reply
    else:
        match = match_reply(answer.reply, item)
        choice, how, reply = match.letter, match.how, answer.reply
    return {
        "method": method, "model": model, "book": item.book, "character": item.character, "item_id": item.id,
        "split": item.split, "part": str(item.provenance.get("part") or ""), "item_method": item.method,
        "gold": item.gold, "choice": choice, "correct": choice == item.gold, "matched_by": how, "reply": reply,
        "error": error, "calls": answer.calls, "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens, "seconds": round(answer.seconds, 4),
        "detail": json.dumps(answer.detail, ensure_ascii=False, default=str),
    }


Progress = Callable[[str], None]


def run_evaluation(spec: RunSpec, progress: Progress | None = None, *, handle: ModelHandle | None = None,
                   embedder: Embedder | None = None) -> RunOutcome:
    """Run the methods of `spec` on its items; `handle` and `embedder`, when given, are used
    instead of opening `spec.lm` and `spec.embedder` (the caller then closes the handle)."""
    say = progress or (lambda _: None)
    book = load_book(spec.book)
    names = list(spec.methods) or method_names()
    unknown = [n for n in names if n not in method_names()]
    if unknown:
        raise RunError(f"Unknown method(s) {', '.join(unknown)}; known: {', '.join(method_names())}.")
    items = select_items(load_items(book, spec), spec.part, spec.limit)
    if not items:
        raise RunError(f"There are no items to judge for {book.slug}.")
    owned = handle is None
    handle = handle if handle is not None else open_model(spec.lm)
    embedder = embedder if embedder is not None else open_embedder(spec.embedder)
    model = _model_label(handle)
    identity = {"book": book.slug, "model": model, "embedder": embedder.name, "items": _fingerprint(items),
                "n_items": len(items), "methods": names,
                "items_source": str(spec.items) if spec.items else "generated", "part": spec.part}
    out = spec.out
    _check_run(out, identity)
    write_items(out / "items.jsonl", items)
    answered = resumed = 0
    errors: list[str] = []
    try:
        for name in names:
            partial = out / "partial" / f"{name}.jsonl"
            partial.parent.mkdir(parents=True, exist_ok=True)
            _drop_torn_line(partial)
            done = _done(partial)
            todo = [i for i in items if i.id not in done]
            resumed += len(items) - len(todo)
            if not todo:
                say(f"{name}: all {len(items)} items already answered")
                continue
            ctx = MethodContext(book=book, handle=handle, embedder=embedder,
                                work_dir=data_home() / "eval" / book.slug / name / embedder.name)
            method = make_method(name, ctx)
            started = time.perf_counter()
            say(f"{name}: preparing")
            method.prepare()
            with partial.open("a", encoding="utf-8") as sink:
                for n, item in enumerate(todo, start=1):
                    try:
                        row = _row(name, model, item, method.answer(item))
                    except ModelOutputError as exc:
                        row = _row(name, model, item, None, error=str(exc))
                        errors.append(f"{name} {item.id}: {exc}")
                    sink.write(json.dumps(row, ensure_ascii=False) + "\n")
                    sink.flush()
                    answered += 1
                    elapsed = time.perf_counter() - started
                    left = elapsed / n * (len(todo) - n)
                    say(f"{name}: {len(items) - len(todo) + n}/{len(items)} items, {elapsed:.0f}s elapsed, "
                        f"~{left:.0f}s left")
    finally:
        if owned:
            handle.close()
    summary = finish(out, items, identity, names)
    report = write_report(out)
    return RunOutcome(out=out, summary=summary, answered=answered, resumed=resumed, report=report, errors=errors)


def finish(out: Path, items: Sequence[KBFItem], identity: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """results.parquet and summary.json from the partial files of a run."""
    wanted = {i.id for i in items}
    rows: list[dict[str, Any]] = []
    for name in names:
        rows += [r for r in _done(out / "partial" / f"{name}.jsonl").values() if r["item_id"] in wanted]
    frame = pl.DataFrame(rows, schema_overrides={"choice": pl.String, "error": pl.String}) if rows else \
        pl.DataFrame(schema={c: pl.String for c in RESULT_COLUMNS})
    frame.write_parquet(out / "results.parquet")
    methods = summarise(frame) if rows else {}
    for name, entry in methods.items():
        mine = frame.filter(pl.col("method") == name)
        calls = mine["calls"].to_list()
        entry["calls_per_item"] = {"median": statistics.median(calls) if calls else 0, "max": max(calls, default=0)}
        entry["seconds"] = round(float(mine["seconds"].sum()), 2)
        entry["unmatched"] = int(mine.filter(pl.col("choice").is_null()).height)
    summary = {
        "model": identity["model"], "embedder": identity["embedder"],
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {_cores()} cores, {platform.system()}",
        "items": {"source": identity["items_source"], "n": len(items), "books": sorted({i.book for i in items}),
                  "part": identity.get("part"), "fingerprint": identity["items"]},
        "methods": {n: methods[n] for n in names if n in methods},
    }
    if (compiled := compiled_block(out, model=identity["model"])) is not None:
        summary["compiled"] = compiled  # before/after of the compiled programs (eval.compile)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")
    return summary


def _cores() -> int:
    import os

    return os.cpu_count() or 1
