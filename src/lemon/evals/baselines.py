"""Baselines, runnable by the same engine: specs and presets.

- ``single``: one math_solver / knowledge_expert / programmer (by task kind) with
  chain-of-thought, on the medium tier.
- ``sc3``, ``sc5``: self-consistency: the single agent sampled k times (temperature 0.7,
  seeds 0..k-1), majority vote over the extracted answers (ties: the earliest sample).
- ``sc-budget``: self-consistency with k chosen so that k × (tokens of one sample) stays within
  a token budget (``--budget``), at least 1.
- Fixed topologies: ``chain`` (planner → solver → verifier), ``star`` (three solvers with
  different duties → aggregator), ``tree`` (planner → two solvers → a verifier each →
  aggregator), ``debate`` (three solvers, then three revisers each reading all three, then an
  aggregator: a fully connected round).
- ``template``: the template policy (:mod:`lemon.policy.template`).
- Tool-backed: ``pot`` (programmer → python_executor: the program's output is the answer) and
  ``plan-pot`` (planner → programmer → python_executor → verifier). On numeric tasks the
  programmer's answer is prefilled with an open code block and ``answer = ``.

Not reimplemented: AgentPrune, G-Designer, AFlow and MaAS (their learned topologies need their
own training code); the fixed topologies above are the structures those papers compare against.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from lemon.policy.template import TaskKind, classify_task, template_spec
from lemon.spec.models import Spec

__all__ = ["BASELINES", "Baseline", "baseline_spec"]

_SOLVER = {
    TaskKind.MATH: "math_solver",
    TaskKind.MULTIPLE_CHOICE: "knowledge_expert",
    TaskKind.CODE: "programmer",
    TaskKind.GENERAL: "knowledge_expert",
}
_CHECKER = {TaskKind.CODE: "tester"}


@dataclass(frozen=True, slots=True)
class Baseline:
    name: str
    description: str
    samples: int | Literal["budget"] = 1
    """1: one run; k: self-consistency over k sampled runs; "budget": k from a token budget."""


BASELINES: dict[str, Baseline] = {
    b.name: b
    for b in [
        Baseline("single", "one agent with chain-of-thought (medium tier)"),
        Baseline("sc3", "self-consistency: 3 samples, majority vote", samples=3),
        Baseline("sc5", "self-consistency: 5 samples, majority vote", samples=5),
        Baseline("sc-budget", "self-consistency with k matched to a token budget", "budget"),
        Baseline("chain", "planner -> solver -> verifier"),
        Baseline("star", "three solvers -> aggregator"),
        Baseline("tree", "planner -> two solvers -> a verifier each -> aggregator"),
        Baseline("debate", "three solvers, three revisers reading all, aggregator"),
        Baseline("template", "the template policy's team for the task kind"),
        Baseline("pot", "programmer -> python_executor (program of thought, run in the sandbox)"),
        Baseline("plan-pot", "planner -> programmer -> python_executor -> verifier"),
    ]
}


def _agent(name: str, role: str, capacity: str, *deps: str, duties: str | None = None) -> Any:
    agent: dict[str, Any] = {"name": name, "role": role, "capacity": capacity}
    if duties:
        agent["duties"] = duties
    if deps:
        agent["depends_on"] = list(deps)
    return agent


def baseline_spec(name: str, task: str) -> Spec:
    """The spec a baseline runs for ``task`` (self-consistency presets run ``single`` k times)."""
    if name not in BASELINES:
        raise KeyError(f"unknown baseline {name!r} (known: {', '.join(BASELINES)})")
    kind = classify_task(task)
    solver = _SOLVER[kind]
    checker = _CHECKER.get(kind, "verifier")
    if name in {"single", "sc3", "sc5", "sc-budget"}:
        agents = [_agent("solver", solver, "medium")]
    elif name == "template":
        return template_spec(task)[1]
    elif name == "pot":
        agents = [
            _agent("coder", "programmer", "medium"),
            _agent("run", "python_executor", "small", "coder"),
        ]
    elif name == "plan-pot":
        agents = [
            _agent("planner", "planner", "small"),
            _agent("coder", "programmer", "medium", "planner"),
            _agent("run", "python_executor", "small", "coder"),
            _agent("checker", "verifier", "medium", "planner", "coder", "run"),
        ]
    elif name == "chain":
        agents = [
            _agent("planner", "planner", "small"),
            _agent("solver", solver, "medium", "planner"),
            _agent("checker", checker, "medium", "planner", "solver"),
        ]
    elif name == "star":
        agents = [
            _agent("solver-a", solver, "medium"),
            _agent("solver-b", solver, "medium", duties="Work backwards from what is asked."),
            _agent("solver-c", solver, "small", duties="Estimate first, then compute exactly."),
            _agent("aggregator", "aggregator", "large", "solver-a", "solver-b", "solver-c"),
        ]
    elif name == "tree":
        agents = [
            _agent("planner", "planner", "small"),
            _agent("solver-a", solver, "medium", "planner"),
            _agent("solver-b", solver, "medium", "planner", duties="Use a different method."),
            _agent("check-a", checker, "small", "solver-a"),
            _agent("check-b", checker, "small", "solver-b"),
            _agent("aggregator", "aggregator", "large", "check-a", "check-b"),
        ]
    else:  # debate
        first = ["solver-a", "solver-b", "solver-c"]
        agents = [
            _agent("solver-a", solver, "medium"),
            _agent("solver-b", solver, "medium", duties="Work backwards from what is asked."),
            _agent("solver-c", solver, "medium", duties="Estimate first, then compute exactly."),
            *[
                _agent(
                    f"revise-{x}",
                    solver,
                    "medium",
                    *first,
                    duties="Read the other answers, find the mistakes, and give your revised "
                    "final answer.",
                )
                for x in "abc"
            ],
            _agent("aggregator", "aggregator", "large", "revise-a", "revise-b", "revise-c"),
        ]
    return Spec.model_validate({"agents": agents, "output": agents[-1]["name"]})
