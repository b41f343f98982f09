"""``lemon serve-model``: an OpenAI-compatible HTTP server over an in-process model.

Built on FastAPI and uvicorn (no hand-written HTTP). The model is a GGUF on llama.cpp
(:class:`~lemon.backends.llamacpp.LlamaBackend`: the embedded tiers' models) or a transformers
model (:class:`~lemon.backends.local.LocalBackend`: the packaged SmolLM2, a directory, a policy
version). Routes: ``GET /health`` (200 once the model is loaded), ``GET /v1/models`` and
``GET /v1/models/{id}``, ``POST /v1/chat/completions`` and ``POST /v1/completions`` with
``usage`` token counts, also under ``/openai/v1/`` as KServe's huggingface runtime serves them
(so a tier URL taken from an InferenceService's status works against this server too).
Concurrent requests share forward passes through the backend's batching.

As vLLM does:

- a request naming a model this server does not serve gets a 404 in OpenAI's error shape
  (``{"error": {"message", "type", "param", "code": "model_not_found"}}``); one that names none
  is answered by the served model;
- ``stream: true`` answers with server-sent events in OpenAI's chunk format
  (``chat.completion.chunk`` / ``text_completion`` objects, then ``data: [DONE]``), and with
  ``stream_options: {"include_usage": true}`` a last chunk with no choices carries the usage.
  On llama.cpp the text streams token by token (a suffix that could begin a stop string is held
  back until it is decided); the transformers backend decodes a batch at once, so its text
  arrives in one chunk. An error before the first token gets the ordinary error response; one
  after it an ``error`` event before ``[DONE]``;
- a client that hangs up before its (non-streamed) answer is ready has its generation
  cancelled, freeing the model's slot;
- a chat request whose last message is from the assistant with
  ``continue_final_message: true`` continues that message, and the returned content excludes it.

Grammars (llguidance's Lark dialect) are accepted the ways servers take them: vLLM's
``structured_outputs: {"grammar": ...}`` and older ``guided_grammar``, and llama.cpp's
``grammar`` when it starts with ``%llguidance`` (a GBNF grammar gets a 400: not supported here).
An invalid grammar gets a 400 with llguidance's message. Both backends decode under one (the
same llguidance matcher: a logits processor on transformers, masks on llama.cpp's logits).

Errors map to status codes in one table (:data:`ERRORS`).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from lemon.backends.base import (
    BackendError,
    Decoding,
    Generation,
    GenerationRequest,
    LarkGrammar,
    Message,
)
from lemon.backends.llamacpp import LlamaBackend
from lemon.backends.local import LocalBackend

if TYPE_CHECKING:
    from starlette.requests import Request
else:  # a module-level name: FastAPI resolves the routes' annotations in this module
    try:
        from starlette.requests import Request
    except ImportError:  # the serve extra is missing: create_app fails on fastapi, saying so
        Request = object

__all__ = ["ERRORS", "ServedModel", "create_app", "releasable", "serve"]

ServedBackend = LocalBackend | LlamaBackend
ErrorKind = Literal["invalid_request", "model_not_found", "unavailable", "server_error"]

ERRORS: dict[ErrorKind, tuple[int, str]] = {
    "invalid_request": (400, "invalid_request_error"),
    "model_not_found": (404, "invalid_request_error"),
    "unavailable": (503, "server_error"),
    "server_error": (500, "server_error"),
}
"""Each failure's HTTP status and OpenAI error ``type``."""
_DISCONNECT_POLL_S = 0.5


class _ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "user", "assistant"]
    content: str


class _StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    include_usage: bool = False


class _Common(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str | None = None
    max_tokens: int = Field(default=256, ge=1, le=8192)
    temperature: float = Field(default=0.0, ge=0.0, le=5.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: _StreamOptions | None = None
    structured_outputs: dict[str, Any] | None = None
    guided_grammar: str | None = None
    grammar: str | None = None

    def constraint(self) -> LarkGrammar | None:
        """The requested grammar; ValueError for one this server cannot take."""
        text = (self.structured_outputs or {}).get("grammar") or self.guided_grammar
        if text is None and self.grammar is not None:
            if not self.grammar.lstrip().startswith("%llguidance"):
                raise ValueError("only llguidance (Lark) grammars are supported, not GBNF")
            text = self.grammar.lstrip().split("\n", 1)[1] if "\n" in self.grammar else ""
        if text is None:
            return None
        if not isinstance(text, str):
            raise ValueError("the grammar must be a string")
        from lemon.backends.guided import require_llguidance

        llguidance = require_llguidance()
        failed, messages = llguidance.LLMatcher.validate_grammar_with_warnings(
            llguidance.LLMatcher.grammar_from_lark(text)
        )
        if failed:
            raise ValueError(f"invalid grammar: {'; '.join(messages)}")
        return LarkGrammar(text)

    def decoding(self) -> Decoding:
        return Decoding(self.max_tokens, self.temperature, self.top_p, self.seed, self.stops())

    def stops(self) -> tuple[str, ...]:
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())

    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


class _ChatRequest(_Common):
    messages: list[_ChatMessage] = Field(min_length=1)
    continue_final_message: bool = False
    add_generation_prompt: bool = True


class _CompletionRequest(_Common):
    prompt: str


class _Refused(Exception):
    """A request this server answers with an error (its kind picks the status code)."""

    def __init__(self, kind: ErrorKind, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.param = param


def _error(
    kind: ErrorKind, message: str, *, param: str | None = None, code: str | None = None
) -> Any:
    from fastapi.responses import JSONResponse

    status, kind_name = ERRORS[kind]
    body = {"message": message, "type": kind_name, "param": param, "code": code}
    return JSONResponse({"error": body}, status_code=status)


def _refusal(exc: _Refused) -> Any:
    code = "model_not_found" if exc.kind == "model_not_found" else None
    return _error(exc.kind, exc.message, param=exc.param, code=code)


def _backend_error(exc: BackendError) -> _Refused:
    return _Refused(
        "unavailable" if exc.unavailable or exc.transient else "server_error", exc.reason
    )


def releasable(text: str, stops: Sequence[str]) -> int:
    """How much of ``text`` (a completion so far) may be streamed: all of it but the longest
    suffix that could still grow into one of ``stops`` (and so be cut)."""
    held = 0
    for stop in stops:
        for size in range(min(len(stop) - 1, len(text)), held, -1):
            if text.endswith(stop[:size]):
                held = size
                break
    return len(text) - held


@dataclass(frozen=True, slots=True)
class ServedModel:
    """What the server serves: one backend, under one or more names (the first is the one
    responses carry, as vLLM's ``--served-model-name``)."""

    backend: ServedBackend
    names: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.names[0]

    def check(self, requested: str | None) -> None:
        if requested is not None and requested not in self.names:
            raise _Refused(
                "model_not_found",
                f"The model `{requested}` does not exist: this server serves "
                f"{', '.join(f'`{name}`' for name in self.names)}.",
                param="model",
            )

    def card(self, name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": 0, "owned_by": "lemon"}


@dataclass(slots=True)
class _Chunks:
    """The server-sent events of one streamed answer, in OpenAI's chunk format."""

    kind: Literal["chat", "completions"]
    model: str
    include_usage: bool
    id: str = field(default_factory=lambda: f"lemon-{uuid.uuid4().hex[:16]}")
    created: int = field(default_factory=lambda: int(time.time()))

    def _event(self, choices: list[dict[str, Any]], **extra: Any) -> str:
        obj = "chat.completion.chunk" if self.kind == "chat" else "text_completion"
        body: dict[str, Any] = {
            "id": self.id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if self.include_usage:
            body["usage"] = None
        body.update(extra)
        return f"data: {json.dumps(body)}\n\n"

    def _choice(self, text: str | None, finish: str | None, *, role: bool = False) -> Any:
        if self.kind == "chat":
            delta: dict[str, Any] = {"role": "assistant"} if role else {}
            if text is not None:
                delta["content"] = text
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}

    def start(self) -> str | None:
        return self._event([self._choice("", None, role=True)]) if self.kind == "chat" else None

    def text(self, delta: str) -> str:
        return self._event([self._choice(delta, None)])

    def finish(self, reason: str) -> str:
        return self._event([self._choice(None, reason)])

    def usage(self, generation: Generation) -> str:
        return self._event([], usage=_usage(generation))

    @staticmethod
    def error(exc: _Refused) -> str:
        status, kind_name = ERRORS[exc.kind]
        body = {"message": exc.message, "type": kind_name, "param": exc.param, "code": status}
        return f"data: {json.dumps({'error': body})}\n\n"


def _usage(generation: Generation) -> dict[str, int]:
    return {
        "prompt_tokens": generation.prompt_tokens,
        "completion_tokens": generation.completion_tokens,
        "total_tokens": generation.prompt_tokens + generation.completion_tokens,
    }


class _Server:
    """The data plane behind the routes: check, convert, call the backend, convert back."""

    def __init__(self, served: ServedModel) -> None:
        self.served = served

    def chat_request(self, body: _ChatRequest) -> GenerationRequest:
        messages = list(body.messages)
        prefill = ""
        if body.continue_final_message and messages[-1].role == "assistant":
            prefill = messages.pop().content
        return GenerationRequest(
            tuple(Message(m.role, m.content) for m in messages),
            body.decoding(),
            prefill,
            constraint=self._constraint(body),
        )

    def completion_request(self, body: _CompletionRequest) -> GenerationRequest:
        return GenerationRequest(
            (), body.decoding(), raw_prompt=body.prompt, constraint=self._constraint(body)
        )

    def _constraint(self, body: _Common) -> LarkGrammar | None:
        try:
            constraint = body.constraint()
        except (ValueError, RuntimeError) as exc:
            raise _Refused("invalid_request", str(exc)) from None
        return constraint

    async def generate(self, request: GenerationRequest, queue: asyncio.Queue[str] | None) -> Any:
        backend = self.served.backend
        try:
            if queue is not None and isinstance(backend, LlamaBackend):
                return await backend.generate(request, on_text=queue.put_nowait)
            return await backend.generate(request)
        except BackendError as exc:
            raise _backend_error(exc) from None

    async def answer(
        self,
        body: _Common,
        request: GenerationRequest,
        kind: str,
        *,
        disconnected: Callable[[], Awaitable[bool]],
    ) -> Any:
        if body.stream:
            return await self.stream(body, request, kind)
        generation = await self._unless_gone(self.generate(request, None), disconnected)
        text = generation.text[len(request.prefill) :]
        choice: dict[str, Any] = {"index": 0, "finish_reason": generation.finish_reason}
        if kind == "chat":
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        return {
            "id": f"lemon-{uuid.uuid4().hex[:16]}",
            "object": "chat.completion" if kind == "chat" else "text_completion",
            "created": int(time.time()),
            "model": self.served.name,
            "choices": [choice],
            "usage": _usage(generation),
        }

    @staticmethod
    async def _unless_gone(
        call: Awaitable[Generation], disconnected: Callable[[], Awaitable[bool]]
    ) -> Generation:
        """``call``'s result; cancelled when the client hangs up first (as vLLM aborts), so
        a caller's timed-out attempt stops taking a slot beside its retry."""
        task = asyncio.ensure_future(call)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=_DISCONNECT_POLL_S)
                if done:
                    return task.result()
                if await disconnected():
                    task.cancel()
                    raise _Refused("invalid_request", "the client disconnected")
        finally:
            if not task.done():
                task.cancel()

    async def stream(self, body: _Common, request: GenerationRequest, kind: str) -> Any:
        """Start the generation; answer with an error if it fails before its first text,
        else with the event stream."""
        from fastapi.responses import StreamingResponse

        queue: asyncio.Queue[str] = asyncio.Queue()
        task = asyncio.ensure_future(self.generate(request, queue))
        waiter = asyncio.ensure_future(queue.get())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        first = waiter.result() if waiter.done() else None
        waiter.cancel()
        if first is None and task.done() and task.exception() is not None:
            task.result()  # raises the _Refused
        chunks = _Chunks(
            "chat" if kind == "chat" else "completions", self.served.name, body.include_usage()
        )
        events = self._events(chunks, task, queue, first=first, stops=body.stops(), request=request)
        return StreamingResponse(events, media_type="text/event-stream")

    async def _events(
        self,
        chunks: _Chunks,
        task: asyncio.Future[Any],
        queue: asyncio.Queue[str],
        *,
        first: str | None,
        stops: tuple[str, ...],
        request: GenerationRequest,
    ) -> AsyncIterator[str]:
        sent = ""
        held = [first] if first is not None else []
        try:
            start = chunks.start()
            if start is not None:
                yield start
            while (text := held.pop() if held else await self._next(queue, task)) is not None:
                ready = text[: releasable(text, stops)]
                if ready.startswith(sent) and len(ready) > len(sent):
                    yield chunks.text(ready[len(sent) :])
                    sent = ready
            try:
                generation: Generation = task.result()
            except _Refused as exc:
                yield chunks.error(exc)
                yield "data: [DONE]\n\n"
                return
            final = generation.text[len(request.prefill) :]
            if final.startswith(sent) and len(final) > len(sent):
                yield chunks.text(final[len(sent) :])
            yield chunks.finish(generation.finish_reason)
            if chunks.include_usage:
                yield chunks.usage(generation)
            yield "data: [DONE]\n\n"
        finally:
            if not task.done():
                task.cancel()

    @staticmethod
    async def _next(queue: asyncio.Queue[str], task: asyncio.Future[Any]) -> str | None:
        """The next text so far, or None once the generation is over and every text taken."""
        while True:
            if not queue.empty():
                return queue.get_nowait()
            if task.done():
                return None
            waiter = asyncio.ensure_future(queue.get())
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if waiter.done():
                return waiter.result()
            waiter.cancel()


def create_app(backend: ServedBackend, *, served_name: str | Sequence[str]) -> Any:
    """The FastAPI app serving ``backend`` under ``served_name`` (one name, or several: the
    first is the one responses carry)."""
    from fastapi import FastAPI
    from fastapi.exceptions import RequestValidationError

    names = (served_name,) if isinstance(served_name, str) else tuple(served_name)
    if not names:
        raise ValueError("a served model needs at least one name")
    served = ServedModel(backend, names)
    server = _Server(served)
    app = FastAPI(title="LEMON model server", version="1")

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Any, exc: RequestValidationError) -> Any:
        return _error("invalid_request", f"invalid request: {exc.errors()}")

    @app.exception_handler(_Refused)
    async def _refused(_: Any, exc: _Refused) -> Any:
        return _refusal(exc)

    @app.get("/health")
    async def health() -> dict[str, str]:
        try:
            await backend.model()
        except BackendError as exc:
            raise _backend_error(exc) from None
        return {"status": "ok", "model": served.name}

    @app.get("/v1/models")
    @app.get("/openai/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [served.card(name) for name in names]}

    @app.get("/v1/models/{model:path}")
    @app.get("/openai/v1/models/{model:path}")
    async def model(model: str) -> dict[str, Any]:
        served.check(model)
        return served.card(model)

    @app.post("/v1/chat/completions")
    @app.post("/openai/v1/chat/completions")
    async def chat(body: _ChatRequest, http: Request) -> Any:
        served.check(body.model)
        return await server.answer(
            body, server.chat_request(body), "chat", disconnected=http.is_disconnected
        )

    @app.post("/v1/completions")
    @app.post("/openai/v1/completions")
    async def completions(body: _CompletionRequest, http: Request) -> Any:
        served.check(body.model)
        return await server.answer(
            body, server.completion_request(body), "completions", disconnected=http.is_disconnected
        )

    return app


def serve(
    backend: ServedBackend, *, served_name: str | Sequence[str], host: str, port: int
) -> None:
    import uvicorn

    uvicorn.run(
        create_app(backend, served_name=served_name), host=host, port=port, log_level="warning"
    )
