"""Tracing overhead: the executor with OpenTelemetry tracing on against the same with it off.

The workload is ``lemon bench engine``'s: a 64-agent layered DAG (8 levels of width 8) on the
scripted backend (a test double, not a model) answering every call after a fixed latency L. Tracing
on is the real export path: the SDK's TracerProvider with a BatchSpanProcessor and the OTLP/HTTP
exporter, sending to a real OTLP receiver on loopback (testing/lemon_testing/otlp_receiver.py, a
subprocess); every run records 129 spans (the run, 64 agents, 64 model calls). Off is the default:
no provider, every hook one ``is None`` check. The two run side by side in the same process,
alternating which goes first; ``ratio`` is the median wall time on over the median off (goal <=
1.05). ``spans_received`` is what reached the receiver, so "on" is known to have traced.
``off_start_ns`` and ``off_headers_ns`` time the off path's two entry points alone.

Run: ``lemon bench tracing --json``.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import harness
from bench_engine import layered_spec  # the workload, beside this script
from lemon import telemetry
from lemon.backends.base import Backend
from lemon.backends.scripted import ScriptedBackend, ScriptedConfig
from lemon.engine.executor import ExecutionOptions, execute
from lemon.engine.tracing import RunSpans
from lemon.spec import Capacity, compile_spec
from lemon_testing.otlp_receiver import OTLPReceiver


def _provider(endpoint: str) -> object:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "lemon-bench-tracing"}))
    exporter = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _per_call_ns(fn: object, calls: int = 20_000) -> float:
    started = time.perf_counter_ns()
    for _ in range(calls):
        fn()  # type: ignore[operator]
    return (time.perf_counter_ns() - started) / calls


def main(argv: list[str] | None = None) -> int:
    bench = harness.Harness("tracing", __doc__, repeats=15)
    bench.parser.add_argument("--latency", type=float, default=0.05, help="L, seconds per call")
    args = bench.parse(argv)
    spec = layered_spec()
    config = ScriptedConfig(latency_s=args.latency)
    backends: dict[Capacity, Backend] = {
        tier: ScriptedBackend(config, tier=tier.value) for tier in Capacity
    }
    options = ExecutionOptions(concurrency=dict.fromkeys(Capacity, 64))
    critical = compile_spec(spec).critical_path_length

    def timed() -> float:
        started = time.perf_counter()
        asyncio.run(execute(spec, task="t", backends=backends, options=options))
        return time.perf_counter() - started

    with tempfile.TemporaryDirectory(prefix="lemon-bench-tracing-") as tmp:
        receiver = OTLPReceiver(Path(tmp))
        try:
            provider = _provider(receiver.endpoint)
            telemetry.use_provider(None)
            off_start_ns = _per_call_ns(
                lambda: RunSpans.start(canonical="", origin="", output="", profile="", agents=0)
            )
            off_headers_ns = _per_call_ns(telemetry.trace_headers)
            timed()  # warm-up, off
            off: list[float] = []
            on: list[float] = []
            for repeat in range(args.repeats):
                for side in harness.alternating(repeat, "off", "on"):
                    telemetry.use_provider(provider if side == "on" else None)
                    (on if side == "on" else off).append(timed())
            telemetry.use_provider(None)
            provider.force_flush()  # type: ignore[attr-defined]
            provider.shutdown()  # type: ignore[attr-defined]
            received = receiver.spans()
        finally:
            receiver.kill()
    wall_off, wall_on = statistics.median(off), statistics.median(on)
    agents = len(spec.agents)
    result = {
        "benchmark": "tracing",
        "backend": "scripted test double (fixed latency)",
        "agents": agents,
        "critical_path": critical,
        "latency_s": args.latency,
        "tracing_off_wall_s": round(wall_off, 4),
        "tracing_on_wall_s": round(wall_on, 4),
        "ratio": harness.ratio(wall_on, wall_off),
        "goal": "ratio <= 1.05",
        "per_agent_overhead_us": round((wall_on - wall_off) / agents * 1e6, 1),
        "spans_per_run": 1 + 2 * agents,
        "spans_received": len(received),
        "spans_expected": args.repeats * (1 + 2 * agents),
        "exporter": "OTLP/HTTP (BatchSpanProcessor) to a loopback receiver process",
        "off_start_ns": round(off_start_ns, 1),
        "off_headers_ns": round(off_headers_ns, 1),
        "repeats": args.repeats,
        "off_runs_s": [round(x, 4) for x in off],
        "on_runs_s": [round(x, 4) for x in on],
    }
    return bench.finish(
        args,
        result,
        text=lambda r: (
            f"tracing on {wall_on:.3f} s vs off {wall_off:.3f} s (ratio {r['ratio']}); "
            f"{len(received)} spans exported"
        ),
    )


if __name__ == "__main__":
    raise SystemExit(main())
