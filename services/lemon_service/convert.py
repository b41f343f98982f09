"""Conversions between the core's objects and the ``lemon.v1`` messages (pure functions)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lemon.engine.results import AgentResult, RunResult
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


def run_response(result: RunResult, *, request_id: str) -> pb.RunResponse:
    tokens = result.tokens()
    return pb.RunResponse(
        request_id=request_id,
        status=result.status.value,
        answer=result.answer or "",
        spec=result.spec,
        spec_origin=str(result.extra.get("spec_origin", "")),
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


def run_event(event: Mapping[str, Any], *, origin: str) -> pb.RunEvent | None:
    """The stream event for one trace event; None for events the stream does not carry
    (``spec_ready`` is sent with ``run_start``, which knows the DAG; ``run_finish`` becomes
    the final ``result``)."""
    kind, t = event["event"], float(event["t"])
    if kind == "run_start":
        levels = [pb.Level(agents=list(level)) for level in event["levels"]]
        ready = pb.SpecReady(origin=origin, output=event["output"], levels=levels)
        return pb.RunEvent(t=t, spec_ready=ready)
    if kind == "agent_start":
        started = pb.AgentStarted(
            agent=event["agent"],
            role=event["role"],
            capacity=event["capacity"],
            model=event.get("model", ""),
            reused=bool(event.get("reused")),
        )
        return pb.RunEvent(t=t, agent_started=started)
    if kind == "agent_retry":
        retry = pb.AgentRetry(
            agent=event["agent"], attempt=event["attempt"], error=str(event["error"])
        )
        return pb.RunEvent(t=t, agent_retry=retry)
    if kind == "agent_finish":
        finished = pb.AgentFinished(
            agent=event["agent"],
            status=event["status"],
            prompt_tokens=event["prompt_tokens"],
            completion_tokens=event["completion_tokens"],
            latency_s=event["latency_s"],
            attempts=event["attempts"],
            reused=bool(event.get("reused")),
            error=event.get("error") or "",
            output=event.get("output", ""),
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
