"""Which signature a DSPy predictor runs: its class, and a readable name for messages."""

from __future__ import annotations

import dspy

_GENERIC = "StringSignature"


def signature_origin(signature: type[dspy.Signature]) -> type[dspy.Signature]:
    """The signature class a predictor's signature was derived from, or the signature itself.

    Modules such as `dspy.ChainOfThought` rebuild a signature (adding a
    `reasoning` output) under the generic name `StringSignature`. The
    original class is found again by its instructions and fields; when none,
    or more than one, fits, the signature itself is returned.
    """
    if signature.__name__ != _GENERIC:
        return signature
    origin = _named_origin(signature)
    return origin if origin is not None else signature


def signature_label(signature: type[dspy.Signature]) -> str:
    """The name of the signature's class (see `signature_origin`), else its field list, e.g. `question -> answer`."""
    origin = signature_origin(signature)
    return origin.__name__ if origin.__name__ != _GENERIC else origin.signature


def _named_origin(signature: type[dspy.Signature]) -> type[dspy.Signature] | None:
    inputs = set(signature.input_fields)
    outputs = set(signature.output_fields)
    best: dict[type[dspy.Signature], int] = {}
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
            best[cls] = len(cls.output_fields)
    if not best:
        return None
    top = max(best.values())
    classes = [cls for cls, size in best.items() if size == top]
    return classes[0] if len(classes) == 1 else None
