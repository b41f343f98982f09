"""Conversions between the core's objects and the ``lemon.v1`` messages (pure functions)."""

from __future__ import annotations

import hashlib
import re
import time

from lemon import events
from lemon.engine.results import AgentResult
from lemon.orchestration import TaskRun
from lemon.spec.issues import Issue
from lemon.spec.validation import ParsedSpec
from lemon_api.v1 import orchestrator_pb2 as pb
from lemon_service.endpoints import check_endpoint, tier_endpoints
from lemon_service.engine import Engine, RunRequest
from lemon_service.runs import DEFAULT_TRACE_BYTES, RunPhase, RunRecord, Submission, bounded_trace
from lemon_service.status_codes import BadRequest

__all__ = [
    "agent_report",
    "issue",
    "run_event",
    "run_request",
    "run_response",
    "run_state",
    "submission",
    "valid_response",
]

_RUN_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_PHASES = {
    RunPhase.QUEUED: pb.RunState.QUEUED,
    RunPhase.RUNNING: pb.RunState.RUNNING,
    RunPhase.SUCCEEDED: pb.RunState.SUCCEEDED,
    RunPhase.FAILED: pb.RunState.FAILED,
    RunPhase.CANCELLED: pb.RunState.CANCELLED,
}


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
    )


def run_response(result: TaskRun, *, request_id: str) -> pb.RunResponse:
    tokens = result.tokens()
    return pb.RunResponse(
        request_id=request_id,
        status=result.status.value,
        answer=result.answer or "",
        spec=result.spec,
        spec_origin=result.spec_origin,
        agents=[agent_report(agent) for agent in result.agents],
        tokens=pb.Tokens(
            prompt=tokens["prompt"], completion=tokens["completion"], total=tokens["total"]
        ),
        wall_s=result.wall_s,
        error=result.error or "",
        profile=result.profile,
        profile_note=result.profile_note,
        critical_path=list(result.critical_path),
        calls=result.calls,
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
    engine: Engine, task: str, options: pb.RunOptions, parsed: ParsedSpec | None = None
) -> RunRequest:
    return RunRequest(
        task,
        limits=engine.limits,
        parsed=parsed,
        max_tokens=options.max_tokens,
        seed=options.seed if options.HasField("seed") else None,
        template=options.template,
    )


def submission(request: pb.SubmitRunRequest, *, engine: Engine) -> Submission:
    """A checked SubmitRun (``BadRequest``, ``SpecError`` or ``LimitExceeded`` otherwise)."""
    if not _RUN_ID.match(request.run_id):
        raise BadRequest(f"run_id: {request.run_id!r} is not 1 to 128 of [A-Za-z0-9._:-]")
    if request.deadline_s < 0:
        raise BadRequest(f"deadline_s: {request.deadline_s} is negative")
    source = request.source or request.run_id
    parsed = None
    if request.WhichOneof("spec_source") == "spec":
        parsed = engine.parse(request.spec, source=source)
    policy = None
    if request.WhichOneof("spec_source") == "policy":
        policy = check_endpoint(request.policy.url, request.policy.model, field="policy")
    tiers = tier_endpoints([(t.tier, t.url, t.model) for t in request.tiers])
    what = pb.SubmitRunRequest()
    what.CopyFrom(request)
    for delivery in ("wait_s", "include_trace", "max_trace_bytes"):  # how to answer, not what
        what.ClearField(delivery)
    return Submission(
        run_id=request.run_id,
        source=source,
        fingerprint=hashlib.sha256(what.SerializeToString(deterministic=True)).digest(),
        request=run_request(engine, request.task, request.options, parsed),
        tiers=tiers,
        policy=policy,
        policy_name=request.policy.name,
        deadline_s=request.deadline_s,
    )


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
    )
    if record.result is not None:
        state.result.CopyFrom(run_response(record.result, request_id=record.run_id))
    if trace_bytes is not None:
        limit = trace_bytes or DEFAULT_TRACE_BYTES
        state.trace.extend(bounded_trace(record.trace.events, max_bytes=limit))
    return state
