"""A deterministic language model for tests, run through DSPy's engine route."""

from __future__ import annotations

import enum
import itertools
import json
import re
import threading
import types
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

import dspy
import pydantic
from dspy import lm15
from dspy.adapters.utils import parse_value
from dspy.clients.engines.base import validate_request

from reveriemem.models.handle import ModelHandle, build_lm
from reveriemem.models.llama_engine import AsyncEngine
from reveriemem.models.naming import signature_label, signature_origin
from reveriemem.models.usage import UsageRecorder

FakeAnswer = dict[str, Any] | str
# (the calling signature class, or None outside a DSPy predictor; its parsed inputs) -> the answer
FakeHandler = Callable[[type[dspy.Signature] | None, dict[str, Any]], FakeAnswer]

_MARKER = re.compile(r"\[\[ ## (\w+) ## \]\]\n?")
_CHAT_DONE = "[[ ## completed ## ]]"


@dataclass(frozen=True)
class FakeCall:
    """One call the fake answered."""

    signature: type[dspy.Signature] | None  # the signature class (None when no DSPy predictor made the call)
    inputs: dict[str, Any]  # the input field values, parsed back to their types
    messages: tuple[tuple[str, str], ...]  # (role, text), the system prompt first
    output: str  # the exact text the fake returned
    json_mode: bool  # True when answering in JSONAdapter's format

    @property
    def label(self) -> str:
        """The signature's readable name ("" when no DSPy predictor made the call)."""
        return signature_label(self.signature) if self.signature is not None else ""


class FakeModel:
    """A scripted model that answers DSPy programs with values a test chooses.

    A test writes its answers in one of two ways.

    With a handler, a function `handler(signature, inputs)` that receives the
    calling signature CLASS (`SceneRoster`; a ChainOfThought over it reports
    the same class), so a renamed signature breaks the handler loudly, and its
    input field values, parsed back to their annotated types, and returns the
    output field values as a dict:

        def handler(signature, inputs):
            if signature is JudgeVisibility:
                return {"visible": inputs["character"] in inputs["passage"]}
            return {}

        handle = FakeModel(handler).handle()
        pred = run_program(handle, dspy.Predict(JudgeVisibility), character="Watson", passage="...")

    With a queue, `FakeModel(responses=[{...}, {...}])`: each call takes the
    next answer; running out is an error.

    An answer dict may leave fields out: a missing field gets a deterministic
    placeholder of its type (`"fake <name>"` for str, False, 0, the first
    Literal option, [] for lists, a model built the same way for pydantic
    types). Naming a field the signature lacks is an error. Values may be the
    Python objects themselves (pydantic instances, lists, enums). An answer
    given as a str is returned verbatim, which is how a test simulates a model
    that writes garbage.

    The fake writes in the format of the adapter that asked (ChatAdapter's
    `[[ ## field ## ]]` sections or JSONAdapter's JSON object), keeps every
    call in `calls`, and reports whitespace-separated words as tokens, so usage
    totals are deterministic. Without a handler or queue every answer is made
    of placeholders. Calls outside a DSPy predictor reach the handler with
    signature None and inputs {"prompt": <last user message>}.
    """

    model = "fake/fake-model"
    supports_response_schema = True
    supports_function_calling = False
    supports_reasoning = False
    supported_params = frozenset({"temperature", "max_tokens", "top_p", "stop", "seed", "response_format"})

    def __init__(
        self,
        handler: FakeHandler | None = None,
        *,
        responses: Iterable[FakeAnswer] | None = None,
        name: str = "fake",
    ) -> None:
        if handler is not None and responses is not None:
            raise ValueError("Give FakeModel a handler or a queue of responses, not both.")
        self.name = name
        self._handler = handler
        self._queue: deque[FakeAnswer] | None = deque(responses) if responses is not None else None
        self._queued = len(self._queue) if self._queue is not None else 0
        self._calls: list[FakeCall] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    @property
    def serial_calls(self) -> bool:
        """A queue answers in call order, so its calls are never run concurrently (`map_calls`)."""
        return self._queue is not None

    @property
    def calls(self) -> list[FakeCall]:
        with self._lock:
            return list(self._calls)

    def handle(self, *, max_tokens: int = 1024, temperature: float = 0.0, cache: bool = False) -> ModelHandle:
        """A model handle around this fake (DSPy's response cache is off, as for every model).

        `cache=True` lets `run_program` use the persistent model cache under
        the data home, keyed by this fake's `name` (off by default, so tests
        that reuse one fake in one home see every call).
        """
        usage = UsageRecorder(self.name)
        lm = build_lm(
            self.model, usage, engine=self, async_engine=AsyncEngine(self), num_retries=0,
            max_tokens=max_tokens, temperature=temperature,
        )
        return ModelHandle(name=self.name, lm=lm, usage=usage, is_fake=True, cache=cache)

    # -- engine protocol -------------------------------------------------

    def complete(self, request: lm15.Request) -> lm15.Response:
        validate_request(request)
        messages = _messages(request)
        signature = _calling_signature()
        json_mode = request.config.response_format is not None or _CHAT_DONE not in messages[0][1]
        last_user = next((text for role, text in reversed(messages) if role == "user"), "")
        origin = signature_origin(signature) if signature is not None else None
        inputs = _parse_inputs(last_user, signature) if signature is not None else {"prompt": last_user}
        answer = self._answer(origin, inputs)
        output = _render(answer, signature, json_mode)
        with self._lock:
            self._calls.append(FakeCall(origin, inputs, tuple(messages), output, json_mode))
            response_id = f"fake-{next(self._ids)}"
        prompt_tokens = sum(len(text.split()) for _, text in messages)
        return lm15.Response(
            id=response_id,
            model=self.model,
            message=lm15.Message.assistant([lm15.TextPart(output)]),
            finish_reason="stop",
            usage=lm15.Usage(input_tokens=prompt_tokens, output_tokens=len(output.split())),
        )

    def stream(self, request: lm15.Request) -> Iterator[Any]:
        return lm15.response_to_events(self.complete(request))

    def close(self) -> None:
        pass

    def _answer(self, signature: type[dspy.Signature] | None, inputs: dict[str, Any]) -> FakeAnswer:
        if self._queue is not None:
            with self._lock:
                if not self._queue:
                    raise RuntimeError(f"FakeModel has answered all {self._queued} queued responses")
                answer = self._queue.popleft()
        elif self._handler is not None:
            answer = self._handler(signature, inputs)
        else:
            answer = {}
        if not isinstance(answer, (dict, str)):
            raise TypeError(f"A FakeModel answer must be a dict or a str, not {type(answer).__name__}")
        return answer


def _messages(request: lm15.Request) -> list[tuple[str, str]]:
    def text(parts: Any) -> str:
        if parts is None:
            return ""
        if isinstance(parts, str):
            return parts
        return "".join(getattr(part, "text", "") or "" for part in parts)

    messages = [("system", text(request.system))]
    messages.extend((m.role, text(m.parts)) for m in request.messages)
    return messages


def _calling_signature() -> type[dspy.Signature] | None:
    """The signature of the innermost DSPy module that is calling the LM."""
    for module in reversed(dspy.settings.caller_modules or []):
        signature = getattr(module, "signature", None)
        if isinstance(signature, type) and issubclass(signature, dspy.Signature):
            return signature
    return None


def _parse_inputs(text: str, signature: type[dspy.Signature]) -> dict[str, Any]:
    fields = signature.input_fields
    marks = [m for m in _MARKER.finditer(text) if m.group(1) in fields]
    values: dict[str, Any] = {}
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        raw = text[mark.end():end]
        if i + 1 == len(marks):
            raw = raw.split("\n\nRespond with", 1)[0]
        raw = raw.strip()
        annotation = fields[mark.group(1)].annotation
        try:
            values[mark.group(1)] = raw if annotation is str else parse_value(raw, annotation)
        except (ValueError, TypeError, pydantic.ValidationError):
            values[mark.group(1)] = raw
    return values


def _render(answer: FakeAnswer, signature: type[dspy.Signature] | None, json_mode: bool) -> str:
    if isinstance(answer, str):
        return answer
    if signature is None:
        return json.dumps(answer, default=str)
    fields = signature.output_fields
    unknown = sorted(set(answer) - set(fields))
    if unknown:
        raise ValueError(
            f"The fake answer names {unknown}, which {signature_label(signature)} does not output "
            f"(it outputs {sorted(fields)})"
        )
    values = {
        name: answer[name] if name in answer else placeholder(name, field.annotation)
        for name, field in fields.items()
    }
    adapter = dspy.JSONAdapter() if json_mode else dspy.ChatAdapter()
    return adapter.format_assistant_message_content(signature, values)


def placeholder(name: str, annotation: Any) -> Any:
    """A deterministic value of the annotated type, for fields a test leaves out."""
    origin = get_origin(annotation)
    args = get_args(annotation)
    if annotation is str:
        return f"fake {name}"
    if annotation is bool:
        return False
    if annotation is int:
        return 0
    if annotation is float:
        return 0.0
    if origin is Literal:
        return args[0]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return next(iter(annotation))
    if origin in (Union, types.UnionType):
        if type(None) in args:
            return None
        return placeholder(name, args[0])
    if origin in (list, tuple, set, frozenset) or annotation in (list, tuple, set, frozenset):
        return []
    if origin is dict or annotation is dict:
        return {}
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        values = {
            field_name: placeholder(field_name, info.annotation)
            for field_name, info in annotation.model_fields.items()
            if info.is_required()
        }
        return annotation.model_validate(values)
    return None
