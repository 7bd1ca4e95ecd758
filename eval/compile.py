"""Compiling the agent's three prompts against KBF-QA (Self-Probe, Pattern, Memory-Fusion).

    outcome = compile_inference("the-lamplighters-ledger", "openai/gpt-4o-mini",
                                train_items=train, heldout_items=heldout)

The student is the agent users talk to: `reveriemem.inference.module.ReverieInference`
over the book (`student`: a `BookMemory` opens one `MemoryReader` per character, with
the embedder the memory was built with). Each example's inputs are the question as
a user types it, options included (`eval.items.render_question`), and the character;
`forward` returns a `dspy.Prediction` with the `reply`. Its only predictors are
`self_probe`, `select_pattern` and `memory_fusion`, so an optimizer compiles the
three prompts together, and the saved JSON loads into the same class for `ask`,
`chat` and the eval (`reveriemem.inference.compiled`).

The metric is `eval.metrics.weighted_metric(train)`: a reply is matched to a
letter by `eval.matching`; while bootstrapping it is a pass or a fail, and
averaged (MIPROv2's trials) it is the split-balanced accuracy, so neither KRf
nor KR can be traded away for the other, as in KBF.

How the run goes:

1. the held-out items are answered with the plain module ("before");
2. the optimizer compiles on the train items: `BootstrapFewShot` (demos only,
   at most `max_demos` per predictor) or, with `optimizer="mipro"` and optuna
   installed, `MIPROv2` (instructions and demos; without optuna it is skipped
   for BootstrapFewShot, and the summary says so). Bootstrapping runs with the
   persistent model cache off: a call answered from that cache never runs its
   predictor, so DSPy's trace would miss it and no demo could be taken from
   it; the agent runs its personality track inline so every predictor call is
   traced in the calling thread. Labelled demos are not used (a KBF item is
   not an input of any one prompt);
3. the compiled state is written atomically to a candidate file, loaded back into
   a fresh module, and the held-out items are answered again with it ("after");
4. the candidate replaces `out` atomically, and `<out stem>.compiled.json`
   beside it records the before/after scores (`compiled_block` reads it for a
   run's summary.json).

A Memory-Fusion output that never parses counts as a wrong answer, as in the
runner; an unreachable model stops the compilation and nothing is written.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dspy

from eval.items import KBFItem, render_question
from eval.metrics import Scores, is_correct, predicted_letter, score, weighted_metric
from reveriemem.core.embeddings import Embedder, open_embedder
from reveriemem.core.errors import ModelOutputError, ReverieMemError
from reveriemem.core.registry import Book, load_book
from reveriemem.inference.compiled import (
    DEFAULT_COMPILED,
    CompiledProgramError,
    compiled_path,
    demos_of,
    save_compiled,
)
from reveriemem.inference.module import BookMemory, ReverieInference
from reveriemem.models import ModelHandle, open_model

log = logging.getLogger(__name__)

METHOD = "reveriemem"  # the row the before/after block fills
SPLIT = "held-out"
OPTIMIZERS = {"bootstrap": "BootstrapFewShot", "mipro": "MIPROv2"}
SUMMARY_SUFFIX = ".compiled.json"  # beside a compiled program: <stem>.compiled.json
RUN_SUMMARY = "compiled.json"  # in a run folder
BLOCK_KEYS = ("before", "after", "split", "optimizer", "model", "train", "heldout", "program", "max_demos", "demos",
              "calls", "note", "created")
MIPRO_CANDIDATES = 2  # instruction and demo-set candidates per predictor (MIPROv2)
MIPRO_TRIALS = 4


class CompileError(ReverieMemError):
    """Compilation cannot start (no model, no items, unknown optimizer)."""


Progress = Callable[[str], None]


# -- the agent as a DSPy program ---------------------------------------------------


def student(book: Book, handle: ModelHandle, embedder: Embedder, *, uri: str | None = None, max_rounds: int = 3,
            compiled: bool | str | Path = False, memory: BookMemory | None = None) -> ReverieInference:
    """The agent users talk to, answering as any character of `book`: what is compiled and scored.

    The personality track runs inline, so every predictor call is traced in the calling thread."""
    return ReverieInference(memory or BookMemory(book, embedder, uri), handle, max_rounds=max_rounds,
                            compiled=compiled, inline_personality=True)


def to_example(item: KBFItem) -> dspy.Example:
    """A KBF item as a DSPy example: inputs the question as a user types it (options included) and the
    character; split, options and gold for the metric."""
    return dspy.Example(id=item.id, book=item.book, character=item.character, split=item.split,
                        question=render_question(item), options=dict(item.options), gold=item.gold,
                        item_question=item.question).with_inputs("question", "character")


# -- evaluation ----------------------------------------------------------------------


@dataclass
class Evaluation:
    scores: Scores
    letters: dict[str, str | None]  # item id -> the letter the reply was matched to
    errors: int  # replies that never parsed
    seconds: float

    def entry(self, model: str) -> dict[str, Any]:
        return {**self.scores.to_dict(), "model": model, "errors": self.errors, "seconds": round(self.seconds, 1)}


def evaluate(program: ReverieInference, examples: Sequence[dspy.Example], progress: Progress | None = None,
             label: str = "") -> Evaluation:
    """Answer every example in turn, each a fresh conversation; KRf/KR accuracy and KBF of the replies
    (`eval.metrics.score`). A Memory-Fusion output that never parses is a wrong answer, as in the runner."""
    started = time.perf_counter()
    results: list[tuple[str, bool]] = []
    letters: dict[str, str | None] = {}
    errors = 0
    for n, example in enumerate(examples, start=1):
        try:
            prediction = program(**example.inputs())
        except ModelOutputError:
            prediction, errors = dspy.Prediction(reply=""), errors + 1
        letters[str(example.id)] = predicted_letter(example, prediction)
        results.append((str(example.split), is_correct(example, prediction)))
        if progress is not None:
            progress(f"{label}: {n}/{len(examples)} items, {time.perf_counter() - started:.0f}s")
    return Evaluation(score(results), letters, errors, time.perf_counter() - started)


# -- compiling -------------------------------------------------------------------------


@dataclass
class CompileOutcome:
    program: Path  # the compiled program's JSON
    summary: Path  # <stem>.compiled.json beside it
    block: dict[str, Any]  # summary.json's "compiled" block
    agent: ReverieInference  # the compiled module as loaded back from `program`


def summary_path(program: Path) -> Path:
    """Where a compiled program's before/after summary lives: `<stem>.compiled.json` beside it."""
    return program.with_name(program.stem + SUMMARY_SUFFIX)


def compile_inference(book: str | Book, lm: ModelHandle | str | None, *, train_items: Sequence[KBFItem],
                      heldout_items: Sequence[KBFItem], optimizer: str = "bootstrap", max_demos: int = 2,
                      out: Path = Path("dspy_programs/compiled/inference.json"),
                      embedder: Embedder | str | None = None, uri: str | None = None, max_rounds: int = 3,
                      progress: Progress | None = None) -> CompileOutcome:
    """Compile Self-Probe, Pattern and Memory-Fusion on `train_items`, score before and after on
    `heldout_items`, and save the compiled program to `out` (see the module docstring).

    `lm` is a model handle (the caller closes it) or a model string (opened and closed here).
    `embedder` must be the one the memory was built with (default: `$REVERIEMEM_EMBEDDER`)."""
    say = progress or (lambda _: None)
    if optimizer not in OPTIMIZERS:
        raise CompileError(f"Unknown optimizer {optimizer!r}; choose {' or '.join(OPTIMIZERS)}.")
    if not train_items or not heldout_items:
        raise CompileError("Compiling needs train items and held-out items; neither may be empty.")
    overlap = {i.id for i in train_items} & {i.id for i in heldout_items}
    if overlap:
        raise CompileError(f"{len(overlap)} item(s) are both train and held-out (e.g. {sorted(overlap)[0]}).")
    if max_demos < 1:
        raise CompileError("max_demos must be at least 1.")
    registered = book if isinstance(book, Book) else load_book(book)
    owned = not isinstance(lm, ModelHandle)
    handle = open_model(lm) if not isinstance(lm, ModelHandle) else lm
    try:
        if handle.lm is None:
            raise CompileError("Compiling needs a language model; `none` has no prompts to compile (use --lm).")
        embedding = open_embedder(embedder) if embedder is None or isinstance(embedder, str) else embedder
        return _compile(registered, handle, embedding, train_items, heldout_items, optimizer, max_demos,
                        Path(out), uri, max_rounds, say)
    finally:
        if owned:
            handle.close()


def _compile(book: Book, handle: ModelHandle, embedder: Embedder, train_items: Sequence[KBFItem],
             heldout_items: Sequence[KBFItem], optimizer: str, max_demos: int, out: Path, uri: str | None,
             max_rounds: int, say: Progress) -> CompileOutcome:
    train = [to_example(i) for i in train_items]
    heldout = [to_example(i) for i in heldout_items]
    model = handle.name
    note = ""
    if optimizer == "mipro" and importlib.util.find_spec("optuna") is None:
        note = "MIPROv2 skipped: optuna is not installed; compiled with BootstrapFewShot"
        say(note)
        optimizer = "bootstrap"
    memory = BookMemory(book, embedder, uri)
    plain = student(book, handle, embedder, max_rounds=max_rounds, memory=memory)
    calls = _CallCounter(handle)
    before = evaluate(plain, heldout, say, "before")
    say(f"before: {_line(before.scores)}; {calls.take('before')}")

    # the teacher's calls must run their predictors to be traced: no persistent cache while compiling;
    # a reply that never parses fails its item (an error per train item is allowed)
    learner = student(book, replace(handle, cache=False), embedder, max_rounds=max_rounds, memory=memory)
    allowed = len(train) + 1
    metric = weighted_metric(train)
    started = time.perf_counter()
    overrides: dict[str, Any] = {"lm": handle.lm}
    if handle.adapter is not None:
        overrides["adapter"] = handle.adapter
    with dspy.context(**overrides):
        if optimizer == "mipro":
            teleprompter: Any = dspy.MIPROv2(metric=metric, auto=None, num_candidates=MIPRO_CANDIDATES,
                                             max_bootstrapped_demos=max_demos, max_labeled_demos=0, num_threads=1,
                                             max_errors=allowed, verbose=False)
            compiled = teleprompter.compile(learner, trainset=train, num_trials=MIPRO_TRIALS, minibatch=False)
        else:
            teleprompter = dspy.BootstrapFewShot(metric=metric, max_bootstrapped_demos=max_demos,
                                                 max_labeled_demos=0, max_rounds=1, max_errors=allowed)
            compiled = teleprompter.compile(learner, trainset=train)
    compile_seconds = time.perf_counter() - started
    say(f"compiled with {OPTIMIZERS[optimizer]} in {compile_seconds:.0f}s: demos {demos_of(compiled)}; "
        f"{calls.take('compile')}")

    out = out.expanduser().resolve()
    candidate = out.with_name(f".{out.stem}.candidate.json")
    about = {"optimizer": OPTIMIZERS[optimizer], "model": model, "book": book.slug, "train": len(train),
             "max_demos": max_demos, "created": datetime.now(UTC).isoformat(timespec="seconds")}
    try:
        save_compiled(compiled, candidate, **about)
        loaded = student(book, handle, embedder, max_rounds=max_rounds, memory=memory, compiled=candidate)
        after = evaluate(loaded, heldout, say, "after")
        say(f"after: {_line(after.scores)}; {calls.take('after')}")
        os.replace(candidate, out)
    finally:
        candidate.unlink(missing_ok=True)
    loaded.compiled = out
    if after.scores.kbf is not None and before.scores.kbf is not None and after.scores.kbf < before.scores.kbf:
        log.warning("The compiled program scores lower on the held-out items than the plain one (KBF %.3f < %.3f)",
                    after.scores.kbf, before.scores.kbf)
    block = {
        "before": {METHOD: before.entry(model)}, "after": {METHOD: after.entry(model)}, "split": SPLIT,
        "optimizer": OPTIMIZERS[optimizer], "model": model, "train": len(train), "heldout": len(heldout),
        "program": _shown(out), "max_demos": max_demos, "demos": demos_of(loaded), "note": note,
        "created": about["created"], "book": book.slug, "compile_seconds": round(compile_seconds, 1),
        "calls": calls.phases,
        "answers": {"gold": {str(e.id): str(e.gold) for e in heldout}, "before": before.letters,
                    "after": after.letters},
    }
    summary = summary_path(out)
    _write_json(summary, block)
    return CompileOutcome(out, summary, compiled_block(summary) or block, loaded)


class _CallCounter:
    """Model calls, persistent-cache hits and tokens of each phase of a compilation (from the handle's usage)."""

    KEYS = ("calls", "cached_calls", "failed_calls", "prompt_tokens", "completion_tokens", "latency_s")

    def __init__(self, handle: ModelHandle) -> None:
        self.handle = handle
        self.last = self._now()
        self.phases: dict[str, dict[str, int | float]] = {}

    def _now(self) -> dict[str, int | float]:
        summary = self.handle.usage.summary()
        return {key: summary[key] for key in self.KEYS}  # type: ignore[misc]

    def take(self, phase: str) -> str:
        """Record what `phase` used since the last phase; a line for the progress output."""
        now = self._now()
        used = {key: round(now[key] - self.last[key], 3) for key in self.KEYS}
        self.phases[phase], self.last = used, now
        return (f"{used['calls']} model calls ({used['failed_calls']} failed, {used['cached_calls']} from the cache), "
                f"{used['completion_tokens']} completion tokens")


def _shown(path: Path) -> str:
    """A path as the summary records it: relative to the working folder when inside it (a
    summary committed beside its program names no one's home folder)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _line(scores: Scores) -> str:
    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    return (f"KRf {pct(scores.krf_acc)}, KR {pct(scores.kr_acc)}, KBF {pct(scores.kbf)} "
            f"(n {scores.n_krf}:{scores.n_kr})")


def _write_json(path: Path, value: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# -- the report's "compiled" block ---------------------------------------------------------


def compiled_block(path: Path, model: str | None = None) -> dict[str, Any] | None:
    """The "compiled" block of a run's summary.json, or None.

    `path` is a run folder (its `compiled.json`, when present, wins), a compiled
    program (its `<stem>.compiled.json`) or such a summary itself. For a run
    folder without one, the summary beside the compiled program the agent
    loads (`reveriemem.inference.compiled.compiled_path()`) is used, unless `model` is
    "none" (the agent then calls no prompt)."""
    path = Path(path)
    candidates: list[Path] = []
    if path.is_dir():
        candidates.append(path / RUN_SUMMARY)
        if model != "none":
            try:
                program = compiled_path()
            except CompiledProgramError:
                program = None
            if program is not None:
                candidates.append(summary_path(program))
    elif path.name == RUN_SUMMARY or path.name.endswith(SUMMARY_SUFFIX):
        candidates.append(path)
    else:
        candidates.append(summary_path(path))
    for candidate in candidates:
        try:
            data = json.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("before"), dict) and isinstance(data.get("after"), dict):
            return {key: data[key] for key in BLOCK_KEYS if key in data}
    return None


__all__ = ["DEFAULT_COMPILED", "student", "CompileError", "CompileOutcome", "compile_inference",
           "compiled_block", "evaluate", "summary_path", "to_example"]
