"""What the web view's tests run and read: scripted profiles with delays, specs of several
shapes, and many traces written through the events' own encoder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from lemon.events import AgentFinished, AgentStarted, RunFinished, RunStarted, encode_event

XSS = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
"""A worker answer that must show as text."""


def scripted_profiles(
    path: Path, *, latency_s: float = 0.0, output: str = "The answer is 42.", name: str = "slow"
) -> Path:
    """A profiles file with one scripted profile (the labelled test double) on every tier."""
    tier = {
        "type": "scripted",
        "scripted": {
            "name": name,
            "latency_s": latency_s,
            "rules": [{"match": "", "output": output, "completion_tokens": 7}],
        },
    }
    profile = {
        "name": name,
        "description": "scripted test double with a delay",
        "tiers": {tier_name: dict(tier) for tier_name in ("small", "medium", "large")},
    }
    path.write_text(json.dumps({"profiles": [profile]}), encoding="utf-8")  # YAML, no aliases
    return path


DIAMOND = """\
agents:
  - name: planner
    role: planner
    duties: "List the quantities."
    capacity: small
  - name: solver-a
    role: math_solver
    capacity: medium
    depends_on: [planner]
  - name: solver-b
    role: math_solver
    duties: "Work backwards."
    capacity: large
    depends_on: [planner]
  - name: judge
    role: aggregator
    capacity: large
    depends_on: [planner, solver-a, solver-b]
output: judge
"""


def wide_spec(count: int = 64) -> str:
    """``count`` agents (``count - 1`` a multiple of 9): levels of 9 solvers, each reading two
    agents of the level before, and one aggregator reading the last level."""
    tiers = ("small", "medium", "large")
    agents: list[dict[str, Any]] = []
    width = 9
    levels = (count - 1) // width
    for level in range(levels):
        for i in range(width):
            agent: dict[str, Any] = {
                "name": f"a{level}-{i}",
                "role": "math_solver",
                "duties": f"Part {i} of step {level}: check the figures of the agents before.",
                "capacity": tiers[(level + i) % 3],
            }
            if level:
                agent["depends_on"] = [f"a{level - 1}-{i}", f"a{level - 1}-{(i + 1) % width}"]
            agents.append(agent)
    last = [f"a{levels - 1}-{i}" for i in range(width)]
    agents.append({"name": "final", "role": "aggregator", "capacity": "large", "depends_on": last})
    return yaml.safe_dump({"agents": agents, "output": "final"}, sort_keys=False)


def synthetic_trace(index: int) -> str:
    """A finished two-agent run's trace, built from the real event types."""
    spec = (
        "agents:\n  - name: solver\n    role: math_solver\n    capacity: medium\n"
        "  - name: checker\n    role: verifier\n    capacity: small\n    depends_on: [solver]\n"
        "output: checker\n"
    )
    events = [
        RunStarted(
            task=f"task number {index}: what is {index} + 1?",
            output="checker",
            profile="scripted",
            levels=(("solver",), ("checker",)),
            spec=spec,
            t=0.0,
        ),
        AgentStarted(agent="solver", role="math_solver", capacity="medium", prompt="p", t=0.0),
        AgentFinished(
            agent="solver", status="succeeded", prompt_tokens=30, completion_tokens=7, t=0.1
        ),
        AgentStarted(agent="checker", role="verifier", capacity="small", prompt="p", t=0.1),
        AgentFinished(
            agent="checker",
            status="succeeded" if index % 7 else "failed",
            prompt_tokens=40,
            completion_tokens=7,
            t=0.2,
        ),
        RunFinished(
            status="succeeded" if index % 7 else "failed",
            tokens={"prompt": 70, "completion": 14, "total": 84},
            wall_s=0.2,
            answer=f"The answer is {index + 1}.",
            t=0.2,
        ),
    ]
    return "".join(json.dumps(encode_event(e)) + "\n" for e in events)


def many_traces(folder: Path, count: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        (folder / f"run-{index:05d}.jsonl").write_text(synthetic_trace(index), encoding="utf-8")
    return folder


def big_eval(folder: Path, items: int) -> Path:
    """An eval run folder of ``items`` items (the format ``lemon eval`` writes)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(items):
        rows.append(
            {
                "id": f"gsm8k:{i}",
                "method": "baseline:single",
                "spec": "agents:\n  - name: solver\n    role: math_solver\n    capacity: large\n",
                "answer": f"The answer is {i}.",
                "extracted": float(i),
                "correct": i % 3 == 0,
                "tokens": 300 + i % 50,
                "priced_tokens": 900.0 + i % 50,
                "calls": 1,
                "wall_s": 1.5,
                "status": "succeeded" if i % 97 else "failed",
                "error": None if i % 97 else "tier down",
            }
        )
    (folder / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    correct = sum(r["correct"] for r in rows)
    summary = {
        "run": folder.name,
        "benchmark": "gsm8k",
        "method": "baseline:single",
        "n": items,
        "correct": correct,
        "accuracy": correct / items,
        "ci95": [0.3, 0.36],
        "mean_tokens": 325.0,
        "mean_priced_tokens": 925.0,
        "failed_runs": sum(r["status"] != "succeeded" for r in rows),
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder
