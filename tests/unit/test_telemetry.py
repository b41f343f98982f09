"""OpenTelemetry spans of runs, recorded by the SDK's own in-memory exporter: run, agents,
every attempt (retries included), tool calls, skipped and reused agents, cancellation; and the
off path, which loads no OpenTelemetry module at all."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from lemon import telemetry
from lemon.backends.base import Backend
from lemon.backends.scripted import ScriptedBackend, ScriptedConfig, ScriptedRule
from lemon.engine import AgentStatus, CallCache, ExecutionOptions, RunStatus, execute
from lemon.spec import Capacity, parse_spec
from lemon.tasks import COMPUTE_PREFILL

TEAM = """\
agents:
  - {name: planner, role: planner, capacity: small}
  - {name: solver, role: math_solver, capacity: medium, depends_on: [planner]}
  - {name: checker, role: verifier, capacity: large, depends_on: [solver]}
"""


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.use_provider(provider)
    yield exporter
    telemetry.use_provider(None)


def backends(*rules: ScriptedRule, latency: float = 0.0) -> dict[Capacity, Backend]:
    config = ScriptedConfig(latency_s=latency, rules=(*rules, ScriptedRule()))
    return {tier: ScriptedBackend(config, tier=tier.value) for tier in Capacity}


def fast() -> ExecutionOptions:
    return ExecutionOptions(backoff_s=0.001, backoff_max_s=0.001)


def named(found: list[ReadableSpan], prefix: str) -> dict[str, ReadableSpan]:
    return {str(s.attributes["gen_ai.agent.name"]): s for s in found if s.name.startswith(prefix)}  # type: ignore[index]


def children(found: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    return [s for s in found if s.parent is not None and s.parent.span_id == parent.context.span_id]


def test_a_run_is_one_trace_with_a_span_per_agent_and_per_attempt(
    spans: InMemorySpanExporter,
) -> None:
    parsed = parse_spec(TEAM)
    flaky = ScriptedRule(match="^You are a careful mathematician", fail="transient", fail_times=1)
    result = asyncio.run(
        execute(parsed.spec, task="2+2?", backends=backends(flaky), options=fast(), origin="t.yaml")
    )
    assert result.status is RunStatus.SUCCEEDED
    found = list(spans.get_finished_spans())
    assert len({s.context.trace_id for s in found}) == 1
    (run,) = [s for s in found if s.name == "lemon.run"]
    assert run.parent is None
    assert run.attributes is not None
    assert (
        run.attributes["lemon.spec.hash"] == hashlib.sha256(result.spec.encode()).hexdigest()[:16]
    )
    assert run.attributes["lemon.spec.origin"] == "t.yaml"
    assert run.attributes["lemon.spec.output"] == "checker"
    assert run.attributes["gen_ai.usage.input_tokens"] == result.prompt_tokens
    assert run.attributes["gen_ai.usage.output_tokens"] == result.completion_tokens
    assert run.attributes["lemon.run.calls"] == result.calls == 4
    agents = named(found, "invoke_agent ")
    assert sorted(agents) == ["checker", "planner", "solver"]
    for reported in result.agents:
        span = agents[reported.name]
        assert span.parent is not None
        assert span.parent.span_id == run.context.span_id
        assert span.attributes is not None
        assert span.attributes["gen_ai.usage.input_tokens"] == reported.prompt_tokens
        assert span.attributes["gen_ai.usage.output_tokens"] == reported.completion_tokens
        assert span.attributes["lemon.agent.tier"] == reported.capacity
        assert span.attributes["lemon.agent.attempts"] == reported.attempts
        assert span.status.status_code is not StatusCode.ERROR
        attempts = sorted(children(found, span), key=lambda s: s.start_time or 0)
        assert len(attempts) == reported.attempts
        assert [a.attributes["lemon.attempt"] for a in attempts] == list(  # type: ignore[index]
            range(1, reported.attempts + 1)
        )
    solver_attempts = sorted(children(found, agents["solver"]), key=lambda s: s.start_time or 0)
    first, second = solver_attempts
    assert first.status.status_code is StatusCode.ERROR
    assert first.attributes is not None
    assert first.attributes["error.type"] == "transient"
    assert "scripted failure" in (first.status.description or "")
    assert second.status.status_code is not StatusCode.ERROR
    assert second.attributes is not None
    assert second.attributes["gen_ai.usage.output_tokens"] > 0


def test_failed_and_skipped_agents_have_failed_spans(spans: InMemorySpanExporter) -> None:
    broken = ScriptedRule(match="^You are a careful mathematician", fail="permanent")
    result = asyncio.run(
        execute(parse_spec(TEAM).spec, task="2+2?", backends=backends(broken), options=fast())
    )
    assert result.status is RunStatus.FAILED
    found = list(spans.get_finished_spans())
    agents = named(found, "invoke_agent ")
    assert agents["planner"].status.status_code is not StatusCode.ERROR
    for name, status in (("solver", "failed"), ("checker", "skipped")):
        assert agents[name].status.status_code is StatusCode.ERROR
        assert agents[name].attributes is not None
        assert agents[name].attributes["lemon.agent.status"] == status
    assert children(found, agents["checker"]) == []  # skipped: no model call
    (run,) = [s for s in found if s.name == "lemon.run"]
    assert run.status.status_code is StatusCode.ERROR
    assert "solver" in (run.status.description or "")


def test_reused_answers_make_no_model_call_span(spans: InMemorySpanExporter) -> None:
    cache = CallCache()
    spec = parse_spec(TEAM).spec
    asyncio.run(execute(spec, task="2+2?", backends=backends(), cache=cache))
    spans.clear()
    asyncio.run(execute(spec, task="2+2?", backends=backends(), cache=cache))
    found = list(spans.get_finished_spans())
    agents = named(found, "invoke_agent ")
    assert all(
        s.attributes is not None and s.attributes["lemon.agent.reused"] for s in agents.values()
    )
    assert not [s for s in found if s.name.startswith("chat ")]


def test_a_tool_call_has_its_own_span(spans: InMemorySpanExporter) -> None:
    pot = (
        "agents:\n  - {name: coder, role: programmer, capacity: large}\n"
        "  - {name: run, role: python_executor, capacity: small, depends_on: [coder]}\n"
    )
    options = ExecutionOptions(prefill={"programmer": COMPUTE_PREFILL})
    coder = ScriptedRule(match="", output="6 * 7\n```")
    result = asyncio.run(
        execute(parse_spec(pot).spec, task="6*7?", backends=backends(coder), options=options)
    )
    assert result.answer == "42"
    found = list(spans.get_finished_spans())
    (tool,) = [s for s in found if s.name == "execute_tool python"]
    run_agent = named(found, "invoke_agent ")["run"]
    assert tool.parent is not None
    assert tool.parent.span_id == run_agent.context.span_id
    assert tool.attributes is not None
    assert tool.attributes["gen_ai.tool.name"] == "python"


def test_a_cancelled_run_ends_every_span(spans: InMemorySpanExporter) -> None:
    async def cancel_midway() -> None:
        run = asyncio.ensure_future(
            execute(parse_spec(TEAM).spec, task="2+2?", backends=backends(latency=0.2))
        )
        await asyncio.sleep(0.3)  # the planner answered; the solver's call is in flight
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(cancel_midway())
    found = list(spans.get_finished_spans())
    (run,) = [s for s in found if s.name == "lemon.run"]
    assert run.status.status_code is StatusCode.ERROR
    assert run.attributes is not None
    assert run.attributes["error.type"] == "cancelled"
    agents = named(found, "invoke_agent ")
    assert sorted(agents) == ["checker", "planner", "solver"]
    assert agents["solver"].attributes is not None
    assert agents["solver"].attributes["lemon.agent.status"] == AgentStatus.FAILED.value
    (chat,) = children(found, agents["solver"])
    assert chat.attributes is not None
    assert chat.attributes["error.type"] == "cancelled"


def test_trace_headers_carry_the_current_call(spans: InMemorySpanExporter) -> None:
    span = telemetry.start_span("outer", kind="client")
    assert span is not None
    with span.current():
        headers = telemetry.trace_headers()
    span.end()
    (recorded,) = spans.get_finished_spans()
    context = recorded.context
    version, trace_id, span_id, _flags = headers["traceparent"].split("-")
    assert (version, trace_id, span_id) == (
        "00",
        f"{context.trace_id:032x}",
        f"{context.span_id:016x}",
    )
    with telemetry.remote_parent([("traceparent", headers["traceparent"])]):
        child = telemetry.start_span("inner", kind="server")
    assert child is not None
    child.end()
    inner = spans.get_finished_spans()[-1]
    assert inner.parent is not None
    assert inner.parent.span_id == context.span_id


@pytest.mark.parametrize(
    ("env", "exporters"),
    [
        ({}, ()),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, ("otlp",)),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, ()),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, ("otlp",)),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, ("otlp",)),
        ({"OTEL_TRACES_EXPORTER": "otlp,console"}, ("otlp", "console")),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, ()),
    ],
)
def test_the_standard_variables_turn_tracing_on(
    env: dict[str, str], exporters: tuple[str, ...]
) -> None:
    assert telemetry.requested_exporters(env) == exporters


def _setup_in_subprocess(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = "from lemon import telemetry\ntelemetry.setup()\n"
    return subprocess.run(
        [sys.executable, "-c", code], env={**env, "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"OTEL_TRACES_EXPORTER": "jaeger"}, "unknown exporter 'jaeger'"),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "http/protobuf only",
        ),
    ],
)
def test_unusable_settings_are_refused_with_the_variable_named(
    env: dict[str, str], message: str
) -> None:
    proc = _setup_in_subprocess(env)
    assert proc.returncode != 0
    assert "TelemetryError" in proc.stderr
    assert message in proc.stderr


def test_tracing_off_loads_no_opentelemetry_module() -> None:
    """The off path costs nothing: a whole run, and an HTTP backend's headers, without
    OpenTelemetry ever imported."""
    code = (
        "import asyncio, json, sys\n"
        "from lemon import telemetry\n"
        "from lemon.backends.scripted import ScriptedBackend\n"
        "from lemon.backends.openai import OpenAIBackend\n"
        "from lemon.engine import execute\n"
        "from lemon.spec import Capacity, parse_spec\n"
        f"spec = parse_spec({TEAM!r}).spec\n"
        "backends = {t: ScriptedBackend(tier=t.value) for t in Capacity}\n"
        "result = asyncio.run(execute(spec, task='2+2?', backends=backends))\n"
        "print(json.dumps([result.status.value, telemetry.tracing(), telemetry.trace_headers(),"
        " sorted(m for m in sys.modules if m.startswith('opentelemetry'))]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env={"PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    status, on, headers, loaded = json.loads(proc.stdout)
    assert (status, on, headers, loaded) == ("succeeded", False, {}, [])
