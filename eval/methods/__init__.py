"""KBF-QA methods behind one interface (`eval.methods.base`).

`BASELINES` maps a method's name to its class; each class is made with a
`MethodContext`. It holds the six reference methods of the paper's boundary
experiment and the model-free evidence answerer; the runner adds ReverieMem
and its ablations (`eval.methods.reveriemem`).
"""

from __future__ import annotations

from collections.abc import Callable

from eval.methods.base import Method, MethodContext
from eval.methods.bookworld import BookWorldMethod
from eval.methods.comorag import ComoRAGMethod
from eval.methods.direct import DirectMethod
from eval.methods.evidence import EvidenceAnswerer
from eval.methods.hipporag import HippoRAGMethod
from eval.methods.naive_rag import NaiveRAGMethod
from eval.methods.raptor import RaptorMethod

BASELINES: dict[str, Callable[[MethodContext], Method]] = {
    "direct": DirectMethod,
    "naive-rag": NaiveRAGMethod,
    "raptor": RaptorMethod,
    "hipporag": HippoRAGMethod,
    "comorag": ComoRAGMethod,
    "bookworld": BookWorldMethod,
    "evidence": EvidenceAnswerer,
}

__all__ = ["BASELINES", "BookWorldMethod", "ComoRAGMethod", "DirectMethod", "EvidenceAnswerer", "HippoRAGMethod",
           "NaiveRAGMethod", "RaptorMethod"]
