"""The ``openai`` backend: any OpenAI-compatible HTTP server (vLLM, KServe, ``lemon serve-model``).

This is the one module that talks to OpenAI-compatible endpoints. Token usage comes from the
response's ``usage``. Errors are classified for the executor's retry policy: 429, 5xx,
connection resets and timeouts are transient; other 4xx and malformed responses are not.

With tracing on, each request carries the W3C ``traceparent`` of its call's span.

Grammars: a request with a fixed :class:`~lemon.backends.base.LarkGrammar` sends it in the
server's dialect (``grammar_dialect``): ``vllm`` as ``structured_outputs.grammar`` (vLLM
0.10 and later, guidance backend), ``guided`` as ``guided_grammar`` (older vLLM), ``llamacpp``
as ``grammar`` headed ``%llguidance {}`` (a llama.cpp server built with LLGUIDANCE). A request
constrained to the spec grammar is decoded one line per call: each call carries the grammar of
the current line (:meth:`lemon.spec.grammar.LineState.lark` without lookahead) and continues the
text so far as an assistant prefill; the next line's grammar is built from the answer. A server
that returns a line outside its grammar (it ignored the field) fails the call, never silently.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace
from typing import Any, Literal

import httpx

from lemon.backends.base import BackendError, Generation, GenerationRequest, LarkGrammar
from lemon.spec.grammar import SpecGrammar, SpecGrammarError
from lemon.telemetry import trace_headers

GrammarDialect = Literal["vllm", "guided", "llamacpp"]

__all__ = ["GrammarDialect", "OpenAIBackend"]

_TRANSIENT_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class OpenAIBackend:
    """Chat or text completions against ``base_url`` (e.g. ``http://host:8000/v1``).

    At most ``max_concurrency`` requests are in flight at once (the connection pool holds as many
    connections); the others wait their turn, and the wait does not count toward ``timeout_s``.

    With a prefill, chat requests ask the server to continue the final assistant message
    (``continue_final_message``, a vLLM extension that ``lemon serve-model`` also honours).
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        mode: Literal["chat", "completions"] = "chat",
        api_key: str | None = None,
        timeout_s: float = 120.0,
        tier: str = "any",
        transport: httpx.AsyncBaseTransport | None = None,
        grammar_dialect: GrammarDialect = "vllm",
        max_concurrency: int = 32,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, not {max_concurrency}")
        self.max_concurrency = max_concurrency
        self._slots = asyncio.Semaphore(max_concurrency)
        self.grammar_dialect = grammar_dialect
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.mode = mode
        self.tier = tier
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s)),
            limits=httpx.Limits(
                max_connections=max_concurrency, max_keepalive_connections=max_concurrency
            ),
            transport=transport,
        )

    @property
    def model_id(self) -> str:
        return f"openai:{self.base_url}#{self.model}"

    @property
    def label(self) -> str:
        return f"{self.model} at {self.base_url} ({self.mode})"

    def _payload(self, request: GenerationRequest) -> tuple[str, dict[str, Any]]:
        decoding = request.decoding
        payload: dict[str, Any] = {
            "model": self.model,
            "max_tokens": decoding.max_tokens,
            "temperature": decoding.temperature,
            "top_p": decoding.top_p,
        }
        if decoding.seed is not None:
            payload["seed"] = decoding.seed
        if decoding.stop:
            payload["stop"] = list(decoding.stop)
        if isinstance(request.constraint, LarkGrammar):
            payload.update(_grammar_fields(request.constraint.text, self.grammar_dialect))
        if self.mode == "completions":
            prompt = "\n\n".join(message.content for message in request.messages)
            payload["prompt"] = prompt + request.prefill
            return "/completions", payload
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        if request.prefill:
            messages.append({"role": "assistant", "content": request.prefill})
            payload["continue_final_message"] = True
            payload["add_generation_prompt"] = False
        payload["messages"] = messages
        return "/chat/completions", payload

    async def generate(self, request: GenerationRequest) -> Generation:
        if isinstance(request.constraint, SpecGrammar):
            return await self._generate_spec(request, request.constraint)
        return await self._post(request)

    async def _post(self, request: GenerationRequest) -> Generation:
        path, payload = self._payload(request)
        try:
            # the current span (this call's, when tracing is on) continues on the server
            async with self._slots:
                response = await self._client.post(path, json=payload, headers=trace_headers())
        except httpx.TimeoutException as exc:
            raise BackendError(
                f"timeout calling {self.base_url}{path}: {exc!r}", transient=True
            ) from exc
        except httpx.TransportError as exc:
            raise BackendError(
                f"cannot reach {self.base_url}{path}: {exc!r}", transient=True
            ) from exc
        if response.status_code != 200:
            body = response.text[:300].replace("\n", " ")
            raise BackendError(
                f"HTTP {response.status_code} from {self.base_url}{path}: {body}",
                transient=response.status_code in _TRANSIENT_STATUS,
            )
        return self._parse(response, path=path, prefill=request.prefill)

    def _parse(self, response: httpx.Response, *, path: str, prefill: str) -> Generation:
        where = f"{self.base_url}{path}"
        try:
            data = response.json()
            choice = data["choices"][0]
            text = choice["message"]["content"] if self.mode == "chat" else choice["text"]
            usage = data["usage"]
            prompt_tokens = int(usage["prompt_tokens"])
            completion_tokens = int(usage["completion_tokens"])
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            excerpt = response.text[:200].replace("\n", " ")
            raise BackendError(
                f"malformed response from {where} ({type(exc).__name__}: {exc}): {excerpt!r}",
                transient=False,
            ) from None
        if not isinstance(text, str):
            raise BackendError(f"malformed response from {where}: no text", transient=False)
        finish = str(choice.get("finish_reason") or "stop")
        return Generation(prefill + text, prompt_tokens, completion_tokens, finish)

    async def _generate_spec(self, request: GenerationRequest, grammar: SpecGrammar) -> Generation:
        """One call per line, each under that line's grammar (see the module docstring)."""
        state = grammar.start()
        text = ""
        prompt_tokens = completion_tokens = 0
        while not state.done:
            left = grammar.budget - completion_tokens
            line_request = replace(
                request,
                decoding=replace(request.decoding, max_tokens=max(left, 1), stop=()),
                prefill=request.prefill + text,
                constraint=LarkGrammar(state.lark(lookahead=False)),
            )
            generation = await self._post(line_request)
            prompt_tokens = max(prompt_tokens, generation.prompt_tokens)
            completion_tokens += generation.completion_tokens
            line = generation.text[len(line_request.prefill) :]
            try:
                if not line.endswith("\n"):
                    raise SpecGrammarError(f"line {line!r} does not end the line")
                state = state.advance(line[:-1], used=completion_tokens)
            except SpecGrammarError as exc:
                raise BackendError(
                    f"{self.base_url} did not follow the grammar ({self.grammar_dialect} "
                    f"dialect; does the server support grammars?): {exc}",
                    transient=False,
                ) from None
            text += line
        return Generation(request.prefill + text, prompt_tokens, completion_tokens, "stop")

    async def aclose(self) -> None:
        await self._client.aclose()


def _grammar_fields(text: str, dialect: GrammarDialect) -> dict[str, Any]:
    if dialect == "vllm":
        return {"structured_outputs": {"grammar": text}}
    if dialect == "guided":
        return {"guided_grammar": text, "guided_decoding_backend": "guidance"}
    return {"grammar": "%llguidance {}\n" + text}
