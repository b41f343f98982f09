"""Spec pipeline throughput: parse + validate + compile, side by side with a bare YAML load.

For an 8-agent and a 64-agent spec (canonical layout, duties on half the agents, a layered
DAG), it times ``parse_spec`` + ``compile_spec`` and ``yaml.load`` of the same text with the
same loader class (libyaml's C loader where available), interleaving the two in rounds so that
the machine's swings hit both alike. The headline ``ratio`` is pipeline time over bare YAML
time for the 64-agent spec (the larger of the two is also reported per case); the goal is at
most 2.

Run: ``lemon bench spec --json`` (or ``python benchmarks/bench_spec.py --json``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import yaml

import harness
from lemon.spec import ValidationOptions, builtin_roles, compile_spec, parse_spec

LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
ROLES = ["planner", "math_solver", "verifier", "critic", "aggregator", "knowledge_expert"]
TIERS = ["small", "medium", "large"]


def make_spec(agents: int, width: int = 4) -> str:
    """Layers of ``width`` workers, each reading up to two agents of the layer before, then
    one aggregator reading the whole last layer (so every agent feeds the output)."""
    workers = agents - 1
    lines = ["agents:"]
    for i in range(workers):
        layer, slot = divmod(i, width)
        lines.append(f"  - name: agent-{i}")
        lines.append(f"    role: {ROLES[i % len(ROLES)]}")
        if i % 2 == 0:
            lines.append(f'    duties: "Handle part {slot} of step {layer}; report numbers."')
        lines.append(f"    capacity: {TIERS[i % 3]}")
        if layer:
            prev = sorted({(layer - 1) * width + s for s in (slot, (slot + 1) % width)})
            lines.append(f"    depends_on: [{', '.join(f'agent-{p}' for p in prev)}]")
    last = range((workers - 1) // width * width, workers)
    lines.append("  - name: final")
    lines.append("    role: aggregator")
    lines.append("    capacity: large")
    lines.append(f"    depends_on: [{', '.join(f'agent-{p}' for p in last)}]")
    lines.append("output: final")
    return "\n".join(lines) + "\n"


def _time(fn: Callable[[], object], number: int) -> float:
    started = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - started) / number


def measure(agents: int, *, rounds: int, budget_s: float) -> dict[str, Any]:
    text = make_spec(agents)
    options = ValidationOptions(max_agents=max(64, agents), roles=builtin_roles())

    def pipeline() -> object:
        parsed = parse_spec(text, options=options)
        return compile_spec(parsed.spec, output=parsed.output)

    def bare() -> object:
        return yaml.load(text, Loader=LOADER)  # LOADER is a safe loader class

    pipeline()  # warm caches and lazy imports
    bare()
    number = max(1, int(budget_s / rounds / max(_time(pipeline, 3), 1e-6) / 2))
    pipe_times, yaml_times = [], []
    for _ in range(rounds):
        pipe_times.append(_time(pipeline, number))
        yaml_times.append(_time(bare, number))
    pipe_s, yaml_s = statistics.median(pipe_times), statistics.median(yaml_times)
    return {
        "agents": agents,
        "bytes": len(text.encode()),
        "pipeline_specs_per_s": round(1 / pipe_s, 1),
        "yaml_specs_per_s": round(1 / yaml_s, 1),
        "pipeline_us": round(pipe_s * 1e6, 1),
        "yaml_us": round(yaml_s * 1e6, 1),
        "ratio": harness.ratio(pipe_s, yaml_s, digits=3),
        "rounds": rounds,
        "iterations_per_round": number,
    }


def main(argv: list[str] | None = None) -> int:
    bench = harness.Harness("spec", __doc__, rounds=15)
    bench.parser.add_argument("--seconds", type=float, default=6.0, help="time budget per case")
    args = bench.parse(argv)
    cases = [measure(n, rounds=args.rounds, budget_s=args.seconds) for n in (8, 64)]
    result = {
        "benchmark": "spec",
        "loader": LOADER.__name__,
        "baseline": "yaml.load (same loader) of the same text",
        "ratio": cases[-1]["ratio"],
        "max_ratio": max(case["ratio"] for case in cases),
        "goal": "ratio <= 2",
        "cases": cases,
    }
    return bench.finish(
        args,
        result,
        text=lambda r: "\n".join(
            f"{case['agents']:>3} agents: pipeline {case['pipeline_specs_per_s']:>8} specs/s, "
            f"yaml {case['yaml_specs_per_s']:>8} specs/s, ratio {case['ratio']}"
            for case in r["cases"]
        ),
    )


if __name__ == "__main__":
    raise SystemExit(main())
