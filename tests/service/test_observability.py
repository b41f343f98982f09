"""Traces and metrics of a real ``lemon serve`` process: the spans a run exports over OTLP to a real
receiver on loopback (testing/lemon_testing/otlp_receiver.py), continuing the caller's trace and
reaching the tier's HTTP server; ``/metrics`` scraped over HTTP and parsed by prometheus_client's
own parser, moving as calls are made."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from lemon_api.client import LemonClient
from lemon_api.v1 import orchestrator_pb2 as pb
from lemon_api.v1 import orchestrator_pb2_grpc as pb_grpc
from lemon_testing.otlp_receiver import OTLPReceiver
from tests.service.conftest import (
    OpenAIServer,
    ServeProcess,
    free_port,
    scrape,
    scripted_profile,
)
from tests.service.test_rpcs import SPEC, TASK, call

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


def wait_for(check: Callable[[], Any], *, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def execute_with_traceparent(target: str) -> pb.RunResponse:
    """ExecuteSpec as a traced caller sends it: W3C ``traceparent`` in the call's metadata."""

    async def go() -> pb.RunResponse:
        async with grpc.aio.insecure_channel(target) as channel:
            stub = pb_grpc.OrchestratorStub(channel)  # type: ignore[no-untyped-call]
            request = pb.ExecuteSpecRequest(task=TASK, spec=SPEC, source="team.yaml")
            metadata = (("traceparent", f"00-{TRACE_ID}-{PARENT_ID}-01"),)
            response: pb.RunResponse = await stub.ExecuteSpec(
                request, metadata=metadata, timeout=60
            )
            return response

    return asyncio.run(go())


def test_a_run_through_lemon_serve_is_one_trace_matching_its_agents_and_tokens(
    service_logs: Path, otlp_receiver: OTLPReceiver
) -> None:
    tier = OpenAIServer(service_logs, latency=0.05)
    profiles = tier.profile_file(service_logs / f"traced-{tier.port}.yaml")
    server = ServeProcess(
        "--profile", "httptiers", "--profiles", str(profiles),
        log_dir=service_logs, env=otlp_receiver.env(service="lemon-serve-test"),
    )  # fmt: skip
    try:
        response = execute_with_traceparent(server.target)
        assert response.status == "succeeded"
        names = [agent.name for agent in response.agents]
        # every span the test reads: they end (and are exported, in batches) at different
        # times, the RPC's server span last, after the response has reached the caller
        spans = wait_for(
            lambda: (
                (found := otlp_receiver.spans())
                and sum(s["name"].startswith("invoke_agent ") for s in found) == len(names)
                and sum(s["name"].startswith("chat ") for s in found) >= len(names)
                and any(s["name"] == "lemon.run" for s in found)
                and any(s["name"] == "lemon.v1.Orchestrator/ExecuteSpec" for s in found)
                and found
            ),
            timeout=30,
            what="the run's spans at the OTLP receiver",
        )
    finally:
        server.stop()
        tier.kill()

    others = [s for s in spans if s["trace_id"] != TRACE_ID]  # the readiness checks' own
    assert {s["name"] for s in others} <= {"grpc.health.v1.Health/Check"}
    spans = [s for s in spans if s["trace_id"] == TRACE_ID]  # one trace: the caller's
    assert {span["service"] for span in spans} == {"lemon-serve-test"}
    by_id = {span["span_id"]: span for span in spans}
    rpc = next(s for s in spans if s["name"] == "lemon.v1.Orchestrator/ExecuteSpec")
    assert rpc["kind"] == "server"
    assert rpc["parent_span_id"] == PARENT_ID
    assert rpc["attributes"]["rpc.grpc.status_code"] == 0
    (run,) = [s for s in spans if s["name"] == "lemon.run"]
    assert run["parent_span_id"] == rpc["span_id"]
    attributes = run["attributes"]
    assert attributes["lemon.spec.hash"] == hashlib.sha256(response.spec.encode()).hexdigest()[:16]
    assert attributes["lemon.spec.origin"] == "team.yaml"
    assert attributes["lemon.spec.agents"] == len(names)
    assert attributes["lemon.run.status"] == "succeeded"
    assert attributes["gen_ai.usage.input_tokens"] == response.tokens.prompt
    assert attributes["gen_ai.usage.output_tokens"] == response.tokens.completion

    agents = {
        s["attributes"]["gen_ai.agent.name"]: s
        for s in spans
        if s["name"].startswith("invoke_agent ")
    }
    assert sorted(agents) == sorted(names)
    for reported in response.agents:
        span = agents[reported.name]
        assert span["parent_span_id"] == run["span_id"]
        got = span["attributes"]
        assert got["lemon.agent.role"] == reported.role
        assert got["lemon.agent.tier"] == reported.capacity
        assert got["gen_ai.request.model"] == reported.model
        assert got["gen_ai.usage.input_tokens"] == reported.prompt_tokens
        assert got["gen_ai.usage.output_tokens"] == reported.completion_tokens
        assert got["lemon.agent.attempts"] == reported.attempts == 1
        assert got["lemon.agent.reused"] is False
        assert got["lemon.agent.status"] == "succeeded"
        (chat,) = [s for s in spans if s["parent_span_id"] == span["span_id"]]
        assert chat["kind"] == "client"
        assert chat["name"].startswith("chat ")
        assert chat["attributes"]["gen_ai.usage.input_tokens"] == reported.prompt_tokens
        assert chat["attributes"]["lemon.attempt"] == 1
    for span in spans:  # every span hangs from the caller's span through its parents
        node = span
        while node["parent_span_id"] != PARENT_ID:
            node = by_id[node["parent_span_id"]]

    # the tier's HTTP server saw each model call's span as its parent (traceparent header)
    sent = [line.split()[1] for line in tier.events() if line.startswith("traceparent ")]
    chats = {s["span_id"] for s in spans if s["name"].startswith("chat ")}
    assert len(sent) == len(names)
    assert {header.split("-")[1] for header in sent} == {TRACE_ID}
    assert {header.split("-")[2] for header in sent} == chats


def test_tracing_off_sends_no_traceparent_to_the_tiers(service_logs: Path) -> None:
    tier = OpenAIServer(service_logs, latency=0.01)
    profiles = tier.profile_file(service_logs / f"untraced-{tier.port}.yaml")
    server = ServeProcess(
        "--profile", "httptiers", "--profiles", str(profiles), log_dir=service_logs
    )
    try:
        assert execute_with_traceparent(server.target).status == "succeeded"
        assert tier.count("answered") == 3
        assert not [line for line in tier.events() if line.startswith("traceparent ")]
        assert "tracing off" in server.log.read_text()
    finally:
        server.stop()
        tier.kill()


def test_unknown_exporter_refuses_to_start(service_logs: Path) -> None:
    with pytest.raises(RuntimeError, match="unknown exporter 'zipkin'"):
        ServeProcess(
            "--profile", "scripted", log_dir=service_logs, env={"OTEL_TRACES_EXPORTER": "zipkin"}
        )


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_service_metrics_parse_and_move_with_calls(service_logs: Path) -> None:
    profiles = scripted_profile(service_logs / "metered.yaml", latency=0.6, name="metered")
    metrics_port = free_port()
    server = ServeProcess(
        "--profile", "metered", "--profiles", str(profiles), "--metrics-port", str(metrics_port),
        "--max-concurrency", "1", "--max-waiting", "0",
        log_dir=service_logs,
    )  # fmt: skip
    try:
        before = scrape(metrics_port)
        assert value(before, "lemon_service_runs_in_flight") == 0
        assert f"on :{metrics_port}/metrics" in server.log.read_text()

        async def busy(client: LemonClient) -> list[Any]:
            first = asyncio.ensure_future(client.execute(TASK, SPEC, source="m.yaml"))
            await asyncio.sleep(0.3)  # the first run is executing
            during = await asyncio.to_thread(scrape, metrics_port)
            refused = await asyncio.gather(client.execute(TASK, SPEC), return_exceptions=True)
            return [await first, during, *refused]

        response, during, refused = call(server.target, busy)
        bad = call(
            server.target,
            lambda c: asyncio.gather(
                c.execute(TASK, "agents: []", source="x"), return_exceptions=True
            ),
        )
        after = scrape(metrics_port)
    finally:
        server.stop()

    assert response.status == "succeeded"
    assert isinstance(refused, grpc.aio.AioRpcError)
    assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert isinstance(bad[0], grpc.aio.AioRpcError)
    assert value(during, "lemon_service_runs_in_flight") == 1
    method = {
        "grpc_service": "lemon.v1.Orchestrator",
        "grpc_method": "ExecuteSpec",
        "grpc_type": "unary",
    }

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("grpc_server_started_total", **method) == 3
    assert moved("grpc_server_handled_total", **method, grpc_code="OK") == 1
    assert moved("grpc_server_handled_total", **method, grpc_code="RESOURCE_EXHAUSTED") == 1
    assert moved("grpc_server_handled_total", **method, grpc_code="INVALID_ARGUMENT") == 1
    assert moved("grpc_server_handling_seconds_count", **method) == 3
    slow = moved("grpc_server_handling_seconds_count", **method) - moved(
        "grpc_server_handling_seconds_bucket", **method, le="0.5"
    )
    assert slow == 1  # only the run took longer than its agents' 0.6 s latency
    assert moved("lemon_service_admission_refusals_total") == 1
    assert moved("lemon_service_runs_total", status="succeeded") == 1
    assert value(after, "lemon_service_runs_in_flight") == 0
    for tier in ("small", "medium", "large"):
        for kind, field in (("prompt", "prompt_tokens"), ("completion", "completion_tokens")):
            spent = sum(getattr(a, field) for a in response.agents if a.capacity == tier)
            assert moved("lemon_service_tokens_total", tier=tier, kind=kind) == spent
    assert (
        sum(
            moved("lemon_service_tokens_total", tier=t, kind=k)
            for t in ("small", "medium", "large")
            for k in ("prompt", "completion")
        )
        == response.tokens.total
        > 0
    )
    assert value(after, "process_resident_memory_bytes") > 0
