"""Which compiled state the agent's module loads, and how that state is saved.

`ReverieInference` (`reveriemem.inference.module`) holds the agent's three prompts as its
predictors `self_probe`, `select_pattern` and `memory_fusion`. By default it loads compiled state
(demos and, after MIPROv2, instructions) from `dspy_programs/compiled/inference.json` when that
file exists; `REVERIEMEM_COMPILED=<path>` names another compiled file and `REVERIEMEM_COMPILED=none`
loads none; the module's `compiled=` argument overrides both. A compiled file made from other
signatures than the current ones (its `reveriemem.signatures` digest differs) is never loaded: a
stale default file is skipped with a warning, a file named by `REVERIEMEM_COMPILED` or passed
explicitly is an error (`CompiledProgramError`). Calls still go through `run_program`, whose
persistent-cache key includes each predictor's state (its demos), so a compiled module never
reuses an uncompiled module's answers.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import dspy
from dspy.utils.saving import get_dependency_versions

import dspy_programs
from dspy_programs.inference import memory_fusion_program, select_pattern_program, self_probe_program
from reveriemem.core.errors import ReverieMemError

log = logging.getLogger(__name__)

COMPILED_ENV = "REVERIEMEM_COMPILED"  # a compiled program's JSON for the agent; "none": load none
COMPILED_DIR = Path(dspy_programs.__file__).resolve().parent / "compiled"
DEFAULT_COMPILED = COMPILED_DIR / "inference.json"  # loaded by default when present
COMPILED_KEY = "reveriemem"  # the project's own block in a compiled program's JSON
_NO_COMPILED = frozenset({"none", "off", "0", "false", "no"})
PREDICTORS = {"self_probe": self_probe_program, "select_pattern": select_pattern_program,
              "memory_fusion": memory_fusion_program}  # the module's predictors, by attribute name


class CompiledProgramError(ReverieMemError):
    """A compiled program file is missing, unreadable, or made for other signatures."""


def signature_digest() -> str:
    """A digest of the plain signatures (as the factories build them): what a compiled file was made for."""
    parts = []
    for name, factory in PREDICTORS.items():
        signature = factory().signature
        fields = [[key, dict(value.json_schema_extra or {}), repr(value.annotation)]
                  for key, value in signature.fields.items()]
        parts.append([name, signature.instructions, fields])
    text = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def demos_of(module: dspy.Module) -> dict[str, int]:
    """Predictor name -> number of demos."""
    return {name: len(predictor.demos) for name, predictor in module.named_predictors()}


def load_compiled(module: dspy.Module, path: str | Path) -> Path:
    """Load the compiled state of `path` (written by `save_compiled` or DSPy's `save`) into `module`."""
    path = Path(path).expanduser().resolve()
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CompiledProgramError(f"The compiled program {path} could not be read ({exc}).") from exc
    made_for = (state.get(COMPILED_KEY) or {}).get("signatures") if isinstance(state, dict) else None
    if made_for is not None and made_for != signature_digest():
        raise CompiledProgramError(
            f"The compiled program {path} was made for other prompts than those in dspy_programs/inference.py; "
            "compile again (`reveriemem compile BOOK`) or remove it.")
    try:
        module.load(path)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CompiledProgramError(f"The compiled program {path} does not fit the agent's module ({exc}).") from exc
    return path


def save_compiled(module: dspy.Module, path: str | Path, **about: Any) -> Path:
    """Write the module's state (demos, instructions) as JSON, atomically; `about` joins its `reveriemem` block."""
    path = Path(path).expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    state: dict[str, Any] = module.dump_state()
    state["metadata"] = {"dependency_versions": get_dependency_versions()}
    state[COMPILED_KEY] = {"signatures": signature_digest(), "demos": demos_of(module), **about}
    text = json.dumps(state, indent=2, ensure_ascii=False, default=str) + "\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def compiled_path() -> Path | None:
    """The compiled program the agent loads: `$REVERIEMEM_COMPILED` ("none": none), else
    `dspy_programs/compiled/inference.json` when it exists, else None."""
    value = os.environ.get(COMPILED_ENV, "").strip()
    if value.lower() in _NO_COMPILED:
        return None
    if value:
        path = Path(value).expanduser().resolve()
        if not path.is_file():
            raise CompiledProgramError(f"{COMPILED_ENV} names {path}, which is not a file; "
                                       f"set it to a compiled program's JSON or to 'none'.")
        return path
    return DEFAULT_COMPILED if DEFAULT_COMPILED.is_file() else None


def load_default(module: dspy.Module) -> Path | None:
    """Load the state of `compiled_path()` into `module`; the path loaded, or None.

    A default file that cannot be loaded (unreadable, or made for other signatures) is skipped with a
    warning and the module keeps its plain predictors; one named by `$REVERIEMEM_COMPILED` raises."""
    path = compiled_path()
    if path is None:
        return None
    try:
        return load_compiled(module, path)
    except CompiledProgramError as exc:
        if os.environ.get(COMPILED_ENV, "").strip():
            raise
        log.warning("%s The agent uses the plain programs.", exc)
        return None
