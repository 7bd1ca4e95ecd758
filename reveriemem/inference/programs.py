"""The inference programs: the agent's three model prompts as one DSPy module, and which
compiled state the agent loads.

`InferencePrograms` holds `self_probe`, `select_pattern` and `memory_fusion` (the factories of
`dspy_programs.inference`), so DSPy can compile them together (`eval/compile.py`). By default the
agent loads compiled state (demos and, after MIPROv2, instructions) from
`dspy_programs/compiled/inference.json` when that file exists; `REVERIEMEM_COMPILED=<path>`
names another compiled file and `REVERIEMEM_COMPILED=none` loads none; the agent's `programs=`
overrides both. A compiled file made from other signatures than the current ones (its
`reveriemem.signatures` digest differs) is never loaded: a stale default file is skipped with a
warning, a file named by `REVERIEMEM_COMPILED` is an error (`CompiledProgramError`). Calls still
go through `run_program`, whose persistent-cache key includes each program's state (its demos),
so a compiled program never reuses an uncompiled program's answers.
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


class CompiledProgramError(ReverieMemError):
    """A compiled program file is missing, unreadable, or made for other signatures."""


class InferencePrograms(dspy.Module):
    """The agent's three model prompts as one DSPy module, so they compile together.

    `self_probe`, `select_pattern` and `memory_fusion` are the predictors of
    `dspy_programs.inference` (EmoGate and EmoTransition are not: by default
    they are no prompts at all). The agent calls each one through
    `run_program`; the module itself is never called. `compiled` is the file
    its state was loaded from (None: the plain signatures, no demos).
    """

    def __init__(self) -> None:
        super().__init__()
        self.self_probe = self_probe_program()
        self.select_pattern = select_pattern_program()
        self.memory_fusion = memory_fusion_program()
        self.compiled: Path | None = None

    def forward(self, **inputs: Any) -> dspy.Prediction:
        raise TypeError("InferencePrograms only holds the agent's programs; the agent calls each one itself.")

    @property
    def demos(self) -> dict[str, int]:
        """Predictor name -> number of demos."""
        return {name: len(predictor.demos) for name, predictor in self.named_predictors()}

    @property
    def label(self) -> str | None:
        """What the trace names: the compiled file's name, "unsaved" for demos not loaded from a file, else None."""
        if self.compiled is not None:
            return self.compiled.name
        return "unsaved" if any(self.demos.values()) else None

    @classmethod
    def from_file(cls, path: str | Path) -> InferencePrograms:
        """Programs with the compiled state of `path` (a JSON written by `save_compiled` or DSPy's `save`)."""
        path = Path(path).expanduser().resolve()
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CompiledProgramError(f"The compiled program {path} could not be read ({exc}).") from exc
        programs = cls()
        made_for = (state.get(COMPILED_KEY) or {}).get("signatures") if isinstance(state, dict) else None
        if made_for is not None and made_for != programs.signature_digest():
            raise CompiledProgramError(
                f"The compiled program {path} was made for other prompts than those in dspy_programs/inference.py; "
                "compile again (`reveriemem compile BOOK`) or remove it.")
        try:
            programs.load(path)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CompiledProgramError(f"The compiled program {path} does not fit the agent's programs ({exc}).") from exc
        programs.compiled = path
        return programs

    @classmethod
    def signature_digest(cls) -> str:
        """A digest of the plain signatures (as the factories build them): what a compiled file was made for."""
        parts = []
        for name, predictor in cls().named_predictors():
            signature = predictor.signature
            fields = [[key, dict(value.json_schema_extra or {}), repr(value.annotation)]
                      for key, value in signature.fields.items()]
            parts.append([name, signature.instructions, fields])
        text = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def save_compiled(self, path: str | Path, **about: Any) -> Path:
        """Write the state (demos, instructions) as JSON, atomically; `about` joins the file's `reveriemem` block."""
        path = Path(path).expanduser().resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        state: dict[str, Any] = self.dump_state()
        state["metadata"] = {"dependency_versions": get_dependency_versions()}
        state[COMPILED_KEY] = {"signatures": self.signature_digest(), "demos": self.demos, **about}
        text = json.dumps(state, indent=2, ensure_ascii=False, default=str) + "\n"
        _atomic_write(path, text)
        return path


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


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


def default_programs() -> InferencePrograms:
    """The agent's programs when none are given: compiled from `compiled_path()`, else plain.

    A default file that cannot be loaded (unreadable, or made for other
    signatures) is skipped with a warning; one named by `$REVERIEMEM_COMPILED` raises."""
    path = compiled_path()
    if path is None:
        return InferencePrograms()
    try:
        return InferencePrograms.from_file(path)
    except CompiledProgramError as exc:
        if os.environ.get(COMPILED_ENV, "").strip():
            raise
        log.warning("%s The agent uses the plain programs.", exc)
        return InferencePrograms()
