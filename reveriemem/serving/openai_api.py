"""An OpenAI-compatible HTTP API over the characters of the built books (Starlette, served by uvicorn).

- `GET /v1/models`: every `book/character` pair of a built book.
- `POST /v1/chat/completions`: `model` is `book/character`; `messages` is the conversation (system
  messages are ignored: the character speaks from its own memory and manner); `stream` answers with
  server-sent events in OpenAI's chunk format; the extension `as_of` (`{"scene": N}`,
  `{"chapter": N}`, or a bare scene number) bounds the character to that point of the story. The
  response (and a stream's last chunk) carries the turn's trace in the extension field `reveriemem`:
  the anchored scenes, the facts with their visibility, routes and source offsets, and the state.
- Errors use OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`.
- With an API key, every request must send `Authorization: Bearer <key>`.

The agent's turn is blocking work: it runs in a worker thread, so the event loop keeps serving
other conversations (and notices clients that leave) meanwhile.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from reveriemem.core.errors import ModelOutputError, ModelUnavailableError, RegistryError, ReverieMemError
from reveriemem.core.user_text import well_formed
from reveriemem.inference.memory_reader import CutPointError
from reveriemem.inference.trace import Turn
from reveriemem.serving.sessions import CutPoint, ServedModel, SessionPool, resolve_model, served_models

logger = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 4_000  # the latest user message
MAX_CONVERSATION_CHARS = 100_000  # every message of a request together
MAX_MESSAGES = 400
STREAM_WORDS = 4  # words per streamed chunk


@dataclass(frozen=True)
class ServeConfig:
    lm: str = "none"
    embedder: str = ""
    rounds: int = 3
    api_key: str | None = None  # None: no key asked (loopback only; the CLI enforces that)


class TraceJSON(JSONResponse):
    """JSON whose odd values (numpy numbers, paths) are written as text rather than refused."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=False, default=str, separators=(",", ":")).encode("utf-8")


class ApiError(Exception):
    """A request the API refuses, in OpenAI's error shape."""

    def __init__(self, status: int, message: str, *, code: str, param: str | None = None,
                 kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.param, self.kind = status, message, code, param, kind

    def response(self) -> JSONResponse:
        body = {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}
        return JSONResponse(body, status_code=self.status)


@dataclass(frozen=True)
class ChatRequest:
    model: ServedModel
    cut: CutPoint
    history: list[tuple[str, str]]  # (user | assistant, text), before the question
    question: str
    stream: bool


def _text(content: Any, index: int) -> str:
    """A message's text: a string, or OpenAI's list of parts (text parts only); lone surrogates as U+FFFD."""
    if isinstance(content, str):
        return well_formed(content)
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ApiError(400, f"Message {index} holds a part that is not text; only text is understood.",
                               code="unsupported_content", param=f"messages.{index}.content")
            parts.append(part["text"])
        return well_formed("".join(parts))
    if content is None:
        return ""
    raise ApiError(400, f"Message {index} has content that is neither text nor a list of text parts.",
                   code="invalid_content", param=f"messages.{index}.content")


def _cut_point(value: Any) -> CutPoint:
    if value is None:
        return CutPoint()
    if isinstance(value, int) and not isinstance(value, bool):
        return CutPoint(scene=value)
    if isinstance(value, dict) and len(value) == 1:
        (unit, number), = value.items()
        if unit in ("scene", "chapter") and isinstance(number, int) and not isinstance(number, bool):
            return CutPoint(**{unit: number})
    raise ApiError(400, 'as_of must be a scene number, {"scene": N} or {"chapter": N}.', code="invalid_as_of",
                   param="as_of")


def parse_chat_request(body: Any) -> ChatRequest:
    """Check a chat completion request and read it (raises `ApiError` with a one-sentence message)."""
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.", code="invalid_json")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise ApiError(400, "Name the character as model: 'book/character' (see GET /v1/models).",
                       code="missing_model", param="model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list of chat messages.", code="empty_messages",
                       param="messages")
    if len(messages) > MAX_MESSAGES:
        raise ApiError(400, f"The conversation has {len(messages)} messages; at most {MAX_MESSAGES} are taken.",
                       code="too_many_messages", param="messages")
    turns: list[tuple[str, str]] = []
    total = 0
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("system", "developer", "user", "assistant"):
            raise ApiError(400, f"Message {index} needs a role of system, user or assistant.",
                           code="invalid_role", param=f"messages.{index}.role")
        text = _text(message.get("content"), index)
        total += len(text)
        if message["role"] in ("user", "assistant"):
            turns.append((message["role"], text))
    if total > MAX_CONVERSATION_CHARS:
        raise ApiError(400, f"The conversation holds {total} characters; at most {MAX_CONVERSATION_CHARS} are taken.",
                       code="context_length_exceeded", param="messages")
    if not turns or turns[-1][0] != "user" or not turns[-1][1].strip():
        raise ApiError(400, "The last message must be a user message with something to say.",
                       code="empty_messages", param="messages")
    question = turns[-1][1]
    if len(question) > MAX_MESSAGE_CHARS:
        raise ApiError(400, f"The last message holds {len(question)} characters; at most {MAX_MESSAGE_CHARS} "
                       "are taken.", code="message_too_long", param="messages")
    cut = _cut_point(body.get("as_of"))
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError(400, "stream must be true or false.", code="invalid_stream", param="stream")
    try:
        served = resolve_model(well_formed(model))
    except RegistryError as exc:
        raise ApiError(404, str(exc), code="model_not_found", param="model") from exc
    return ChatRequest(served, cut, turns[:-1], question, stream)


def turn_extension(turn: Turn, continued: bool) -> dict[str, Any]:
    """The `reveriemem` field of a reply: the whole trace, the state reached, and whether the state carried over."""
    return {"trace": turn.trace.to_dict(), "state": asdict(turn.state), "continued": continued}


def _completion(request: ChatRequest, turn: Turn, continued: bool, ident: str, created: int) -> dict[str, Any]:
    return {
        "id": ident, "object": "chat.completion", "created": created, "model": request.model.id,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": turn.reply},
                     "finish_reason": "stop", "logprobs": None}],
        "usage": {"prompt_tokens": sum(s.prompt_tokens for s in turn.trace.steps),
                  "completion_tokens": sum(s.completion_tokens for s in turn.trace.steps),
                  "total_tokens": turn.trace.tokens},
        "reveriemem": turn_extension(turn, continued),
    }


def _chunk(request: ChatRequest, ident: str, created: int, delta: dict[str, Any], finish: str | None = None,
           **extra: Any) -> str:
    body = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": request.model.id,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **extra}
    return f"data: {json.dumps(body, ensure_ascii=False, default=str)}\n\n"


async def _events(request: ChatRequest, turn: Turn, continued: bool, ident: str, created: int) -> AsyncIterator[str]:
    yield _chunk(request, ident, created, {"role": "assistant", "content": ""})
    words = turn.reply.split(" ")
    for start in range(0, len(words), STREAM_WORDS):
        piece = " ".join(words[start:start + STREAM_WORDS])
        yield _chunk(request, ident, created, {"content": piece if start == 0 else " " + piece})
    yield _chunk(request, ident, created, {}, "stop", reveriemem=turn_extension(turn, continued))
    yield "data: [DONE]\n\n"


def create_app(config: ServeConfig | None = None, pool: SessionPool | None = None) -> Starlette:
    """The ASGI app; one `SessionPool` per app keeps sessions (and the embedder) warm across requests."""
    config = config or ServeConfig()
    pool = pool or SessionPool(lm=config.lm, embedder=config.embedder, rounds=config.rounds)

    def authorised(request: Request) -> None:
        if config.api_key is None:
            return
        sent = request.headers.get("authorization", "")
        scheme, _, token = sent.partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(token.strip(), config.api_key):
            raise ApiError(401, "A valid API key is needed: send 'Authorization: Bearer <key>'.",
                           code="invalid_api_key", kind="authentication_error")

    def model_card(model: ServedModel) -> dict[str, Any]:
        return {"id": model.id, "object": "model", "created": 0, "owned_by": "reveriemem",
                "reveriemem": {"book": model.book, "character": model.name, "aliases": list(model.aliases)}}

    async def list_models(request: Request) -> Response:
        try:
            authorised(request)
            models = await run_in_threadpool(served_models)
        except ApiError as exc:
            return exc.response()
        return JSONResponse({"object": "list", "data": [model_card(m) for m in models]})

    async def get_model(request: Request) -> Response:
        try:
            authorised(request)
            model = await run_in_threadpool(resolve_model, request.path_params["model"])
        except ApiError as exc:
            return exc.response()
        except RegistryError as exc:
            return ApiError(404, str(exc), code="model_not_found", param="model").response()
        return JSONResponse(model_card(model))

    async def chat_completions(request: Request) -> Response:
        try:
            authorised(request)
            try:
                body = await request.json()
            except ValueError:
                raise ApiError(400, "The request body is not valid JSON.", code="invalid_json") from None
            chat = await run_in_threadpool(parse_chat_request, body)
            continued = pool.continued(chat.model, chat.cut, chat.history)
            turn = await run_in_threadpool(pool.reply, chat.model, chat.cut, chat.history, chat.question)
        except ApiError as exc:
            return exc.response()
        except CutPointError as exc:
            return ApiError(400, str(exc), code="invalid_as_of", param="as_of").response()
        except (ModelUnavailableError, ModelOutputError) as exc:
            return ApiError(502, str(exc), code="model_error", kind="server_error").response()
        except ReverieMemError as exc:
            return ApiError(400, str(exc), code="invalid_request").response()
        except ValueError as exc:  # the agent's own checks of the question
            return ApiError(400, str(exc), code="invalid_request", param="messages").response()
        ident, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        if chat.stream:
            return StreamingResponse(_events(chat, turn, continued, ident, created), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        return TraceJSON(_completion(chat, turn, continued, ident, created))

    routes = [
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/models/{model:path}", get_model, methods=["GET"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    ]
    app = Starlette(routes=routes)
    app.state.pool = pool
    app.state.config = config
    return app
