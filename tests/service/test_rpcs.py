"""Every RPC of lemon.v1.Orchestrator against a real `lemon serve` process on loopback
(the scripted test double as the engine's backend), and the bad requests."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest

from lemon.budget import WORKER_MAX_TOKENS
from lemon.policy.fixed import best_teams
from lemon.spec import compile_spec, parse_spec
from lemon_api.client import ClientConfig, LemonClient, run_options
from lemon_api.v1 import orchestrator_pb2 as pb
from tests.conftest import ROOT
from tests.service.conftest import ServeProcess, scripted_profile

T = TypeVar("T")
TASK = "Natalia sold 48 clips in April and half as many in May. How many clips in total?"
SPEC = (ROOT / "examples" / "specs" / "02-plan-solve-verify.yaml").read_text()


def call(target: str, action: Callable[[LemonClient], Awaitable[T]], **config: Any) -> T:
    async def go() -> T:
        async with LemonClient(ClientConfig(target=target, **config)) as client:
            return await action(client)

    return asyncio.run(go())


def status_of(target: str, action: Callable[[LemonClient], Awaitable[Any]]) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        call(target, action)
    return info.value


def test_orchestrate_without_a_spec_runs_lemon_runs_default_and_says_so(
    scripted_server: ServeProcess,
) -> None:
    """No spec, no policy, no server default: LEMON's built-in default writes the team, the
    same spec `lemon run` runs for the task (not the template team), and the response says so."""
    response = call(scripted_server.target, lambda c: c.orchestrate(TASK, request_id="req-d"))
    cli = subprocess.run(
        [str(ROOT / ".venv/bin/lemon"), "run", "--task", TASK, "--profile", "scripted", "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    local = json.loads(cli.stdout)
    assert response.status == "succeeded"
    assert response.spec_choice == pb.SPEC_CHOICE_BUILTIN_DEFAULT
    assert local["spec_choice"] == "builtin-default"
    assert response.spec_origin == local["spec_origin"]
    default = best_teams()["math"]["team"]  # fixed_teams.json: the tables choose it
    assert response.spec_origin.startswith(f"best fixed team for math tasks: {default} (")
    assert response.spec == local["spec"]
    assert [(a.name, a.role, a.capacity) for a in response.agents] == [
        (a["name"], a["role"], a["capacity"]) for a in local["agents"]
    ]
    assert "template" not in response.spec_origin
    # the cost, in the one unit every cost is shown in, as `lemon run` prices it
    assert response.cost_unit == local["cost_unit"] == "tier-priced tokens"
    assert response.cost == pytest.approx(local["priced_tokens"])
    assert response.cost > 0


def test_orchestrate_returns_spec_answer_tokens_and_timings(scripted_server: ServeProcess) -> None:
    response = call(
        scripted_server.target,
        lambda c: c.orchestrate(TASK, request_id="req-1", options=run_options(template="default")),
    )
    assert response.request_id == "req-1"
    assert response.status == "succeeded"
    assert response.answer == "The answer is 42."
    assert response.spec_origin.startswith("template policy")
    assert response.spec_choice == pb.SPEC_CHOICE_POLICY
    assert "agents:" in response.spec
    assert "scripted test double" in response.profile_note
    assert len(response.agents) >= 2
    assert all(a.status == "succeeded" and a.attempts == 1 for a in response.agents)
    spent = sum(a.prompt_tokens + a.completion_tokens for a in response.agents)
    assert response.tokens.total == spent
    assert response.tokens.total > 0
    assert response.wall_s > 0
    # The served critical path is the compiled spec's: the maths template's whole chain,
    # planner -> solver -> verifier, ending at the output agent.
    dag = compile_spec(parse_spec(response.spec, source="response.spec").spec)
    assert list(response.critical_path) == list(dag.critical_path)
    assert len(dag.critical_path) == len(response.agents) == 3
    assert dag.critical_path[-1] == dag.output


def test_request_ids_are_generated_when_absent(scripted_server: ServeProcess) -> None:
    first = call(scripted_server.target, lambda c: c.orchestrate(TASK))
    second = call(scripted_server.target, lambda c: c.orchestrate(TASK))
    assert len(first.request_id) == 32
    assert first.request_id != second.request_id


def test_stream_sends_spec_agents_and_result_in_order(scripted_server: ServeProcess) -> None:
    async def collect(client: LemonClient) -> list[pb.RunEvent]:
        return [event async for event in client.stream(TASK, request_id="s-1")]

    events = call(scripted_server.target, collect)
    kinds = [event.WhichOneof("event") for event in events]
    assert kinds[0] == "spec_ready"
    assert kinds[-1] == "result"
    result = events[-1].result
    assert result.request_id == "s-1"
    assert result.status == "succeeded"
    ready = events[0].spec_ready
    dag = compile_spec(parse_spec(result.spec, source="result.spec").spec)
    assert ready.output == dag.output
    assert [list(level.agents) for level in ready.levels] == [list(lv) for lv in dag.levels]
    assert sorted(dag.order) == sorted(a.name for a in result.agents)
    started = [e.agent_started.agent for e in events if e.HasField("agent_started")]
    finished = {
        e.agent_finished.agent: e.agent_finished for e in events if e.HasField("agent_finished")
    }
    assert sorted(started) == sorted(finished) == sorted(a.name for a in result.agents)
    for agent in result.agents:  # the events carry the same tokens as the result
        assert finished[agent.name].completion_tokens == agent.completion_tokens
        assert finished[agent.name].prompt_tokens == agent.prompt_tokens
    order = [(e.WhichOneof("event"), getattr(e, e.WhichOneof("event")).agent) for e in events[1:-1]]
    for name in started:  # each agent starts before it finishes
        assert order.index(("agent_started", name)) < order.index(("agent_finished", name))
    times = [event.t for event in events]
    assert times == sorted(times)


def test_execute_spec_runs_the_given_team(scripted_server: ServeProcess) -> None:
    response = call(
        scripted_server.target,
        lambda c: c.execute(TASK, SPEC, source="team.yaml", options=run_options(max_tokens=16)),
    )
    assert response.status == "succeeded"
    assert response.spec_origin == "team.yaml"
    assert [a.name for a in response.agents] == ["planner", "solver", "checker"]


def test_execute_invalid_spec_is_invalid_argument_with_located_errors(
    scripted_server: ServeProcess,
) -> None:
    bad = (ROOT / "examples" / "k8s" / "03-invalid-reference.yaml").read_text()
    error = status_of(scripted_server.target, lambda c: c.execute(TASK, bad, source="bad.yaml"))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "bad.yaml:15:7: 'solver' depends on unknown agent 'ghost'" in error.details()


def test_validate_spec_reports_located_issues(scripted_server: ServeProcess) -> None:
    good = call(scripted_server.target, lambda c: c.validate(SPEC, source="good.yaml"))
    assert good.valid
    assert list(good.agents) == ["planner", "solver", "checker"]
    assert good.output == "checker"
    broken = "agents:\n  - name: a\n    role: nosuchrole\n    capacity: huge\n"
    bad = call(scripted_server.target, lambda c: c.validate(broken, source="x.yaml"))
    assert not bad.valid
    assert {(e.line, e.column) for e in bad.errors} >= {(3, 11), (4, 15)}
    assert all(e.rendered.startswith(f"x.yaml:{e.line}:{e.column}: ") for e in bad.errors)


@pytest.mark.parametrize(
    ("request_kwargs", "code", "fragment"),
    [
        ({"task": "   "}, grpc.StatusCode.INVALID_ARGUMENT, "task: must not be empty"),
        (
            {"task": TASK, "options": run_options(template="nosuch")},
            grpc.StatusCode.INVALID_ARGUMENT,
            "unknown variant 'nosuch'",
        ),
        ({"task": "x" * 2001}, grpc.StatusCode.RESOURCE_EXHAUSTED, "the limit is 2000"),
        (
            {"task": TASK, "options": run_options(max_tokens=100_000)},
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"at most {WORKER_MAX_TOKENS}",
        ),
        ({"task": "y" * 70_000}, grpc.StatusCode.RESOURCE_EXHAUSTED, "message larger than max"),
    ],
    ids=["empty-task", "unknown-template", "task-too-long", "too-many-tokens", "message-too-big"],
)
def test_bad_requests(
    scripted_server: ServeProcess,
    request_kwargs: dict[str, Any],
    code: grpc.StatusCode,
    fragment: str,
) -> None:
    task = request_kwargs.pop("task")
    error = status_of(scripted_server.target, lambda c: c.orchestrate(task, **request_kwargs))
    assert error.code() == code
    assert fragment in error.details()


def test_full_server_refuses_instead_of_queueing(service_logs: Path) -> None:
    """One run at a time, none waiting: a second concurrent call is RESOURCE_EXHAUSTED at once."""
    profiles = scripted_profile(service_logs / "slow.yaml", latency=1.0)
    server = ServeProcess(
        "--profile", "slowscripted", "--profiles", str(profiles),
        "--max-concurrency", "1", "--max-waiting", "0",
        log_dir=service_logs,
    )  # fmt: skip
    try:

        async def two(client: LemonClient) -> list[Any]:
            first = asyncio.ensure_future(client.execute(TASK, SPEC))
            await asyncio.sleep(0.3)  # the first is running
            second = await asyncio.gather(client.execute(TASK, SPEC), return_exceptions=True)
            return [await first, *second]

        first, second = call(server.target, two)
        assert first.status == "succeeded"
        assert isinstance(second, grpc.aio.AioRpcError)
        assert second.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "server busy" in second.details()
        again = call(server.target, lambda c: c.execute(TASK, SPEC))  # capacity came back
        assert again.status == "succeeded"
    finally:
        server.stop()


def test_health_is_serving_for_the_server_and_the_service(scripted_server: ServeProcess) -> None:
    assert call(scripted_server.target, lambda c: c.health()) == "SERVING"
    assert call(scripted_server.target, lambda c: c.health("lemon.v1.Orchestrator")) == "SERVING"
    error = status_of(scripted_server.target, lambda c: c.health("no.such.Service"))
    assert error.code() == grpc.StatusCode.NOT_FOUND


def test_sigterm_drains_a_running_call_and_exits_cleanly(service_logs: Path) -> None:
    """SIGTERM: health stops saying SERVING, the call in flight still gets its answer, exit 0."""
    profiles = scripted_profile(service_logs / "drain.yaml", latency=0.5, name="drain")
    server = ServeProcess("--profile", "drain", "--profiles", str(profiles), log_dir=service_logs)

    async def during_shutdown() -> Any:
        async with LemonClient(ClientConfig(target=server.target)) as client:
            running = asyncio.ensure_future(client.execute(TASK, SPEC, timeout=30))
            await asyncio.sleep(0.3)
            server.process.terminate()
            return await running

    try:
        response = asyncio.run(during_shutdown())
        assert response.status == "succeeded"
        assert server.process.wait(timeout=15) == 0
        assert "Traceback" not in server.log.read_text()
    finally:
        server.stop()
