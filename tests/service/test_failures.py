"""Failures against real processes: a tier whose HTTP server dies mid-stream, a client that
cancels, a deadline that passes. The tiers run on the ``openai`` backend against a small real
HTTP server (tests/service/openai_server.py) whose call log shows what reached it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import aclosing
from pathlib import Path

import grpc
import pytest

from lemon_api.client import ClientConfig, LemonClient, run_options
from lemon_api.v1 import orchestrator_pb2 as pb
from tests.service.conftest import OpenAIServer, ServeProcess
from tests.service.test_rpcs import TASK

TEMPLATE = run_options(template="default")
"""The template team (planner -> solver -> verifier): three model calls in a chain, so a tier
can die, a client cancel or a deadline pass between them (the default team makes one)."""


@pytest.fixture
def tier(service_logs: Path, request: pytest.FixtureRequest) -> Iterator[OpenAIServer]:
    server = OpenAIServer(service_logs, latency=getattr(request, "param", 2.0))
    yield server
    server.kill()


@pytest.fixture
def service(tier: OpenAIServer, service_logs: Path) -> Iterator[ServeProcess]:
    profiles = tier.profile_file(service_logs / f"http-{tier.port}.yaml")
    server = ServeProcess(
        "--profile", "httptiers", "--profiles", str(profiles), "--max-attempts", "2",
        log_dir=service_logs,
    )  # fmt: skip
    yield server
    server.stop()


def wait_for(condition: object, *, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("tier", [1.0], indirect=True)
def test_tier_dying_mid_stream_ends_the_stream_unavailable(
    tier: OpenAIServer, service: ServeProcess
) -> None:
    seen: list[str] = []

    async def consume() -> grpc.aio.AioRpcError | None:
        async with LemonClient(ClientConfig(target=service.target)) as client:
            try:
                async for event in client.stream(TASK, options=TEMPLATE, timeout=60):
                    kind = event.WhichOneof("event")
                    seen.append(kind)
                    if kind == "agent_started" and seen.count("agent_started") == 2:
                        tier.kill()  # the second agent's call is in flight
            except grpc.aio.AioRpcError as exc:
                return exc
        return None

    started = time.monotonic()
    error = asyncio.run(consume())
    assert error is not None, f"the stream ended without an error: {seen}"
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert "tier" in error.details()
    assert "unavailable" in error.details()
    assert seen[0] == "spec_ready"
    assert seen.count("agent_finished") >= 1  # events before the failure were delivered
    assert "result" not in seen
    assert time.monotonic() - started < 30  # never hangs


@pytest.mark.parametrize("tier", [10.0], indirect=True)
def test_client_cancellation_reaches_the_running_agent(
    tier: OpenAIServer, service: ServeProcess
) -> None:
    async def wait_then_cancel() -> None:
        async with (
            LemonClient(ClientConfig(target=service.target)) as client,
            aclosing(client.stream(TASK, options=TEMPLATE, timeout=60)) as events,
        ):
            async for event in events:
                if event.WhichOneof("event") != "agent_started":
                    continue
                for _ in range(500):  # until the call reached the HTTP server
                    if tier.count("start") == 1:
                        break
                    await asyncio.sleep(0.02)
                break  # closing the stream cancels the call

    asyncio.run(wait_then_cancel())
    assert tier.count("start") == 1, tier.events()
    # the in-flight HTTP call is dropped (the server sees the disconnect before its 10 s answer)
    assert wait_for(lambda: tier.count("disconnected") == 1, timeout=5), tier.events()
    time.sleep(2)
    assert tier.events() == ["start 1", "disconnected 1"]


@pytest.mark.parametrize("tier", [10.0], indirect=True)
def test_deadline_expiry_cancels_the_run(tier: OpenAIServer, service: ServeProcess) -> None:
    """A 4 s deadline while the first agent's call takes 10 s: DEADLINE_EXCEEDED on time, and
    the server drops that HTTP call instead of letting the run go on."""

    async def orchestrate() -> grpc.aio.AioRpcError:
        async with LemonClient(ClientConfig(target=service.target)) as client:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await client.orchestrate(TASK, options=TEMPLATE, timeout=4.0)
            return info.value

    started = time.monotonic()
    error = asyncio.run(orchestrate())
    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - started < 5.0
    assert tier.count("start") == 1, tier.events()  # the call was in flight at the deadline
    assert wait_for(lambda: tier.count("disconnected") == 1, timeout=3), tier.events()
    time.sleep(2)
    assert tier.events() == ["start 1", "disconnected 1"]


@pytest.mark.parametrize("tier", [0.05], indirect=True)
def test_runs_on_a_live_http_tier_succeed(tier: OpenAIServer, service: ServeProcess) -> None:
    async def orchestrate() -> object:
        async with LemonClient(ClientConfig(target=service.target)) as client:
            return await client.orchestrate(TASK, options=TEMPLATE, timeout=30)

    response = asyncio.run(orchestrate())
    assert response.status == "succeeded"  # type: ignore[attr-defined]
    assert tier.count("answered") == len(response.agents)  # type: ignore[attr-defined]


@pytest.mark.parametrize("tier", [0.05], indirect=True)
def test_policy_passthrough_asks_the_policy_endpoint(
    tier: OpenAIServer, service_logs: Path
) -> None:
    """``lemon serve --policy URL``, the server's default policy: Orchestrate asks the policy
    endpoint for the spec (here it answers prose, not a spec, so the run falls back to the
    template policy, and says so)."""
    server = ServeProcess(
        "--profile", "scripted", "--policy", tier.url, "--policy-model", "test",
        "--policy-attempts", "2",
        log_dir=service_logs,
    )  # fmt: skip
    try:

        async def orchestrate() -> object:
            async with LemonClient(ClientConfig(target=server.target)) as client:
                return await client.orchestrate(TASK, timeout=60)

        response = asyncio.run(orchestrate())
        origin = response.spec_origin  # type: ignore[attr-defined]
        assert response.status == "succeeded"  # type: ignore[attr-defined]
        # the server's default policy (step 3 of the resolution order), named as such
        assert origin.startswith("the server's default policy (lemon serve --policy): ")
        assert response.spec_choice == pb.SPEC_CHOICE_DEFAULT_POLICY  # type: ignore[attr-defined]
        assert "fallback after 2 invalid attempt(s)" in origin
        assert tier.count("answered") == 2  # both attempts reached the policy endpoint
    finally:
        server.stop()
