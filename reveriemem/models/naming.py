"""Readable names for DSPy signatures, for error messages and the test fake."""

from __future__ import annotations

import dspy

_GENERIC = "StringSignature"


def signature_label(signature: type[dspy.Signature]) -> str:
    """The signature's class name, or the name of the class it was derived from.

    Modules such as `dspy.ChainOfThought` rebuild a signature (adding a
    `reasoning` output) under the generic name `StringSignature`. The original
    class is found again by its instructions and fields; failing that the
    label is the field list, e.g. `question -> reasoning, answer`.
    """
    if signature.__name__ != _GENERIC:
        return signature.__name__
    origin = _named_origin(signature)
    return origin if origin is not None else signature.signature


def _named_origin(signature: type[dspy.Signature]) -> str | None:
    inputs = set(signature.input_fields)
    outputs = set(signature.output_fields)
    best: dict[str, int] = {}
    stack = list(dspy.Signature.__subclasses__())
    seen: set[type] = set()
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        stack.extend(cls.__subclasses__())
        if cls.__name__ == _GENERIC or cls.instructions != signature.instructions:
            continue
        if set(cls.input_fields) == inputs and set(cls.output_fields) <= outputs:
            best[cls.__name__] = max(best.get(cls.__name__, 0), len(cls.output_fields))
    if not best:
        return None
    top = max(best.values())
    names = [name for name, size in best.items() if size == top]
    return names[0] if len(names) == 1 else None
