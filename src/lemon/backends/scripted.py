"""The ``scripted`` backend: a deterministic TEST DOUBLE of a model, never presented as one.

It answers from a small config of rules (first regex match on the prompt wins), with fixed
latency and token counts, and can inject failures. Like a model, it stops at the request's
``max_tokens``: a longer answer is cut to that many words, ``finish_reason`` ``length``. It
exists for engine tests and engine benchmarks; every result it produces is labelled "scripted
test double".
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import Counter, deque
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from lemon.backends.base import BackendError, Generation, GenerationRequest

__all__ = ["REQUEST_LOG", "ScriptedBackend", "ScriptedConfig", "ScriptedRule"]

REQUEST_LOG = 1024
"""How many of its latest requests a scripted backend keeps (:attr:`ScriptedBackend.requests`)."""


class ScriptedRule(BaseModel):
    """What to answer when ``match`` (a regex) is found in the prompt."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    match: str = Field(default="", description="Regex searched in the prompt; '' matches all.")
    output: str = Field(
        default="The answer is 42.",
        description="Answer text; '{digest}' becomes a short hash of the prompt and '{model}' "
        "the backend's model id, so answers can depend on exactly what was asked.",
    )
    latency_s: float | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)
    fail: Literal["transient", "permanent", "hang"] | None = Field(
        default=None, description="Fail instead of answering (a 503, a 400, or never answer)."
    )
    fail_times: int = Field(
        default=-1, description="How many matching calls fail (-1: every call, then answer)."
    )


class ScriptedConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "scripted"
    latency_s: float = Field(default=0.0, ge=0)
    rules: tuple[ScriptedRule, ...] = (ScriptedRule(),)


def _count_tokens(text: str) -> int:
    """Whitespace-separated words: a fixed, documented stand-in for a tokenizer."""
    return len(text.split())


class ScriptedBackend:
    """Deterministic answers from :class:`ScriptedConfig` (a test double of a model)."""

    def __init__(self, config: ScriptedConfig | None = None, *, tier: str = "any") -> None:
        self.config = config or ScriptedConfig()
        self.tier = tier
        self.calls = 0
        self.requests: deque[GenerationRequest] = deque(maxlen=REQUEST_LOG)
        """The last :data:`REQUEST_LOG` requests received, in order (tests read what the engine
        asked for); bounded, so a long-lived server on the double does not grow without end."""
        self._failures: Counter[int] = Counter()
        self._patterns = [re.compile(rule.match) for rule in self.config.rules]

    @property
    def model_id(self) -> str:
        return f"scripted:{self.config.name}:{self.tier}"

    @property
    def label(self) -> str:
        return f"scripted test double ({self.config.name}, tier {self.tier}) - not a model"

    def content_id(self, cache: object) -> str:
        """Its identity for the persistent call cache: the name, the tier and a hash of the
        rules (two configs that answer differently never share a cached answer)."""
        rules = hashlib.sha256(self.config.model_dump_json().encode()).hexdigest()[:16]
        return f"{self.model_id}:{rules}"

    async def generate(self, request: GenerationRequest) -> Generation:
        self.calls += 1
        self.requests.append(request)
        prompt = "\n".join(message.content for message in request.messages)
        index = next(
            (i for i, pattern in enumerate(self._patterns) if pattern.search(prompt)), None
        )
        if index is None:
            raise BackendError("scripted backend: no rule matches the prompt", transient=False)
        rule = self.config.rules[index]
        latency = rule.latency_s if rule.latency_s is not None else self.config.latency_s
        if rule.fail is not None and (
            rule.fail_times < 0 or self._failures[index] < rule.fail_times
        ):
            self._failures[index] += 1
            if rule.fail == "hang":
                await asyncio.Event().wait()
            await asyncio.sleep(latency)
            transient = rule.fail == "transient"
            code = "503 Service Unavailable" if transient else "400 Bad Request"
            raise BackendError(f"scripted failure: {code}", transient=transient)
        await asyncio.sleep(latency)
        digest = hashlib.sha256(prompt.encode()).hexdigest()[:8]
        answer = rule.output.replace("{digest}", digest).replace("{model}", self.model_id)
        for stop in request.decoding.stop:  # like a server: the stop string is not returned
            answer = answer.split(stop, 1)[0]
        text = request.prefill + answer
        completion = (
            rule.completion_tokens if rule.completion_tokens is not None else _count_tokens(text)
        )
        finish = "stop"
        limit = request.decoding.max_tokens
        if completion > limit:  # like a model: it stops at max_tokens, the answer cut there
            text = " ".join(text.split()[:limit])
            completion, finish = limit, "length"
        return Generation(text, _count_tokens(prompt), completion, finish)

    async def count_prompt_tokens(self, request: GenerationRequest) -> int:
        """The prompt tokens :meth:`generate` will report for ``request`` (exact)."""
        return _count_tokens("\n".join(message.content for message in request.messages))

    async def aclose(self) -> None:
        return None
