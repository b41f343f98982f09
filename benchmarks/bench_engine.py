"""Engine overhead: the executor against a sequential one, on a 64-agent layered DAG.

The scripted backend (a test double, not a model) answers every call after a fixed latency L.
The DAG has 8 levels of width 8, each agent reading two agents of the level before; its
critical path is 8 agents, so an ideal executor takes 8 × L. ``ratio`` is the executor's wall
time over 8 × L (goal ≤ 1.05). Side by side: a sequential executor that awaits agents one by
one in topological order (as the G-Designer code line does), whose ideal is 64 × L. The
engine's own time per run (``engine_own_s``) is the executor's wall time with L = 0 (the
scripted backend answering at once): the part of ``executor_wall_s`` that is not waiting on
calls; the rest above the ideal is timer and scheduling overshoot.

Run: ``lemon bench engine --json``.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

import harness
from lemon.backends.base import Backend
from lemon.backends.scripted import ScriptedBackend, ScriptedConfig
from lemon.engine.executor import ExecutionOptions, build_request, execute
from lemon.engine.results import AgentResult
from lemon.spec import Capacity, Spec, compile_spec, parse_spec
from lemon.spec.roles import builtin_roles

ROLES = ["planner", "math_solver", "verifier", "critic", "aggregator", "knowledge_expert"]


def layered_spec(levels: int = 8, width: int = 8) -> Spec:
    lines = ["agents:"]
    tiers = ["small", "medium", "large"]
    for level in range(levels):
        for slot in range(width):
            i = level * width + slot
            lines.append(f"  - name: a{i}")
            lines.append(f"    role: {ROLES[i % len(ROLES)]}")
            lines.append(f"    capacity: {tiers[i % 3]}")
            if level:
                prev = sorted({(level - 1) * width + s for s in (slot, (slot + 1) % width)})
                lines.append(f"    depends_on: [{', '.join(f'a{p}' for p in prev)}]")
    last = [f"a{(levels - 1) * width + s}" for s in range(width)]
    text = "\n".join(lines) + f"\noutput: {last[0]}\n"
    return parse_spec(text).spec


async def sequential(spec: Spec, backends: dict[Capacity, Backend], task: str) -> None:
    """The baseline: one agent at a time, in topological order."""
    options = ExecutionOptions()
    roles = builtin_roles()
    results: dict[str, AgentResult] = {}
    for name in compile_spec(spec).order:
        agent = next(a for a in spec.agents if a.name == name)
        request = build_request(
            agent, spec=spec, task=task, roles=roles, results=results, options=options
        )
        generation = await backends[agent.capacity].generate(request)
        results[name] = AgentResult(name, agent.role, agent.capacity.value, output=generation.text)


def main(argv: list[str] | None = None) -> int:
    bench = harness.Harness("engine", __doc__, repeats=5)
    bench.parser.add_argument("--latency", type=float, default=0.05, help="L, seconds per call")
    args = bench.parse(argv)
    spec = layered_spec()
    config = ScriptedConfig(latency_s=args.latency)
    backends: dict[Capacity, Backend] = {
        tier: ScriptedBackend(config, tier=tier.value) for tier in Capacity
    }
    critical = compile_spec(spec).critical_path_length
    options = ExecutionOptions(concurrency=dict.fromkeys(Capacity, 64))

    def timed(coro_factory: Any) -> float:
        started = time.perf_counter()
        asyncio.run(coro_factory())
        return time.perf_counter() - started

    parallel, serial = [], []
    for _ in range(args.repeats):
        parallel.append(timed(lambda: execute(spec, task="t", backends=backends, options=options)))
        serial.append(timed(lambda: sequential(spec, backends, "t")))
    instant: dict[Capacity, Backend] = {
        tier: ScriptedBackend(ScriptedConfig(latency_s=0.0), tier=tier.value) for tier in Capacity
    }
    own = statistics.median(
        timed(lambda: execute(spec, task="t", backends=instant, options=options))
        for _ in range(args.repeats)
    )
    wall = statistics.median(parallel)
    seq = statistics.median(serial)
    ideal = critical * args.latency
    result = {
        "benchmark": "engine",
        "backend": "scripted test double (fixed latency)",
        "agents": len(spec.agents),
        "critical_path": critical,
        "latency_s": args.latency,
        "executor_wall_s": round(wall, 4),
        "ideal_s": round(ideal, 4),
        "ratio": harness.ratio(wall, ideal),
        "goal": "ratio <= 1.05",
        "engine_own_s": round(own, 4),
        "sequential_wall_s": round(seq, 4),
        "sequential_ratio": harness.ratio(seq, ideal),
        "speedup_over_sequential": harness.ratio(seq, wall, digits=2),
        "repeats": args.repeats,
    }
    return bench.finish(
        args,
        result,
        text=lambda r: (
            f"executor {wall:.3f} s vs ideal {ideal:.3f} s (ratio {r['ratio']}); "
            f"sequential {seq:.3f} s ({r['speedup_over_sequential']}x slower)"
        ),
    )


if __name__ == "__main__":
    raise SystemExit(main())
