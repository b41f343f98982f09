"""What a run returns: per-agent accounting and the run's totals.

:meth:`RunResult.to_json` is the one JSON form of a run (``lemon run --json``, the service's run
journal) and :meth:`RunResult.from_json` reads it back: ``RunResult.from_json(r.to_json()) ==
r``, times unrounded (a renderer rounds what it shows). The derived totals the JSON also carries
(``tokens``, ``tokens_by_tier``, ``calls``, ``cache_hits``) are recomputed from the agents when
read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from lemon.budget import BudgetUse

__all__ = ["AgentResult", "AgentStatus", "FailureKind", "RunResult", "RunStatus"]


class AgentStatus(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    """Not run because a dependency failed or the run ended first."""


class RunStatus(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class FailureKind(StrEnum):
    """Why an agent or a run failed, set where it happens (never read back from a message)."""

    DEADLINE = "deadline"
    """The run's deadline passed; unfinished agents were cancelled."""
    TIER_UNAVAILABLE = "tier_unavailable"
    """A tier could not serve: its model cannot load, or its endpoint kept failing after the
    retries (:attr:`lemon.backends.base.BackendError.unavailable`); for a tool agent, the tool
    could not run (no sandbox)."""
    AGENT_FAILED = "agent_failed"
    """An agent's own work failed: a refused request, an empty answer, a tool error."""
    DEPENDENCY = "dependency"
    """An agent was skipped because a dependency did not succeed (agents only)."""
    CANCELLED = "cancelled"
    """The caller cancelled the run."""
    INVALID_SPEC = "invalid_spec"
    """The spec did not validate, so nothing ran (set by callers that validate first)."""
    NOT_IN_TABLE = "not_in_table"
    """A worker call an outcome table was asked for and does not hold, with no model behind it
    (:mod:`lemon.tables.replay`)."""
    BUDGET_EXCEEDED = "budget_exceeded"
    """The run's budget (:mod:`lemon.budget`) stopped it: an agent was not started because the
    budget was spent, or its answer was cut where the budget ran out, or the wall budget
    passed, or a tier spent past it; the partial trace and what was spent are in the result.
    A run refused before it started (its estimate over the budget) reports it too."""
    INTERRUPTED = "interrupted"
    """The server running it stopped while it ran (killed, or restarted): its agents' calls may
    have reached the tiers, so it is not run again (runs only; see
    :mod:`lemon_service.run_journal`)."""


@dataclass(slots=True)
class AgentResult:
    name: str
    role: str
    capacity: str
    model: str = ""
    """What answered: a backend's model id, or ``tool:NAME`` for a tool role."""
    tool: bool = False
    """A tool role's agent: no model call, zero tokens (see :mod:`lemon.engine.tools`)."""
    status: AgentStatus = AgentStatus.SKIPPED
    output: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    attempts: int = 0
    reused: bool = False
    cached: bool = False
    """Answered from the persistent call cache (no model call)."""
    error: str | None = None
    started_s: float | None = None
    finished_s: float | None = None
    finish_reason: str = ""
    """Why the model stopped (``stop``, ``length``); empty for tools and agents that never ran."""
    failure: FailureKind | None = None
    """Why the agent failed or was skipped (None when it succeeded)."""
    call_key: str | None = None
    """The content key of the model call that answered it, where a call cache or an outcome
    table keyed it (what a table cell records; :attr:`lemon.backends.base.Generation.key`)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "role": self.role,
            "capacity": self.capacity,
            "model": self.model,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_s": self.latency_s,
            "status": self.status.value,
            "output": self.output,
            "attempts": self.attempts,
            "reused": self.reused,
            "cached": self.cached,
            "error": self.error,
            "failure": self.failure.value if self.failure is not None else None,
            "tool": self.tool,
            "finish_reason": self.finish_reason,
            "call_key": self.call_key,
            "started_s": self.started_s,
            "finished_s": self.finished_s,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AgentResult:
        """The agent :meth:`to_json` wrote (keys added since default: an older record reads)."""
        return cls(
            name=str(data["name"]),
            role=str(data["role"]),
            capacity=str(data["capacity"]),
            model=str(data.get("model", "")),
            tool=bool(data.get("tool", False)),
            status=AgentStatus(data["status"]),
            output=str(data.get("output", "")),
            prompt_tokens=int(data.get("prompt_tokens", 0)),
            completion_tokens=int(data.get("completion_tokens", 0)),
            latency_s=float(data.get("latency_s", 0.0)),
            attempts=int(data.get("attempts", 0)),
            reused=bool(data.get("reused", False)),
            cached=bool(data.get("cached", False)),
            error=data.get("error"),
            started_s=_float_or_none(data.get("started_s")),
            finished_s=_float_or_none(data.get("finished_s")),
            finish_reason=str(data.get("finish_reason", "")),
            failure=_failure(data.get("failure")),
            call_key=data.get("call_key"),
        )


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def _failure(value: Any) -> FailureKind | None:
    return None if value is None else FailureKind(value)


@dataclass(slots=True)
class RunResult:
    status: RunStatus
    answer: str | None
    spec: str
    """The spec that ran, in canonical YAML."""
    agents: list[AgentResult]
    wall_s: float
    critical_path: tuple[str, ...]
    error: str | None = None
    reused_calls: int = 0
    failure: FailureKind | None = None
    """Why the run failed (None when it succeeded)."""
    budget: BudgetUse | None = None
    """A budgeted run's limits, spending and stop reason (None: the run had no budget)."""

    @property
    def prompt_tokens(self) -> int:
        return sum(a.prompt_tokens for a in self.agents)

    @property
    def completion_tokens(self) -> int:
        return sum(a.completion_tokens for a in self.agents)

    @property
    def calls(self) -> int:
        """Model calls actually made (reused answers, call-cache hits and tool agents cost none)."""
        return sum(a.attempts for a in self.agents if not a.reused and not a.cached and not a.tool)

    @property
    def cache_hits(self) -> int:
        """Calls answered from the persistent call cache."""
        return sum(a.cached for a in self.agents)

    def tokens(self) -> dict[str, int]:
        """Worker tokens of the spec: reused answers count what they cost when computed, so a
        mutant's cost does not depend on what happened to be cached."""
        prompt, completion = self.prompt_tokens, self.completion_tokens
        return {"prompt": prompt, "completion": completion, "total": prompt + completion}

    def tokens_by_tier(self) -> dict[str, int]:
        """Worker tokens per capacity tier (tool agents spend none)."""
        out: dict[str, int] = {}
        for agent in self.agents:
            if agent.prompt_tokens or agent.completion_tokens:
                out[agent.capacity] = (
                    out.get(agent.capacity, 0) + agent.prompt_tokens + agent.completion_tokens
                )
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "spec": self.spec,
            "agents": [agent.to_json() for agent in self.agents],
            "tokens": self.tokens(),
            "tokens_by_tier": self.tokens_by_tier(),
            "wall_s": self.wall_s,
            "status": self.status.value,
            "error": self.error,
            "failure": self.failure.value if self.failure is not None else None,
            "critical_path": list(self.critical_path),
            "calls": self.calls,
            "reused_calls": self.reused_calls,
            "cache_hits": self.cache_hits,
            "budget": self.budget.to_json() if self.budget is not None else None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunResult:
        """The run :meth:`to_json` wrote (see the module docstring)."""
        budget = data.get("budget")
        return cls(
            status=RunStatus(data["status"]),
            answer=data.get("answer"),
            spec=str(data["spec"]),
            agents=[AgentResult.from_json(agent) for agent in data["agents"]],
            wall_s=float(data["wall_s"]),
            critical_path=tuple(str(name) for name in data.get("critical_path", ())),
            error=data.get("error"),
            reused_calls=int(data.get("reused_calls", 0)),
            failure=_failure(data.get("failure")),
            budget=BudgetUse.from_json(budget) if budget is not None else None,
        )
