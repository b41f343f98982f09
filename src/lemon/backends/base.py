"""The one protocol every model backend speaks; the executor never knows which it talks to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from lemon.spec.grammar import SpecGrammar

__all__ = [
    "Backend",
    "BackendError",
    "Decoding",
    "Generation",
    "GenerationRequest",
    "LarkGrammar",
    "Message",
]


@dataclass(frozen=True, slots=True)
class Message:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True, slots=True)
class Decoding:
    """Decoding settings; greedy (temperature 0) by default, so runs are deterministic."""

    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()

    def key(self) -> tuple[object, ...]:
        return (self.max_tokens, self.temperature, self.top_p, self.seed, self.stop)


@dataclass(frozen=True, slots=True)
class LarkGrammar:
    """A fixed grammar for one completion, in llguidance's Lark dialect (what a server is sent
    as ``structured_outputs.grammar``, ``guided_grammar`` or ``grammar``)."""

    text: str

    def key(self) -> str:
        import hashlib

        return "lark:" + hashlib.sha256(self.text.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """One model call: a chat (system + user messages), with an optional assistant prefill."""

    messages: tuple[Message, ...]
    decoding: Decoding = field(default_factory=Decoding)
    prefill: str = ""
    """Text the assistant's answer is forced to start with (part of the completion)."""
    raw_prompt: str | None = None
    """A plain-text prompt used verbatim instead of the chat template (text completions)."""
    constraint: SpecGrammar | LarkGrammar | None = None
    """Constrain the answer: to the spec grammar (:mod:`lemon.spec.grammar`), so that every
    completion is a valid, acyclic spec that closes within ``decoding.max_tokens``, or to a
    fixed Lark grammar (a server's grammar request)."""


@dataclass(frozen=True, slots=True)
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str = "stop"
    cached: bool = False
    """Answered from the persistent call cache (:mod:`lemon.backends.callcache`)."""
    key: str | None = None
    """The call's content key (:func:`lemon.backends.callcache.request_key`), where a call cache
    or an outcome table answered or recorded it; None for a call no cache keyed (an unseeded
    sample, a bare backend)."""


class BackendError(Exception):
    """A failed model call. ``transient`` errors (429, 5xx, resets, timeouts) may be retried.

    ``unavailable`` says the tier itself could not serve (a model that cannot load or was
    closed, an endpoint still failing after the retries), as opposed to a request it refused
    (a prompt over the context); it defaults to ``transient``."""

    def __init__(
        self,
        reason: str,
        *,
        transient: bool,
        unavailable: bool | None = None,
        kind: str | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.transient = transient
        self.unavailable = transient if unavailable is None else unavailable
        self.kind = kind
        """A :class:`lemon.engine.results.FailureKind` value the failed agent takes instead of
        the one ``unavailable`` implies (``not_in_table``: an outcome table lacks the call)."""


@runtime_checkable
class Backend(Protocol):
    """A model that answers chat requests.

    ``model_id`` names what answers (it keys the reuse cache and labels results); ``label`` says
    in words what it is, e.g. "scripted test double" or "in-process SmolLM2-135M-Instruct".
    """

    @property
    def model_id(self) -> str: ...

    @property
    def label(self) -> str: ...

    async def generate(self, request: GenerationRequest) -> Generation: ...

    async def aclose(self) -> None: ...
