"""Fixed teams: the topologies that evaluations compare against and the search teacher tries.

- ``single``: one math_solver / knowledge_expert / programmer (by task kind) on the medium tier.
- ``chain``: planner → solver → verifier (a tester for code).
- ``star``: three solvers with different duties → aggregator.
- ``tree``: planner → two solvers → a verifier each → aggregator.
- ``debate``: three solvers, then three revisers each reading all three, then an aggregator
  (a fully connected round).
- ``pot``: programmer → python_executor (program of thought: the program's output answers).
- ``plan-pot``: planner → programmer → python_executor → verifier.

These are the structures that learned-topology papers (AgentPrune, G-Designer, AFlow, MaAS)
compare against; their learned topologies are not reimplemented.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from lemon.spec.models import Capacity, Spec
from lemon.tasks import TaskKind, classify_task

__all__ = ["Team", "on_tier", "team_spec"]


class Team(StrEnum):
    SINGLE = "single"
    CHAIN = "chain"
    STAR = "star"
    TREE = "tree"
    DEBATE = "debate"
    POT = "pot"
    PLAN_POT = "plan-pot"


_SOLVER = {
    TaskKind.MATH: "math_solver",
    TaskKind.MULTIPLE_CHOICE: "knowledge_expert",
    TaskKind.CODE: "programmer",
    TaskKind.GENERAL: "knowledge_expert",
}
_CHECKER = {TaskKind.CODE: "tester"}


def _agent(name: str, role: str, capacity: str, *deps: str, duties: str | None = None) -> Any:
    agent: dict[str, Any] = {"name": name, "role": role, "capacity": capacity}
    if duties:
        agent["duties"] = duties
    if deps:
        agent["depends_on"] = list(deps)
    return agent


def team_spec(team: Team, task: str, *, kind: TaskKind | None = None) -> Spec:
    """The spec of ``team`` for ``task`` (of ``kind``, classified here when not given)."""
    kind = kind or classify_task(task)
    solver = _SOLVER[kind]
    checker = _CHECKER.get(kind, "verifier")
    team = Team(team)
    if team is Team.SINGLE:
        agents = [_agent("solver", solver, "medium")]
    elif team is Team.POT:
        agents = [
            _agent("coder", "programmer", "medium"),
            _agent("run", "python_executor", "small", "coder"),
        ]
    elif team is Team.PLAN_POT:
        agents = [
            _agent("planner", "planner", "small"),
            _agent("coder", "programmer", "medium", "planner"),
            _agent("run", "python_executor", "small", "coder"),
            _agent("checker", "verifier", "medium", "planner", "coder", "run"),
        ]
    elif team is Team.CHAIN:
        agents = [
            _agent("planner", "planner", "small"),
            _agent("solver", solver, "medium", "planner"),
            _agent("checker", checker, "medium", "planner", "solver"),
        ]
    elif team is Team.STAR:
        agents = [
            _agent("solver-a", solver, "medium"),
            _agent("solver-b", solver, "medium", duties="Work backwards from what is asked."),
            _agent("solver-c", solver, "small", duties="Estimate first, then compute exactly."),
            _agent("aggregator", "aggregator", "large", "solver-a", "solver-b", "solver-c"),
        ]
    elif team is Team.TREE:
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


def on_tier(spec: Spec, tier: Capacity) -> Spec:
    """``spec`` with every agent on ``tier`` (e.g. a single agent measured on each tier)."""
    agents = [agent.model_copy(update={"capacity": tier}) for agent in spec.agents]
    return spec.model_copy(update={"agents": agents})
