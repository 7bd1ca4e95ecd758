"""What every `reveriemem` command shares: the quiet terminal, signals, failures in a sentence, the model notice.

Without `--verbose`, library warnings (Dagster's BetaWarning and the like),
Dagster's per-step error logs and the embedder's loading bars stay off the
terminal, and a failure or an interrupt is told in one or two sentences:
what failed, where, and (for the commands that resume) that rerunning the
same command resumes. `--verbose` shows the traceback and the library output.
SIGTERM is handled as Ctrl-C, so a build ended by a signal records its
unfinished Dagster runs as failed (see `reveriemem_dagster.build`).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import traceback
import warnings
from pathlib import Path

import click

from reveriemem.core.errors import FAILED_STEP_NOTE as BUILD_NOTE
from reveriemem.core.errors import ReverieMemError
from reveriemem.core.settings import LM_ENV, lm_configured

VERBOSE_ENV = "REVERIEMEM_VERBOSE"
RESUMING = {"build", "demo", "eval"}  # commands whose rerun resumes where the last one stopped

BUNDLED_WORDS = ("bundled", "smollm2")
EXIT_INTERRUPTED = 130

NO_MODEL_NOTICE = ("No model configured: using the offline rules (set ${env} or pass --lm MODEL for a "
                   "LiteLLM model; --lm bundled tries the tiny SmolLM2-135M).")
BUNDLED_WARNING = ("The bundled SmolLM2-135M is tiny and slow (a few model calls per 10 s on 2 cores, so a "
                   "whole book takes hours) and it scores below the offline rules (scene rosters 0.767 against "
                   "0.967); it proves the wiring, not quality.")


def verbose_requested(args: list[str]) -> tuple[bool, list[str]]:
    """Whether `--verbose` is anywhere on the command line (or $REVERIEMEM_VERBOSE is set), and the rest."""
    flag = "--verbose" in args
    rest = [a for a in args if a != "--verbose"]
    env = os.environ.get(VERBOSE_ENV, "").strip().lower() not in {"", "0", "false", "no", "off"}
    return flag or env, rest


def prepare_terminal(verbose: bool) -> None:
    """Quiet the libraries (unless verbose) and make SIGTERM interrupt like Ctrl-C.

    LiteLLM reads its price table from its installed copy: otherwise importing it
    tries to fetch the table over the network (three attempts, about 10 s offline).
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    global _verbose
    _verbose = verbose
    if not verbose:
        warnings.filterwarnings("ignore")
        os.environ.setdefault("LITELLM_LOG", "ERROR")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        for name in ("LiteLLM", "litellm", "httpx", "sentence_transformers", "transformers", "dagster"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    if hasattr(signal, "SIGTERM"):
        signal.signal(signal.SIGTERM, signal.default_int_handler)


_verbose = False  # set by prepare_terminal for this command


def is_verbose() -> bool:
    return _verbose


def dagster_console_level() -> str:
    """Dagster's console log level for a build: its step-failure tracebacks only when verbose."""
    return "WARNING" if is_verbose() else "CRITICAL"


def interrupted(exc: BaseException) -> bool:
    """Ctrl-C or SIGTERM, as Python or as Dagster (inside a step) raises it."""
    return isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "DagsterExecutionInterruptedError"


def failure_message(exc: BaseException, command: str, line: str) -> str:
    """One or two sentences for a failed or interrupted command: what, where, and how to resume."""
    step = next((n.removeprefix(BUILD_NOTE) for n in getattr(exc, "__notes__", []) if n.startswith(BUILD_NOTE)), "")
    where = f" in step {step}" if step else ""
    resume = (f" Work already done is kept: rerun `{line}` to resume." if command in RESUMING else "")
    hint = "" if is_verbose() else " (--verbose shows the traceback)"
    if interrupted(exc):
        return f"Interrupted{where}.{resume}".strip()
    if isinstance(exc, ReverieMemError):
        detail = str(exc).strip()
        return (f"{detail}" if not step else f"Failed{where}: {detail}{'' if detail.endswith('.') else '.'}") + resume
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    what = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    stop = "" if what.endswith((".", "!", "?")) else "."  # "max_rounds must be at least 1." keeps one full stop
    return f"`reveriemem {command}` failed{where}: {what}{stop}{resume}{hint}"


def report_failure(exc: BaseException, command: str, argv: list[str]) -> int:
    """Print the failure (the traceback too when verbose) on stderr; returns the exit code."""
    if is_verbose():
        traceback.print_exception(exc, file=sys.stderr)
    line = " ".join(["reveriemem", *(a for a in argv if a != "--verbose")])
    print(f"Error: {failure_message(exc, command, line)}", file=sys.stderr)
    return EXIT_INTERRUPTED if interrupted(exc) else 1


def model_notice(lm: str) -> str | None:
    """What to tell the user once about the model a command will use (no model imports needed)."""
    chosen = (lm or os.environ.get(LM_ENV, "")).strip().lower()
    if not lm and not lm_configured():
        return NO_MODEL_NOTICE.replace("${env}", f"${LM_ENV}")
    if chosen in BUNDLED_WORDS:
        return BUNDLED_WARNING
    return None


def output_file(out: str | None, example: str = "rows.jsonl", option: str = "--out",
                makes_folder: bool = False) -> Path | None:
    """The file a command is to write, or one sentence on why it cannot be written there (None: standard output).

    `makes_folder`: the writer creates a missing folder itself, so only a folder that is a file is refused.
    """
    if out is None:
        return None
    if not out.strip():
        raise click.ClickException(f"{option} is empty; give a file path.")
    path = Path(out).expanduser()
    if path.is_dir() or out.endswith(("/", os.sep)):
        kind = "is a directory" if path.is_dir() else "names a folder"
        raise click.ClickException(f"{option} {out} {kind}; give a file path (such as {path / example}).")
    folder = path.parent
    if not folder.exists() and not makes_folder:
        raise click.ClickException(f"The folder {folder} does not exist; create it or give {option} another path.")
    if folder.exists() and not folder.is_dir():
        raise click.ClickException(f"{folder} is a file, not a folder; give {option} another path.")
    return path
