"""``lemon serve-model``: an OpenAI-compatible HTTP server over the in-process backend.

Built on FastAPI and uvicorn (no hand-written HTTP). Routes: ``GET /health``,
``GET /v1/models``, ``POST /v1/chat/completions`` and ``POST /v1/completions`` with ``usage``
token counts, also under ``/openai/v1/`` as KServe's huggingface runtime serves them (so a
tier URL taken from an InferenceService's status works against this server too). Concurrent
requests share forward passes through the backend's batching. Like vLLM, a chat request whose
last message is from the assistant with ``continue_final_message: true`` continues that
message, and the returned content excludes it.
Streaming is not supported (``stream: true`` gets a 400).

Grammars (llguidance's Lark dialect) are accepted the ways servers take them: vLLM's
``structured_outputs: {"grammar": ...}`` and older ``guided_grammar``, and llama.cpp's
``grammar`` when it starts with ``%llguidance`` (a GBNF grammar gets a 400: not supported here).
An invalid grammar gets a 400 with llguidance's message.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from lemon.backends.base import BackendError, Decoding, GenerationRequest, LarkGrammar, Message
from lemon.backends.local import LocalBackend

__all__ = ["create_app", "serve"]


class _ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "user", "assistant"]
    content: str


class _Common(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str | None = None
    max_tokens: int = Field(default=256, ge=1, le=8192)
    temperature: float = Field(default=0.0, ge=0.0, le=5.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
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
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())
        return Decoding(self.max_tokens, self.temperature, self.top_p, self.seed, stop)


class _ChatRequest(_Common):
    messages: list[_ChatMessage] = Field(min_length=1)
    continue_final_message: bool = False
    add_generation_prompt: bool = True


class _CompletionRequest(_Common):
    prompt: str


def _error(status: int, message: str, kind: str) -> Any:
    from fastapi.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status)


def create_app(backend: LocalBackend, *, served_name: str) -> Any:
    from fastapi import FastAPI
    from fastapi.exceptions import RequestValidationError

    app = FastAPI(title="LEMON model server", version="1")

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Any, exc: RequestValidationError) -> Any:
        return _error(400, f"invalid request: {exc.errors()}", "invalid_request_error")

    @app.get("/health")
    async def health() -> dict[str, str]:
        await backend.model()
        return {"status": "ok", "model": served_name}

    @app.get("/v1/models")
    @app.get("/openai/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": served_name, "object": "model"}]}

    async def _run(request: GenerationRequest, kind: str) -> Any:
        try:
            generation = await backend.generate(request)
        except BackendError as exc:
            return _error(503 if exc.transient else 500, exc.reason, "server_error")
        text = generation.text[len(request.prefill) :]
        usage = {
            "prompt_tokens": generation.prompt_tokens,
            "completion_tokens": generation.completion_tokens,
            "total_tokens": generation.prompt_tokens + generation.completion_tokens,
        }
        choice: dict[str, Any] = {"index": 0, "finish_reason": generation.finish_reason}
        if kind == "chat":
            choice["message"] = {"role": "assistant", "content": text}
            obj = "chat.completion"
        else:
            choice["text"] = text
            obj = "text_completion"
        return {
            "id": f"lemon-{uuid.uuid4().hex[:16]}",
            "object": obj,
            "created": int(time.time()),
            "model": served_name,
            "choices": [choice],
            "usage": usage,
        }

    @app.post("/v1/chat/completions")
    @app.post("/openai/v1/chat/completions")
    async def chat(body: _ChatRequest) -> Any:
        if body.stream:
            return _error(400, "streaming is not supported", "invalid_request_error")
        messages = list(body.messages)
        prefill = ""
        if body.continue_final_message and messages[-1].role == "assistant":
            prefill = messages.pop().content
        try:
            constraint = body.constraint()
        except (ValueError, RuntimeError) as exc:
            return _error(400, str(exc), "invalid_request_error")
        request = GenerationRequest(
            tuple(Message(m.role, m.content) for m in messages),
            body.decoding(),
            prefill,
            constraint=constraint,
        )
        return await _run(request, "chat")

    @app.post("/v1/completions")
    @app.post("/openai/v1/completions")
    async def completions(body: _CompletionRequest) -> Any:
        if body.stream:
            return _error(400, "streaming is not supported", "invalid_request_error")
        try:
            constraint = body.constraint()
        except (ValueError, RuntimeError) as exc:
            return _error(400, str(exc), "invalid_request_error")
        request = GenerationRequest(
            (), body.decoding(), raw_prompt=body.prompt, constraint=constraint
        )
        return await _run(request, "completions")

    return app


def serve(backend: LocalBackend, *, served_name: str, host: str, port: int) -> None:
    import uvicorn

    uvicorn.run(
        create_app(backend, served_name=served_name), host=host, port=port, log_level="warning"
    )
