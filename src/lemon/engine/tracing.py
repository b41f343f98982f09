"""OpenTelemetry spans of a run: one for the run, one per agent under it, and under each agent
one per model call (every attempt, retries included) or tool call.

Attribute names follow OpenTelemetry's GenAI semantic conventions where one fits
(``gen_ai.operation.name``, ``gen_ai.agent.name``, ``gen_ai.request.model``,
``gen_ai.usage.input_tokens``/``output_tokens``, ``gen_ai.tool.name``, ``error.type``); the rest
are ``lemon.*``. Objects of this module exist only while tracing is on (:mod:`lemon.telemetry`);
the executor holds None otherwise and skips every hook.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

from lemon import telemetry
from lemon.backends.base import BackendError, Generation, GenerationRequest
from lemon.engine.results import AgentResult, AgentStatus, RunResult, RunStatus
from lemon.spec.models import Agent

__all__ = ["RunSpans", "spec_hash"]

T = TypeVar("T")


def spec_hash(canonical: str) -> str:
    """The spec's identity in traces: the first 16 hex digits of the SHA-256 of its canonical
    YAML (what ``lemon format`` writes), so the same team hashes the same however written."""
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _failed(span: telemetry.Span, exc: BaseException) -> None:
    if isinstance(exc, asyncio.CancelledError):
        span.fail("cancelled", error_type="cancelled")
    else:
        span.fail(f"{type(exc).__name__}: {exc}", error_type=type(exc).__qualname__)


class RunSpans:
    """The spans of one run; agents' spans are children of the run's, attempts' of the agent's."""

    def __init__(self, run: telemetry.Span) -> None:
        self.run = run
        self.agents: dict[str, telemetry.Span] = {}

    @classmethod
    def start(
        cls, *, canonical: str, origin: str, output: str, profile: str, agents: int
    ) -> RunSpans | None:
        """The run's span under the current context (e.g. a gRPC call's); None when off."""
        if not telemetry.tracing():
            return None
        span = telemetry.start_span(
            "lemon.run",
            attributes={
                "gen_ai.operation.name": "invoke_workflow",
                "lemon.spec.hash": spec_hash(canonical),
                "lemon.spec.origin": origin,
                "lemon.spec.output": output,
                "lemon.spec.agents": agents,
                "lemon.profile": profile,
            },
        )
        return None if span is None else cls(span)

    def agent_started(self, agent: Agent, result: AgentResult) -> None:
        self.agents[agent.name] = self.run.child(
            f"invoke_agent {agent.name}",
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": agent.name,
                "gen_ai.request.model": result.model,
                "lemon.agent.role": agent.role,
                "lemon.agent.tier": agent.capacity.value,
                "lemon.agent.depends_on": list(agent.depends_on),
            },
        )

    def agent_finished(self, result: AgentResult) -> None:
        span = self.agents.pop(result.name, None)
        if span is None:  # never started: skipped before it ran
            span = self.run.child(
                f"invoke_agent {result.name}",
                attributes={
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": result.name,
                    "gen_ai.request.model": result.model,
                    "lemon.agent.role": result.role,
                    "lemon.agent.tier": result.capacity,
                },
            )
        span.set(
            {
                "gen_ai.usage.input_tokens": result.prompt_tokens,
                "gen_ai.usage.output_tokens": result.completion_tokens,
                "lemon.agent.attempts": result.attempts,
                "lemon.agent.reused": result.reused,
                "lemon.agent.status": result.status.value,
                "lemon.agent.latency_s": result.latency_s,
            }
        )
        if result.status != AgentStatus.SUCCEEDED:
            span.fail(result.error or result.status.value, error_type=result.status.value)
        span.end()

    async def call(
        self,
        result: AgentResult,
        request: GenerationRequest,
        generate: Callable[[GenerationRequest], Awaitable[Generation]],
    ) -> Generation:
        """One model call (one attempt) in its own client span, current while it runs so an
        HTTP backend sends it on as ``traceparent``."""
        decoding = request.decoding
        attributes: dict[str, telemetry.AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.agent.name": result.name,
            "gen_ai.request.model": result.model,
            "gen_ai.request.max_tokens": decoding.max_tokens,
            "gen_ai.request.temperature": decoding.temperature,
            "gen_ai.request.top_p": decoding.top_p,
            "lemon.attempt": result.attempts,
        }
        if decoding.seed is not None:
            attributes["gen_ai.request.seed"] = decoding.seed
        span = self._parent(result).child(
            f"chat {result.model}", attributes=attributes, kind="client"
        )
        try:
            with span.current():
                generation = await generate(request)
        except BaseException as exc:
            if isinstance(exc, BackendError):
                span.set({"lemon.error.transient": exc.transient})
                span.fail(exc.reason, error_type="transient" if exc.transient else "permanent")
            else:
                _failed(span, exc)
            span.end()
            raise
        span.set(
            {
                "gen_ai.usage.input_tokens": generation.prompt_tokens,
                "gen_ai.usage.output_tokens": generation.completion_tokens,
                "gen_ai.response.finish_reasons": [generation.finish_reason],
            }
        )
        span.end()
        return generation

    async def tool(self, result: AgentResult, tool: str, run: Callable[[], Awaitable[T]]) -> T:
        """A tool's work (no model call) in its own span."""
        span = self._parent(result).child(
            f"execute_tool {tool}",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool},
        )
        try:
            with span.current():
                return await run()
        except BaseException as exc:
            _failed(span, exc)
            raise
        finally:
            span.end()

    def _parent(self, result: AgentResult) -> telemetry.Span:
        return self.agents.get(result.name, self.run)

    def finished(self, result: RunResult) -> None:
        tokens = result.tokens()
        self.run.set(
            {
                "gen_ai.usage.input_tokens": tokens["prompt"],
                "gen_ai.usage.output_tokens": tokens["completion"],
                "lemon.run.status": result.status.value,
                "lemon.run.wall_s": result.wall_s,
                "lemon.run.calls": result.calls,
                "lemon.run.reused_calls": result.reused_calls,
                "lemon.run.critical_path": list(result.critical_path),
            }
        )
        if result.status != RunStatus.SUCCEEDED:
            self.run.fail(result.error or "run failed", error_type=result.status.value)
        self.run.end()

    def cancelled(self) -> None:
        """The run was cancelled from outside (e.g. its gRPC call): end what is still open."""
        for span in self.agents.values():
            span.fail("the run was cancelled", error_type="cancelled")
            span.end()
        self.agents.clear()
        self.run.fail("the run was cancelled", error_type="cancelled")
        self.run.end()
