"""Conversions between the core's objects and the ``lemon.v1`` messages (pure functions)."""

from __future__ import annotations

from lemon import events
from lemon.engine.results import AgentResult
from lemon.orchestration import TaskRun
from lemon.spec.issues import Issue
from lemon.spec.validation import ParsedSpec
from lemon_service._proto import orchestrator_pb2 as pb

__all__ = ["agent_report", "issue", "run_event", "run_response", "valid_response"]


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
