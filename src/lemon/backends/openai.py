"""The ``openai`` backend: any OpenAI-compatible HTTP server (vLLM, KServe, ``lemon serve-model``).

This is the one module that talks to OpenAI-compatible endpoints. Token usage comes from the
response's ``usage``. Errors are classified for the executor's retry policy: 429, 5xx,
connection resets and timeouts are transient; other 4xx and malformed responses are not.
With tracing on, each request carries the W3C ``traceparent`` of its call's span.
"""

from __future__ import annotations

import os
from typing import Any, Literal

import httpx

from lemon.backends.base import BackendError, Generation, GenerationRequest
from lemon.telemetry import trace_headers

__all__ = ["OpenAIBackend"]

_TRANSIENT_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class OpenAIBackend:
    """Chat or text completions against ``base_url`` (e.g. ``http://host:8000/v1``).

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
    ) -> None:
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
        path, payload = self._payload(request)
        try:
            # the current span (this call's, when tracing is on) continues on the server
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

    async def aclose(self) -> None:
        await self._client.aclose()
