"""Pure pieces of a ``LemonRun``'s handling: what the operator asks the service, what the
service answers, and the status the operator writes for each phase (no Kubernetes, no gRPC).

Conditions: ``TiersReady`` (the tiers the run needs report Ready), ``Submitted`` (the service
accepted the run id) and ``Succeeded`` (Unknown while pending or running; True with the answer;
False with the reason: ``AgentFailed``, ``DeadlineExceeded``, ``Cancelled``, ``SpecInvalid``,
``Rejected``, ``ServiceLostRun``, ``ServiceError``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from lemon.events import TraceTruncated, encode_event
from lemon.resources import Condition
from lemon.resources.lemon_run import (
    MAX_ANSWER_CHARS,
    LemonRunStatus,
    RunAgentStatus,
    RunTokens,
    answer_preview,
    tier_cost,
)
from lemon_operator import statuses

__all__ = [
    "MAX_TRACE_BYTES",
    "TRACE_KEY",
    "Failure",
    "PolicyTarget",
    "RunOrder",
    "ServiceRun",
    "failure_of",
    "finished_status",
    "pending_status",
    "refused_status",
    "running_status",
    "trace_text",
]

TRACE_KEY = "trace"
MAX_TRACE_BYTES = 256 * 1024
"""What the operator asks of the service and keeps in the trace ConfigMap (whose hard limit is
1 MiB); a trace over it is cut by the service, with a ``trace_truncated`` line."""
ServicePhase = Literal["queued", "running", "succeeded", "failed", "cancelled"]
Status = dict[str, Any]


@dataclass(frozen=True, slots=True)
class PolicyTarget:
    """The policy endpoint that writes a run's spec."""

    url: str
    model: str
    name: str


@dataclass(frozen=True, slots=True)
class RunOrder:
    """What the operator asks the service to run."""

    run_id: str
    source: str
    task: str
    tiers: Sequence[tuple[str, str, str]]
    """(tier, OpenAI base URL, model name) per tier the profile serves."""
    spec: str | None = None
    policy: PolicyTarget | None = None
    max_tokens: int = 0
    deadline_s: float = 0.0


@dataclass(frozen=True, slots=True)
class ServiceRun:
    """A run as the service reports it."""

    run_id: str
    phase: ServicePhase
    created: bool = False
    answer: str = ""
    spec: str = ""
    spec_origin: str = ""
    agents: tuple[RunAgentStatus, ...] = ()
    tokens: RunTokens = field(default_factory=RunTokens)
    wall_s: float = 0.0
    run_error: str = ""
    """The run's own error (e.g. its deadline), when it ran and failed."""
    error: str = ""
    """Why the service failed or cancelled the run."""
    trace: tuple[str, ...] = ()

    @property
    def finished(self) -> bool:
        return self.phase in ("succeeded", "failed", "cancelled")


@dataclass(frozen=True, slots=True)
class Failure:
    reason: str
    message: str


def failure_of(run: ServiceRun) -> Failure | None:
    """Why a finished run did not succeed (None when it did)."""
    if run.phase == "succeeded":
        return None
    if run.phase == "cancelled":
        return Failure("Cancelled", run.error or "the run was cancelled")
    if run.run_error.startswith("run deadline"):
        return Failure("DeadlineExceeded", run.run_error)
    if any(agent.status == "failed" for agent in run.agents):
        return Failure("AgentFailed", run.error or run.run_error)
    if not run.agents:
        return Failure("ServiceError", run.error or "the service failed the run")
    return Failure("RunFailed", run.error or run.run_error or "the run failed")


def _conditions(previous: Mapping[str, Any], current: list[Condition], *, fields: Status) -> Status:
    fields["conditions"] = statuses.merge_conditions(previous.get("conditions") or [], current)
    return fields


def pending_status(
    *,
    reason: str,
    message: str,
    tiers_ready: bool | None,
    generation: int,
    at: str,
    previous: Mapping[str, Any],
) -> Status:
    """Waiting to start: for a spec, a policy, a profile, tiers or the service."""

    def make(kind: str, ok: bool | None, why: str, text: str) -> Condition:
        return statuses.condition(kind, ok, reason=why, message=text, generation=generation, at=at)

    tiers = make(
        "TiersReady",
        tiers_ready,
        "TiersReady" if tiers_ready else (reason if tiers_ready is False else "NotChecked"),
        "every tier the run needs is ready" if tiers_ready else message,
    )
    fields: Status = {"observedGeneration": generation, "phase": "Pending", "message": message}
    return _conditions(
        previous,
        [
            tiers,
            make("Submitted", False, reason, message),
            make("Succeeded", None, reason, message),
        ],
        fields=fields,
    )


def refused_status(
    *, reason: str, message: str, generation: int, at: str, previous: Mapping[str, Any]
) -> Status:
    """Failed before anything ran (an invalid spec, a request the service refused)."""
    fields: Status = {
        "observedGeneration": generation,
        "phase": "Failed",
        "message": message,
        "completionTime": at,
    }
    return _conditions(
        previous,
        [
            statuses.condition(
                "Submitted", False, reason=reason, message=message, generation=generation, at=at
            ),
            statuses.condition(
                "Succeeded", False, reason=reason, message=message, generation=generation, at=at
            ),
        ],
        fields=fields,
    )


def running_status(
    *,
    run_id: str,
    profile: str,
    target: str,
    generation: int,
    at: str,
    previous: Mapping[str, Any],
) -> Status:
    """Accepted by the service under ``run_id``."""
    message = f"run {run_id} accepted by the orchestration service at {target}"
    fields: Status = {
        "observedGeneration": generation,
        "phase": "Running",
        "runId": run_id,
        "profile": profile,
        "message": message,
        "startTime": at,
    }
    return _conditions(
        previous,
        [
            statuses.condition(
                "TiersReady",
                True,
                reason="TiersReady",
                message="every tier the run needs is ready",
                generation=generation,
                at=at,
            ),
            statuses.condition(
                "Submitted", True, reason="Accepted", message=message, generation=generation, at=at
            ),
            statuses.condition(
                "Succeeded", None, reason="Running", message=message, generation=generation, at=at
            ),
        ],
        fields=fields,
    )


def finished_status(
    run: ServiceRun,
    *,
    prices: Mapping[str, float],
    trace: str | None,
    generation: int,
    at: str,
    previous: Mapping[str, Any],
    profile: str | None = None,
    started: str | None = None,
) -> Status:
    """The finished run as the service reported it: answer, agents, tokens, tier-priced cost
    (and its id, profile and start, for a run that never showed Running)."""
    failure = failure_of(run)
    answer = run.answer[:MAX_ANSWER_CHARS] if failure is None else None
    if failure is None:
        message = f"answered in {run.wall_s:.2f} s ({run.tokens.total} tokens)"
        outcome = statuses.condition(
            "Succeeded", True, reason="Answered", message=message, generation=generation, at=at
        )
    else:
        message = failure.message
        outcome = statuses.condition(
            "Succeeded",
            False,
            reason=failure.reason,
            message=message,
            generation=generation,
            at=at,
        )
    body = LemonRunStatus(
        observed_generation=generation,
        phase="Succeeded" if failure is None else "Failed",
        run_id=run.run_id,
        profile=profile,
        start_time=started,
        answer=answer,
        answer_preview=answer_preview(answer),
        spec=run.spec or None,
        spec_origin=run.spec_origin or None,
        agents=list(run.agents) if run.agents else None,
        tokens=run.tokens if run.agents else None,
        cost=tier_cost(run.agents, prices=prices) if run.agents else None,
        wall_seconds=round(run.wall_s, 4) if run.agents else None,
        trace=trace,
        message=message,
        completion_time=at,
    ).model_dump(by_alias=True, mode="json", exclude_none=True)
    body.pop("conditions")
    submitted = statuses.find_condition(previous.get("conditions") or [], "Submitted") or {}
    kept = [
        Condition.model_validate(entry)
        for entry in previous.get("conditions") or []
        if entry.get("type") in ("TiersReady", "Submitted")
    ]
    if not submitted:
        kept.append(
            statuses.condition(
                "Submitted",
                True,
                reason="Accepted",
                message=f"run {run.run_id} accepted",
                generation=generation,
                at=at,
            )
        )
    return _conditions(previous, [*kept, outcome], fields=body)


def trace_text(lines: Sequence[str]) -> str:
    """The ConfigMap's trace: JSONL, one event a line; if the service sent more than the
    limit (it should not), a single line saying so instead."""
    text = "".join(line + "\n" for line in lines)
    if len(text.encode()) <= MAX_TRACE_BYTES:
        return text
    note = TraceTruncated(left_out=len(lines), limit_bytes=MAX_TRACE_BYTES)
    return json.dumps(encode_event(note)) + "\n"
