"""Pure pieces of a ``LemonRun``'s handling: what the operator asks the service, what the
service answers, and the status the operator writes for each phase (no Kubernetes, no gRPC).

Every status is built through :class:`~lemon.resources.lemon_run.LemonRunStatus` (the model the
CRD is generated from) and written as its JSON. Conditions: ``TiersReady`` (the tiers the run
needs report Ready), ``Submitted`` (the service accepted the run id) and ``Succeeded`` (Unknown
while pending or running; True with the answer; False with the reason). A run that ran and
failed has a :class:`~lemon.engine.results.FailureKind`, set where it happened and carried by
the service; :data:`FAILURE_REASONS` is the one table from a kind to the reason
(``DeadlineExceeded``, ``TierUnavailable``, ``AgentFailed``, ``Cancelled``, ``SpecInvalid``,
``Interrupted``, ``BudgetExceeded``); a run its namespace's LemonBudget stopped is
``NamespaceBudgetExceeded``, one whose spec's estimate was over its own budget before it ran
``BudgetRefused`` (the service's BudgetReport says which); a
run the service failed without a kind is ``ServiceError``. Runs the operator itself fails have
the reason of what stopped them (``Invalid``, ``SpecInvalid``, ``TierNotInProfile``,
``Rejected``, ``ServiceLostRun``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lemon.engine.results import FailureKind
from lemon.events import TraceTruncated, encode_event
from lemon.pricing import COST_UNIT, TierPrices
from lemon.resources import Condition
from lemon.resources.lemon_budget import BudgetAmounts
from lemon.resources.lemon_run import (
    MAX_ANSWER_CHARS,
    TERMINAL_PHASES,
    BudgetStop,
    LemonRunStatus,
    RunAgentStatus,
    RunBudget,
    RunBudgetStatus,
    RunPhase,
    RunTokens,
    TierEndpoint,
    answer_preview,
)
from lemon_operator import statuses

__all__ = [
    "FAILURE_REASONS",
    "MAX_TRACE_BYTES",
    "TRACE_KEY",
    "Failure",
    "NamespaceLimits",
    "PolicyTarget",
    "RunOrder",
    "ServiceBudget",
    "ServiceRun",
    "budget_status",
    "failure_of",
    "finished_status",
    "pending_status",
    "refused_status",
    "run_cost",
    "running_status",
    "trace_text",
]

TRACE_KEY = "trace"
MAX_TRACE_BYTES = 256 * 1024
"""What the operator asks of the service and keeps in the trace ConfigMap (whose hard limit is
1 MiB); a trace over it is cut by the service, with a ``trace_truncated`` line."""
Status = dict[str, Any]
TIERS_READY = "every tier the run needs is ready"

_NAMED_REASONS: dict[FailureKind, str] = {
    FailureKind.DEADLINE: "DeadlineExceeded",
    FailureKind.DEPENDENCY: "AgentFailed",  # an agent's kind; a run's is never this
    FailureKind.INVALID_SPEC: "SpecInvalid",
}
FAILURE_REASONS: dict[FailureKind, str] = {
    kind: _NAMED_REASONS.get(kind) or "".join(word.title() for word in kind.value.split("_"))
    for kind in FailureKind
}
"""The ``Succeeded`` condition's reason for a run that failed with each kind: the kind's name in
CamelCase (``tier_unavailable`` is ``TierUnavailable``, ``agent_failed`` ``AgentFailed``,
``cancelled`` ``Cancelled``) but for the reasons Kubernetes users know by another name."""


@dataclass(frozen=True, slots=True)
class PolicyTarget:
    """The policy that writes a run's spec: an endpoint (``url``, ``model``), or a built-in
    policy the service runs itself (``builtin``); ``default`` when it is the namespace's
    default LemonPolicy, not one the run named."""

    url: str
    model: str
    name: str
    builtin: str | None = None
    default: bool = False


@dataclass(frozen=True, slots=True)
class NamespaceLimits:
    """The namespace's LemonBudget as the service is told it."""

    name: str
    """``LemonBudget team/tenant-a`` (:func:`lemon.resources.lemon_budget.shared_budget_name`)."""
    tokens: int | None
    cost: float | None
    window_s: float


@dataclass(frozen=True, slots=True)
class ServiceBudget:
    """A budgeted run's account as the service reported it."""

    limits: RunBudget | None = None
    spent_tokens: int = 0
    spent_cost: float = 0.0
    wall_s: float = 0.0
    reason: str = ""
    stopped_by: BudgetStop | None = None
    estimate: str = ""
    namespace_budget: str = ""


@dataclass(frozen=True, slots=True)
class RunOrder:
    """What the operator asks the service to run."""

    run_id: str
    source: str
    task: str
    tiers: Sequence[TierEndpoint]
    """The endpoint of each tier the run may use (the profile's, ready)."""
    spec: str | None = None
    policy: PolicyTarget | None = None
    max_tokens: int = 0
    deadline_s: float = 0.0
    budget: RunBudget | None = None
    """The run's own budget (``spec.budget``)."""
    namespace_budget: NamespaceLimits | None = None
    """The namespace's LemonBudget, which every run of the namespace draws from."""


@dataclass(frozen=True, slots=True)
class ServiceRun:
    """A run as the service reports it, in the LemonRun's vocabulary."""

    run_id: str
    phase: RunPhase
    """Running (queued or running on the service), Succeeded or Failed (cancelled too)."""
    failure: FailureKind | None = None
    """Why it failed, when the service could say (the run's own failure kind, or cancelled)."""
    created: bool = False
    answer: str = ""
    spec: str = ""
    spec_origin: str = ""
    agents: tuple[RunAgentStatus, ...] = ()
    tokens: RunTokens = field(default_factory=RunTokens)
    wall_s: float = 0.0
    error: str = ""
    """Why the run failed or was cancelled, in words."""
    trace: tuple[str, ...] = ()
    budget: ServiceBudget | None = None
    """A budgeted run's account (None: no budget applied to it)."""

    @property
    def finished(self) -> bool:
        return self.phase in TERMINAL_PHASES


_BUDGET_REASONS: dict[str, str] = {
    "Namespace": "NamespaceBudgetExceeded",
    "Refused": "BudgetRefused",
}
"""A budget_exceeded run's reason by which budget stopped it (its own: ``BudgetExceeded``)."""


def budget_status(budget: ServiceBudget) -> RunBudgetStatus:
    """A budgeted run's ``status.budget``: the limits, spent (and in one line, for the printer
    column), what the run's own budget has left, why and which budget stopped it."""
    limits = budget.limits
    text = limits.budget().text() if limits is not None else ""
    if budget.namespace_budget:
        name = budget.namespace_budget.split(" (", 1)[0]
        text = f"{text} + {name}" if text else name
    remaining = None
    if limits is not None and (limits.tokens is not None or limits.cost is not None):
        remaining = BudgetAmounts(
            tokens=None if limits.tokens is None else max(0, limits.tokens - budget.spent_tokens),
            cost=None
            if limits.cost is None
            else round(max(0.0, limits.cost - budget.spent_cost), 3),
        )
    return RunBudgetStatus(
        limits=limits,
        text=text or None,
        spent=BudgetAmounts(tokens=budget.spent_tokens, cost=round(budget.spent_cost, 3)),
        spent_text=f"{budget.spent_tokens} tokens, {budget.spent_cost:.1f} {COST_UNIT}",
        remaining=remaining,
        wall_seconds=round(budget.wall_s, 4),
        reason=budget.reason or None,
        stopped_by=budget.stopped_by,
        estimate=budget.estimate or None,
        namespace_budget=budget.namespace_budget or None,
    )


@dataclass(frozen=True, slots=True)
class Failure:
    reason: str
    message: str


def failure_of(run: ServiceRun) -> Failure | None:
    """Why a finished run did not succeed (None when it did): the reason of its failure kind
    (:data:`FAILURE_REASONS`), ``ServiceError`` when the service gave none."""
    if run.phase is RunPhase.SUCCEEDED:
        return None
    budget = run.budget
    if run.failure is FailureKind.BUDGET_EXCEEDED and budget is not None:
        reason = _BUDGET_REASONS.get(budget.stopped_by or "")
        message = run.error or budget.reason
        if budget.stopped_by == "Refused" and budget.limits is not None:
            # the service names its request's field; the user wrote spec.budget
            message = f"spec.budget {budget.limits.budget().text()} refused: {message}"
        if reason is not None:
            return Failure(reason, message)
    if run.failure is None:
        return Failure("ServiceError", run.error or "the service failed the run")
    return Failure(FAILURE_REASONS[run.failure], run.error or f"the run failed ({run.failure})")


def run_cost(agents: Sequence[RunAgentStatus], *, prices: TierPrices) -> float:
    """Tier-priced tokens: each agent's tokens at its tier's price (:meth:`TierPrices.priced`,
    the one notion of cost), rounded to 1e-6 so float noise never shows."""
    by_tier: dict[str, int] = {}
    for agent in agents:
        by_tier[agent.tier] = by_tier.get(agent.tier, 0) + agent.tokens
    return round(prices.priced(by_tier), 6)


def _status(
    previous: Mapping[str, Any], conditions: list[Condition], status: LemonRunStatus
) -> Status:
    """``status`` as the JSON to patch, its ``conditions`` merged into ``previous``'s (each
    transition time kept while its status holds)."""
    body = status.model_dump(by_alias=True, mode="json", exclude_none=True)
    body["conditions"] = statuses.merge_conditions(previous.get("conditions") or [], conditions)
    return body


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
    made = statuses.Conditions(generation, at)
    tiers = made.of(
        "TiersReady",
        tiers_ready,
        reason="TiersReady" if tiers_ready else (reason if tiers_ready is False else "NotChecked"),
        message=TIERS_READY if tiers_ready else message,
    )
    conditions = [
        tiers,
        made.false("Submitted", reason=reason, message=message),
        made.unknown("Succeeded", reason=reason, message=message),
    ]
    status = LemonRunStatus(observed_generation=generation, phase=RunPhase.PENDING, message=message)
    return _status(previous, conditions, status)


def refused_status(
    *, reason: str, message: str, generation: int, at: str, previous: Mapping[str, Any]
) -> Status:
    """Failed before anything ran (an invalid spec, a request the service refused)."""
    made = statuses.Conditions(generation, at)
    conditions = [
        made.false("Submitted", reason=reason, message=message),
        made.false("Succeeded", reason=reason, message=message),
    ]
    status = LemonRunStatus(
        observed_generation=generation, phase=RunPhase.FAILED, message=message, completion_time=at
    )
    return _status(previous, conditions, status)


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
    made = statuses.Conditions(generation, at)
    conditions = [
        made.true("TiersReady", reason="TiersReady", message=TIERS_READY),
        made.true("Submitted", reason="Accepted", message=message),
        made.unknown("Succeeded", reason="Running", message=message),
    ]
    status = LemonRunStatus(
        observed_generation=generation,
        phase=RunPhase.RUNNING,
        run_id=run_id,
        profile=profile,
        message=message,
        start_time=at,
    )
    return _status(previous, conditions, status)


def _ran(previous: Mapping[str, Any], *, run_id: str, made: statuses.Conditions) -> list[Condition]:
    """TiersReady and Submitted of a run the service ran: the tiers were ready and it was
    submitted, so a True condition of either kind is kept as it is (its time is when that
    became so); a missing or stale one (the run finished before a Running status was written)
    becomes True now."""
    reasons = {
        "TiersReady": ("TiersReady", TIERS_READY),
        "Submitted": ("Accepted", f"run {run_id} accepted"),
    }
    kept = []
    for kind, (reason, message) in reasons.items():
        held = statuses.find_condition(previous.get("conditions") or [], kind) or {}
        if held.get("status") == "True":
            kept.append(Condition.model_validate(held))
        else:
            kept.append(made.true(kind, reason=reason, message=message))
    return kept


def finished_status(
    run: ServiceRun,
    *,
    prices: TierPrices,
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
    made = statuses.Conditions(generation, at)
    answer = run.answer[:MAX_ANSWER_CHARS] if failure is None else None
    if failure is None:
        message = f"answered in {run.wall_s:.2f} s ({run.tokens.total} tokens)"
        outcome = made.true("Succeeded", reason="Answered", message=message)
    else:
        message = failure.message
        outcome = made.false("Succeeded", reason=failure.reason, message=message)
    ran = bool(run.agents)
    status = LemonRunStatus(
        observed_generation=generation,
        phase=RunPhase.SUCCEEDED if failure is None else RunPhase.FAILED,
        run_id=run.run_id,
        profile=profile,
        start_time=started,
        answer=answer,
        answer_preview=answer_preview(answer),
        spec=run.spec or None,
        spec_origin=run.spec_origin or None,
        agents=list(run.agents) if ran else None,
        tokens=run.tokens if ran else None,
        cost=run_cost(run.agents, prices=prices) if ran else None,
        cost_unit=COST_UNIT if ran else None,
        wall_seconds=round(run.wall_s, 4) if ran else None,
        budget=budget_status(run.budget) if run.budget is not None else None,
        trace=trace,
        message=message,
        completion_time=at,
    )
    conditions = [*_ran(previous, run_id=run.run_id, made=made), outcome]
    return _status(previous, conditions, status)


def trace_text(lines: Sequence[str]) -> str:
    """The ConfigMap's trace: JSONL, one event a line; if the service sent more than the
    limit (it should not), a single line saying so instead."""
    text = "".join(line + "\n" for line in lines)
    if len(text.encode()) <= MAX_TRACE_BYTES:
        return text
    note = TraceTruncated(left_out=len(lines), limit_bytes=MAX_TRACE_BYTES)
    return json.dumps(encode_event(note)) + "\n"
