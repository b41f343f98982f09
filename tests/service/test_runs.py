"""Runs kept by id (SubmitRun, GetRun, CancelRun) against a real ``lemon serve`` process: a run
id executes once however often it is submitted; the run's tiers are the endpoints the request
names (a real HTTP server here); cancellation reaches the tier; bad requests are refused."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from lemon_api.v1 import orchestrator_pb2 as pb
from tests.service.conftest import OpenAIServer, ServeProcess
from tests.service.test_failures import wait_for
from tests.service.test_rpcs import SPEC, TASK, call, status_of

ONE = "agents:\n- {name: solver, role: math_solver, capacity: small}\n"


def starts(server: ServeProcess, run_id: str) -> int:
    return len(re.findall(rf"run {re.escape(run_id)} \(.*\): started", server.log.read_text()))


def submit(run_id: str, **fields: object) -> pb.SubmitRunRequest:
    request = pb.SubmitRunRequest(run_id=run_id, task=TASK, source=f"test {run_id}")
    for key, value in fields.items():
        if key == "tiers":
            request.tiers.extend(value)  # type: ignore[arg-type]
        elif key == "policy":
            request.policy.CopyFrom(value)  # type: ignore[arg-type]
        else:
            setattr(request, key, value)
    return request


@pytest.fixture
def tier(service_logs: Path, request: pytest.FixtureRequest) -> Iterator[OpenAIServer]:
    server = OpenAIServer(service_logs, latency=getattr(request, "param", 0.2))
    yield server
    server.kill()


def tiers_at(server: OpenAIServer, *names: str) -> list[pb.TierEndpoint]:
    return [pb.TierEndpoint(tier=name, url=server.url, model=name) for name in names]


def test_a_run_id_executes_once_however_often_it_is_submitted(
    scripted_server: ServeProcess,
) -> None:
    request = submit("once-1", spec=SPEC)
    first = call(scripted_server.target, lambda c: c.submit_run(request))
    assert first.created
    assert first.phase in (pb.RunState.QUEUED, pb.RunState.RUNNING, pb.RunState.SUCCEEDED)
    again = call(scripted_server.target, lambda c: c.submit_run(request))
    assert not again.created
    done = call(scripted_server.target, lambda c: c.get_run("once-1", wait_s=30))
    assert done.phase == pb.RunState.SUCCEEDED
    assert done.result.answer == "The answer is 42."
    assert done.result.request_id == "once-1"
    after = call(scripted_server.target, lambda c: c.submit_run(request))
    assert not after.created
    assert after.phase == pb.RunState.SUCCEEDED
    assert starts(scripted_server, "once-1") == 1

    other = submit("once-1", spec=SPEC, task="Another task?")
    error = status_of(scripted_server.target, lambda c: c.submit_run(other))
    assert error.code() == grpc.StatusCode.ALREADY_EXISTS
    assert starts(scripted_server, "once-1") == 1


def test_unknown_runs_and_bad_requests_are_refused(scripted_server: ServeProcess) -> None:
    target = scripted_server.target
    for action in (lambda c: c.get_run("nope"), lambda c: c.cancel_run("nope")):
        assert status_of(target, action).code() == grpc.StatusCode.NOT_FOUND
    bad = [
        (submit("", spec=SPEC), "run_id"),
        (submit("has space", spec=SPEC), "run_id"),
        (submit("bad-tier", spec=SPEC, tiers=[pb.TierEndpoint(tier="huge", url="http://h/v1",
                                                              model="m")]), "tiers[0].tier"),
        (submit("bad-url", spec=SPEC, tiers=[pb.TierEndpoint(tier="small", url="ftp://h",
                                                             model="m")]), "tiers[0].url"),
        (submit("bad-spec", spec="agents: []\n"), "invalid spec"),
        (submit("no-task", task="", spec=SPEC), "task"),
    ]  # fmt: skip
    for request, where in bad:
        error = status_of(target, lambda c, r=request: c.submit_run(r))  # type: ignore[misc]
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, where
        assert where in error.details()
        assert starts(scripted_server, request.run_id) == 0


def test_a_run_uses_the_tiers_it_names_and_reports_its_trace(
    scripted_server: ServeProcess, tier: OpenAIServer
) -> None:
    request = submit("tiers-1", spec=ONE, tiers=tiers_at(tier, "small"))
    call(scripted_server.target, lambda c: c.submit_run(request))
    state = call(
        scripted_server.target,
        lambda c: c.get_run("tiers-1", wait_s=30, include_trace=True),
    )
    assert state.phase == pb.RunState.SUCCEEDED
    assert state.failure == state.result.failure == pb.FAILURE_KIND_UNSPECIFIED
    assert state.result.answer == "The answer is 42."  # what the HTTP tier answers
    (solver,) = state.result.agents
    assert solver.model == f"openai:{tier.url}#small"
    assert tier.count("answered") == 1
    events = [json.loads(line)["event"] for line in state.trace]
    assert events[0] == "spec_ready"
    assert events[-1] == "run_finish"


def test_a_tier_the_run_does_not_name_fails_its_agents(
    scripted_server: ServeProcess, tier: OpenAIServer
) -> None:
    request = submit("missing-1", spec=SPEC, tiers=tiers_at(tier, "small"))
    call(scripted_server.target, lambda c: c.submit_run(request))
    state = call(scripted_server.target, lambda c: c.get_run("missing-1", wait_s=30))
    assert state.phase == pb.RunState.FAILED
    assert state.failure == state.result.failure == pb.FAILURE_KIND_TIER_UNAVAILABLE
    failed = [agent for agent in state.result.agents if agent.status == "failed"]
    assert failed
    assert all(agent.capacity != "small" for agent in failed)  # nothing borrowed the small tier
    assert {agent.failure for agent in failed} == {pb.FAILURE_KIND_TIER_UNAVAILABLE}
    assert failed[0].attempts == 1  # unavailable at once: never retried
    assert "has no endpoint in this run's capacity profile" in failed[0].error
    assert state.error.startswith(f"agent {failed[0].name} ({failed[0].capacity}) failed")
    skipped = [agent for agent in state.result.agents if agent.status == "skipped"]
    assert {agent.failure for agent in skipped} <= {pb.FAILURE_KIND_DEPENDENCY}
    assert state.result.profile == "run-tiers"
    assert "no endpoint" in state.result.profile_note


@pytest.mark.parametrize("tier", [30.0], indirect=True)
def test_cancelling_a_run_stops_its_agents_at_the_tier(
    scripted_server: ServeProcess, tier: OpenAIServer
) -> None:
    request = submit("cancel-1", spec=ONE, tiers=tiers_at(tier, "small"))
    call(scripted_server.target, lambda c: c.submit_run(request))
    assert wait_for(lambda: tier.count("start") == 1, timeout=20)
    state = call(scripted_server.target, lambda c: c.cancel_run("cancel-1"))
    assert state.phase == pb.RunState.CANCELLED
    assert state.failure == pb.FAILURE_KIND_CANCELLED
    assert state.error == "cancelled by CancelRun"
    assert wait_for(lambda: tier.count("disconnected") == 1, timeout=20)
    again = call(scripted_server.target, lambda c: c.get_run("cancel-1"))
    assert again.phase == pb.RunState.CANCELLED


@pytest.mark.parametrize("tier", [30.0], indirect=True)
def test_a_run_past_its_deadline_fails_with_that_kind(
    scripted_server: ServeProcess, tier: OpenAIServer
) -> None:
    request = submit("late-1", spec=ONE, tiers=tiers_at(tier, "small"), deadline_s=1.0)
    call(scripted_server.target, lambda c: c.submit_run(request))
    state = call(scripted_server.target, lambda c: c.get_run("late-1", wait_s=30))
    assert state.phase == pb.RunState.FAILED
    assert state.failure == state.result.failure == pb.FAILURE_KIND_DEADLINE
    (solver,) = state.result.agents
    assert solver.failure == pb.FAILURE_KIND_DEADLINE
    assert state.error == state.result.error  # the run's own words: its deadline
    assert wait_for(lambda: tier.count("disconnected") == 1, timeout=20)


@pytest.mark.parametrize("tier", [30.0], indirect=True)
def test_a_full_server_refuses_a_run_and_records_nothing(
    tier: OpenAIServer, service_logs: Path
) -> None:
    server = ServeProcess(
        "--profile", "scripted", "--max-concurrency", "1", "--max-waiting", "0",
        log_dir=service_logs,
    )  # fmt: skip
    try:
        first = submit("full-1", spec=ONE, tiers=tiers_at(tier, "small"))
        assert call(server.target, lambda c: c.submit_run(first)).created
        second = submit("full-2", spec=ONE, tiers=tiers_at(tier, "small"))
        error = status_of(server.target, lambda c: c.submit_run(second))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        missing = status_of(server.target, lambda c: c.get_run("full-2"))
        assert missing.code() == grpc.StatusCode.NOT_FOUND
        call(server.target, lambda c: c.cancel_run("full-1"))
        assert call(server.target, lambda c: c.submit_run(second)).created  # room again
    finally:
        server.stop()


@pytest.mark.parametrize("tier", [2.0], indirect=True)
def test_the_call_timeout_bounds_each_call_to_a_runs_tier_endpoints(
    tier: OpenAIServer, service_logs: Path
) -> None:
    """`lemon serve --call-timeout-s`: a tier endpoint that answers in 2 s fails every attempt
    at 0.5 s (saying it timed out) and answers at 30 s (`lemon cluster` serves with 600: its
    CPU tiers can take minutes)."""
    for timeout, run_id in (("0.5", "short-timeout"), ("30", "long-timeout")):
        server = ServeProcess(
            "--profile", "scripted", "--max-attempts", "2", "--call-timeout-s", timeout,
            log_dir=service_logs,
        )  # fmt: skip
        try:
            request = submit(run_id, spec=ONE, tiers=tiers_at(tier, "small"))
            call(server.target, lambda c, r=request: c.submit_run(r))
            done = call(server.target, lambda c, i=run_id: c.get_run(i, wait_s=60))
        finally:
            server.stop()
        if run_id == "short-timeout":
            assert done.phase == pb.RunState.FAILED
            assert "timeout calling" in done.result.error, done.result.error
        else:
            assert done.phase == pb.RunState.SUCCEEDED, done.result.error
    assert tier.count("start") == 3  # two attempts cut short, then one answered
