"""Conversions between the core's objects and the ``lemon.v1`` messages (pure functions).

Each vocabulary is mapped once, here: the service's
:class:`~lemon_service.run_store.ServiceRunPhase` to ``RunState.Phase``, the core's
:class:`~lemon.engine.results.FailureKind` to the proto's ``FailureKind`` (by name: ``deadline``
is ``FAILURE_KIND_DEADLINE``).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Sequence

from lemon import events
from lemon.budget import Budget, BudgetRefused, BudgetUse
from lemon.engine.metering import SharedBudget
from lemon.engine.results import AgentResult, FailureKind
from lemon.orchestration import TaskRun
from lemon.policy.defaults import BUILTIN_POLICIES, SpecChoice
from lemon.pricing import COST_UNIT
from lemon.spec.issues import Issue
from lemon.spec.models import Capacity
from lemon.spec.validation import ParsedSpec
from lemon_api.v1 import orchestrator_pb2 as pb
from lemon_service.dispatch import Dispatcher, RunRequest, SharedLimits
from lemon_service.endpoints import Endpoint, check_endpoint
from lemon_service.run_store import (
    DEFAULT_TRACE_BYTES,
    RunRecord,
    ServiceRunPhase,
    Submission,
    bound_lines,
    bounded_trace,
)
from lemon_service.status_codes import BadRequest

__all__ = [
    "agent_report",
    "budget",
    "budget_report",
    "failure_kind",
    "issue",
    "journaled_submission",
    "namespace_budget_state",
    "refusal_report",
    "run_event",
    "run_request",
    "run_response",
    "run_state",
    "shared_limits",
    "submission",
    "tier_endpoints",
    "valid_response",
]

_RUN_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_PHASES = {
    ServiceRunPhase.QUEUED: pb.RunState.QUEUED,
    ServiceRunPhase.RUNNING: pb.RunState.RUNNING,
    ServiceRunPhase.SUCCEEDED: pb.RunState.SUCCEEDED,
    ServiceRunPhase.FAILED: pb.RunState.FAILED,
    ServiceRunPhase.CANCELLED: pb.RunState.CANCELLED,
}


_PROTO_KINDS: dict[str, pb.FailureKind] = dict(pb.FailureKind.items())
_FAILURES: dict[FailureKind, pb.FailureKind] = {
    kind: _PROTO_KINDS[f"FAILURE_KIND_{kind.name}"]
    for kind in FailureKind
    if f"FAILURE_KIND_{kind.name}" in _PROTO_KINDS
}  # every kind has one (tests/service/test_status_codes.py); a new one needs its proto value


_CHOICES: dict[SpecChoice, pb.SpecChoice] = {
    choice: pb.SpecChoice.Value(f"SPEC_CHOICE_{choice.name}") for choice in SpecChoice
}  # every step has its proto value (a new one fails here, at import)


def failure_kind(failure: FailureKind | None) -> pb.FailureKind:
    """The proto's kind of ``failure`` (UNSPECIFIED for None, or for a kind the proto lacks)."""
    if failure is None:
        return pb.FAILURE_KIND_UNSPECIFIED
    return _FAILURES.get(failure, pb.FAILURE_KIND_UNSPECIFIED)


def agent_report(agent: AgentResult) -> pb.AgentReport:
    return pb.AgentReport(
        name=agent.name,
        role=agent.role,
        capacity=agent.capacity,
        model=agent.model,
        status=agent.status.value,
        prompt_tokens=agent.prompt_tokens,
        completion_tokens=agent.completion_tokens,
        latency_s=agent.latency_s,
        attempts=agent.attempts,
        reused=agent.reused,
        error=agent.error or "",
        output=agent.output,
        failure=failure_kind(agent.failure),
    )


def budget(message: pb.Budget, *, field: str = "options.budget") -> Budget:
    """A request's budget, checked (:class:`lemon.budget.BudgetError` naming the field:
    INVALID_ARGUMENT)."""
    values: dict[str, float | int] = {}
    if message.HasField("tokens"):
        values["tokens"] = message.tokens
    if message.HasField("cost"):
        values["cost"] = message.cost
    if message.HasField("wall_s"):
        values["wall"] = message.wall_s
    return Budget.from_mapping(values, source=field)


def _budget_message(limits: Budget) -> pb.Budget:
    message = pb.Budget()
    if limits.tokens is not None:
        message.tokens = limits.tokens
    if limits.cost is not None:
        message.cost = limits.cost
    if limits.wall_s is not None:
        message.wall_s = limits.wall_s
    return message


_STOPS = {"run": pb.BUDGET_STOP_RUN, "shared": pb.BUDGET_STOP_NAMESPACE}


def budget_report(use: BudgetUse) -> pb.BudgetReport:
    """A budgeted run's account: limits, spent, why and which budget stopped it."""
    report = pb.BudgetReport(
        spent_tokens=use.tokens,
        spent_cost=round(use.cost, 3),
        spent_wall_s=use.wall_s,
        reason=use.reason or "",
        stop=_STOPS[use.scope] if use.reason and use.scope else pb.BUDGET_STOP_UNSPECIFIED,
        estimate=use.estimate.basis if use.estimate is not None else "",
        replaced=use.replaced or "",
        namespace_budget=use.shared or "",
    )
    if use.budget is not None:
        report.limits.CopyFrom(_budget_message(use.budget))
    return report


def refusal_report(refused: BudgetRefused) -> pb.BudgetReport:
    """A run refused before it ran: its budget and why, spent nothing."""
    return pb.BudgetReport(
        limits=_budget_message(refused.budget),
        reason=refused.reason,
        stop=pb.BUDGET_STOP_REFUSED,
        estimate=refused.estimate.basis if refused.estimate is not None else "",
    )


def shared_limits(message: pb.NamespaceBudget) -> SharedLimits:
    """A namespace budget as a request declares it, checked (``BadRequest`` naming the
    field)."""
    return SharedLimits(
        message.name,
        tokens=message.tokens if message.HasField("tokens") else None,
        cost=message.cost if message.HasField("cost") else None,
        window_s=message.window_s,
    )


def namespace_budget_state(shared: SharedBudget) -> pb.NamespaceBudgetState:
    """What a namespace budget's window spent and has left."""
    tokens, cost = shared.remaining()
    limits = pb.NamespaceBudget(name=shared.name, window_s=shared.window_s)
    if shared.tokens is not None:
        limits.tokens = shared.tokens
    if shared.cost is not None:
        limits.cost = shared.cost
    state = pb.NamespaceBudgetState(
        name=shared.name,
        limits=limits,
        window_start=shared.window_start,
        spent_tokens=shared.spent_tokens,
        spent_cost=round(shared.spent_cost, 3),
        held_tokens=max(0, shared.held_tokens),
        runs=shared.runs,
        stopped=shared.stopped,
    )
    if tokens is not None:
        state.remaining_tokens = tokens
    if cost is not None:
        state.remaining_cost = round(cost, 3)
    return state


def run_response(result: TaskRun, *, request_id: str) -> pb.RunResponse:
    prompt, completion = result.prompt_tokens, result.completion_tokens
    return pb.RunResponse(
        request_id=request_id,
        status=result.status.value,
        answer=result.answer or "",
        spec=result.spec,
        spec_origin=result.spec_origin,
        agents=[agent_report(agent) for agent in result.agents],
        tokens=pb.Tokens(prompt=prompt, completion=completion, total=prompt + completion),
        wall_s=result.wall_s,
        error=result.error or "",
        profile=result.profile,
        profile_note=result.profile_note,
        critical_path=list(result.critical_path),
        calls=result.calls,
        failure=failure_kind(result.failure),
        spec_choice=_CHOICES[result.spec_choice],
        cost=round(result.priced_tokens, 3),
        cost_unit=COST_UNIT,
        budget=budget_report(result.budget) if result.budget is not None else None,
    )


def run_event(event: events.Event, *, origin: str) -> pb.RunEvent | None:
    """The stream event for one trace event; None for events the stream does not carry
    (``spec_ready`` is sent with ``run_start``, which knows the DAG; ``run_finish`` becomes
    the final ``result``)."""
    t = event.t
    if isinstance(event, events.RunStarted):
        levels = [pb.Level(agents=list(level)) for level in event.levels]
        ready = pb.SpecReady(origin=origin, output=event.output, levels=levels)
        return pb.RunEvent(t=t, spec_ready=ready)
    if isinstance(event, events.AgentStarted):
        started = pb.AgentStarted(
            agent=event.agent,
            role=event.role,
            capacity=event.capacity,
            model=event.model,
            reused=event.reused,
        )
        return pb.RunEvent(t=t, agent_started=started)
    if isinstance(event, events.AgentRetrying):
        retry = pb.AgentRetry(agent=event.agent, attempt=event.attempt, error=event.error)
        return pb.RunEvent(t=t, agent_retry=retry)
    if isinstance(event, events.AgentFinished):
        finished = pb.AgentFinished(
            agent=event.agent,
            status=event.status,
            prompt_tokens=event.prompt_tokens,
            completion_tokens=event.completion_tokens,
            latency_s=event.latency_s,
            attempts=event.attempts,
            reused=event.reused,
            error=event.error or "",
            output=event.output,
        )
        return pb.RunEvent(t=t, agent_finished=finished)
    return None


def issue(found: Issue, *, source: str) -> pb.SpecIssue:
    return pb.SpecIssue(
        line=found.line, column=found.column, message=found.message, rendered=found.render(source)
    )


def valid_response(parsed: ParsedSpec) -> pb.ValidateSpecResponse:
    return pb.ValidateSpecResponse(
        valid=True,
        warnings=[issue(w, source=parsed.source) for w in parsed.warnings],
        output=parsed.output,
        agents=[agent.name for agent in parsed.spec.agents],
    )


def run_request(
    dispatcher: Dispatcher, task: str, options: pb.RunOptions, parsed: ParsedSpec | None = None
) -> RunRequest:
    return RunRequest(
        task,
        limits=dispatcher.limits,
        parsed=parsed,
        max_tokens=options.max_tokens,
        seed=options.seed if options.HasField("seed") else None,
        template=options.template,
        budget=budget(options.budget) if options.HasField("budget") else None,
        budget_fallback=options.budget_fallback,
    )


def tier_endpoints(
    entries: Sequence[pb.TierEndpoint], *, field: str = "tiers"
) -> dict[Capacity, Endpoint]:
    """A request's tier endpoints, checked: known tiers, each at most once."""
    found: dict[Capacity, Endpoint] = {}
    for index, entry in enumerate(entries):
        where = f"{field}[{index}]"
        if entry.tier not in set(Capacity):
            raise BadRequest(f"{where}.tier: {entry.tier!r} is not small, medium or large")
        if Capacity(entry.tier) in found:
            raise BadRequest(f"{where}.tier: {entry.tier} is given twice")
        found[Capacity(entry.tier)] = check_endpoint(entry.url, entry.model, field=where)
    return found


def submission(request: pb.SubmitRunRequest, *, dispatcher: Dispatcher) -> Submission:
    """A checked SubmitRun (``BadRequest``, ``SpecError`` or ``LimitExceeded`` otherwise)."""
    if not _RUN_ID.match(request.run_id):
        raise BadRequest(f"run_id: {request.run_id!r} is not 1 to 128 of [A-Za-z0-9._:-]")
    if request.deadline_s < 0:
        raise BadRequest(f"deadline_s: {request.deadline_s} is negative")
    source = request.source or request.run_id
    parsed = None
    if request.WhichOneof("spec_source") == "spec":
        parsed = dispatcher.parse(request.spec, source=source)
    policy = None
    if request.WhichOneof("spec_source") == "policy":
        policy = check_endpoint(request.policy.url, request.policy.model, field="policy")
    builtin = None
    if request.WhichOneof("spec_source") == "builtin_policy":
        builtin = request.builtin_policy.policy
        if builtin not in BUILTIN_POLICIES:
            known = ", ".join(BUILTIN_POLICIES)
            raise BadRequest(
                f"builtin_policy.policy: {builtin!r} is not a built-in policy (known: {known})"
            )
    if request.default_policy and policy is None and builtin is None:
        raise BadRequest("default_policy: set, but no policy or builtin_policy is given")
    tiers = tier_endpoints(request.tiers)
    shared = None
    if request.HasField("namespace_budget"):
        shared = shared_limits(request.namespace_budget)
    what = pb.SubmitRunRequest()
    what.CopyFrom(request)
    for delivery in ("wait_s", "include_trace", "max_trace_bytes"):  # how to answer, not what
        what.ClearField(delivery)
    # the namespace budget's limits may change between two submits of one run (its LemonBudget
    # edited): where the run draws from, not what it is, so not in the fingerprint
    same = pb.SubmitRunRequest()
    same.CopyFrom(what)
    same.ClearField("namespace_budget")
    return Submission(
        run_id=request.run_id,
        source=source,
        fingerprint=hashlib.sha256(same.SerializeToString(deterministic=True)).digest(),
        request=run_request(dispatcher, request.task, request.options, parsed),
        tiers=tiers,
        policy=policy,
        policy_name=request.builtin_policy.name if builtin else request.policy.name,
        builtin=builtin,
        default_policy=request.default_policy,
        deadline_s=request.deadline_s,
        wire=what.SerializeToString(deterministic=True),
        shared=shared,
    )


def journaled_submission(wire: bytes, *, dispatcher: Dispatcher) -> Submission:
    """A journaled request (:attr:`Submission.wire`) checked again, as after a restart."""
    return submission(pb.SubmitRunRequest.FromString(wire), dispatcher=dispatcher)


def run_state(
    record: RunRecord, *, created: bool = False, trace_bytes: int | None = None
) -> pb.RunState:
    """A run's state; with ``trace_bytes``, its trace bounded to that many bytes."""
    state = pb.RunState(
        run_id=record.run_id,
        phase=_PHASES[record.phase],
        created=created,
        error=record.error,
        age_s=time.monotonic() - record.accepted,
        failure=failure_kind(record.failure),
    )
    if record.result is not None:
        state.result.CopyFrom(run_response(record.result, request_id=record.run_id))
    elif record.response:  # read back from a version-1 run journal after a restart
        state.result.ParseFromString(record.response)
    if state.result.HasField("budget"):
        state.budget.CopyFrom(state.result.budget)
    elif record.refusal is not None:
        state.budget.CopyFrom(refusal_report(record.refusal))
    if trace_bytes is not None:
        limit = trace_bytes or DEFAULT_TRACE_BYTES
        if record.stored_trace:
            state.trace.extend(bound_lines(record.stored_trace, max_bytes=limit))
        else:
            state.trace.extend(bounded_trace(record.trace.events, max_bytes=limit))
    return state
