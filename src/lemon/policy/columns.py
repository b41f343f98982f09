"""The candidate teams of an outcome table: its columns.

A column is a team that can be written down for any task of a kind: a spec whose solver role
follows the task kind (``math_solver``, ``knowledge_expert``, ``programmer``, as the fixed teams
of :mod:`lemon.policy.teams` choose it), plus how it is decoded (greedy, or sampled with a
seed). Columns carry no free-text ``duties``: a policy that writes the same team writes the
same prompts, so its run is answered from the table (a spec with duties of its own asks new
questions, which the table cannot answer).

The catalogue (:data:`COLUMNS`):

- ``single-small``, ``single-medium``, ``single-large``: one solver on each tier;
- ``pot-small``, ``pot-medium``, ``pot-large``: program of thought, a programmer whose program the
  ``python_executor`` runs in the sandbox (maths only);
- ``sample-medium-1`` .. ``sample-medium-5``: one medium solver sampled at temperature 0.7
  with seeds 1..5 (self-consistency and the cascade vote over them);
- ``verify-medium-large``, ``verify-large-large``: a solver, then a large verifier reading it;
- ``plan-medium-medium``: a medium planner, then a medium solver reading the plan;
- ``expert-small`` .. ``expert-large`` and ``quick-small`` .. ``quick-large``: one
  ``knowledge_expert`` (the relevant facts, then the letter) or one ``quick_expert`` (the
  letter after one sentence) per tier: the two multiple-choice answer formats compared;
- ``pot-choice-small|medium|large``: program of thought on multiple choice, its result mapped
  to the nearest option by the ``option_picker`` tool (AQuA);
- ``repair-small|medium|large``: coder, the ``example_runner`` tool runs its function on the
  task's own examples, a repairer on the same tier reads the failures (code);
- ``vote-math`` (pot-large, single-large, pot-medium), ``vote-math-medium`` (pot-medium,
  single-medium, pot-small), ``vote-choice`` (single-large, quick-large, quick-medium),
  ``vote-choice-pot`` (pot-choice-large, single-large, quick-large): the ``voter`` tool's
  majority over those teams' answers, ties to the first; each member asks exactly its team's
  questions, so a table holding the members answers the vote for free;
- ``<team>-r1`` for every greedy team: its replica, sampled with a recorded seed (the second
  answer a replicated oracle needs).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lemon.spec.models import Capacity, Spec
from lemon.tasks import TaskKind

__all__ = [
    "COLUMNS",
    "LARGE_ALONE",
    "SAMPLE_TEMPERATURE",
    "Column",
    "column",
    "columns",
    "large_alone",
    "replica_of",
]

SAMPLE_TEMPERATURE = 0.7
"""Temperature of the sampled columns (as ``lemon eval``'s self-consistency baselines)."""

SOLVER = "{solver}"
"""Placeholder for the task kind's solver role in a column's agents."""

_SOLVER = {
    TaskKind.MATH: "math_solver",
    TaskKind.MULTIPLE_CHOICE: "knowledge_expert",
    TaskKind.CODE: "programmer",
    TaskKind.GENERAL: "knowledge_expert",
}


class Column(BaseModel):
    """One candidate team, for every task of the kinds it applies to."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    description: str
    agents: tuple[dict[str, Any], ...]
    """The spec's agents; a ``role`` of ``{solver}`` is the task kind's solver role."""
    output: str
    kinds: tuple[TaskKind, ...] = tuple(TaskKind)
    """The task kinds this team is written for."""
    temperature: float = 0.0
    seed: int | None = None

    def spec(self, kind: TaskKind) -> Spec:
        """The team's spec for a task of ``kind``."""
        agents = [
            {**agent, "role": _SOLVER[kind] if agent["role"] == SOLVER else agent["role"]}
            for agent in self.agents
        ]
        return Spec.model_validate({"agents": agents, "output": self.output})

    def applies_to(self, kind: TaskKind) -> bool:
        return kind in self.kinds

    @property
    def sampled(self) -> bool:
        return self.temperature > 0

    @property
    def tiers(self) -> tuple[str, ...]:
        return tuple(str(agent["capacity"]) for agent in self.agents)

    def to_json(self, kind: TaskKind | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "description": self.description,
            "temperature": self.temperature,
            "seed": self.seed,
            "agents": len(self.agents),
            "tiers": list(self.tiers),
        }
        if kind is not None:
            from lemon.spec.formatting import format_spec

            out["spec"] = format_spec(self.spec(kind), output=self.output)
        return out


def _agent(name: str, role: str, capacity: Capacity, *deps: str) -> dict[str, Any]:
    agent: dict[str, Any] = {"name": name, "role": role, "capacity": capacity.value}
    if deps:
        agent["depends_on"] = list(deps)
    return agent


S, M, L = Capacity.SMALL, Capacity.MEDIUM, Capacity.LARGE
_ANSWERING = (TaskKind.MATH, TaskKind.MULTIPLE_CHOICE, TaskKind.GENERAL)


def _catalogue() -> list[Column]:
    found = [
        Column(
            name=f"single-{tier.value}",
            description=f"one solver on the {tier.value} tier",
            agents=(_agent("solver", SOLVER, tier),),
            output="solver",
        )
        for tier in (S, M, L)
    ]
    found += [
        Column(
            name=f"pot-{tier.value}",
            description=f"program of thought: a {tier.value} programmer, its program run in the "
            "sandbox",
            agents=_pot("", tier),
            output="run",
            kinds=(TaskKind.MATH,),
        )
        for tier in (S, M, L)
    ]
    found += [
        Column(
            name=f"sample-medium-{seed}",
            description=f"one medium solver sampled at temperature {SAMPLE_TEMPERATURE}, seed "
            f"{seed}",
            agents=(_agent("solver", SOLVER, M),),
            output="solver",
            temperature=SAMPLE_TEMPERATURE,
            seed=seed,
            kinds=_ANSWERING,
        )
        for seed in range(1, 6)
    ]
    found += [
        Column(
            name=f"verify-{tier.value}-large",
            description=f"a {tier.value} solver, then a large verifier reading its work",
            agents=(_agent("solver", SOLVER, tier), _agent("checker", "verifier", L, "solver")),
            output="checker",
            kinds=_ANSWERING,
        )
        for tier in (M, L)
    ]
    found.append(
        Column(
            name="plan-medium-medium",
            description="a medium planner, then a medium solver reading the plan",
            agents=(_agent("planner", "planner", M), _agent("solver", SOLVER, M, "planner")),
            output="solver",
            kinds=_ANSWERING,
        )
    )
    found += [
        Column(
            name=f"expert-{tier.value}",
            description=f"one knowledge_expert on the {tier.value} tier: the relevant facts, "
            "then the letter (the long multiple-choice format)",
            agents=(_agent("solver", "knowledge_expert", tier),),
            output="solver",
            kinds=(TaskKind.MULTIPLE_CHOICE,),
        )
        for tier in (S, M, L)
    ]
    found += [
        Column(
            name=f"quick-{tier.value}",
            description=f"one quick_expert on the {tier.value} tier: the letter after one "
            "sentence (the short multiple-choice format)",
            agents=(_agent("solver", "quick_expert", tier),),
            output="solver",
            kinds=(TaskKind.MULTIPLE_CHOICE,),
        )
        for tier in (S, M, L)
    ]
    found += [
        Column(
            name=f"pot-choice-{tier.value}",
            description=f"program of thought on multiple choice: a {tier.value} programmer, its "
            "program run in the sandbox, the option nearest its result picked in code",
            agents=_pot("", tier, pick=True),
            output="pick",
            kinds=(TaskKind.MULTIPLE_CHOICE,),
        )
        for tier in (S, M, L)
    ]
    found += [
        Column(
            name=f"repair-{tier.value}",
            description=f"a {tier.value} coder, its function run on the task's own examples in "
            f"the sandbox, then a {tier.value} repairer reading the failures",
            agents=(
                _agent("coder", "programmer", tier),
                _agent("check", "example_runner", S, "coder"),
                _agent("fix", "repairer", tier, "coder", "check"),
            ),
            output="fix",
            kinds=(TaskKind.CODE,),
        )
        for tier in (S, M, L)
    ]
    found += [
        _vote(
            "vote-math",
            "pot-large, single-large and pot-medium",
            TaskKind.MATH,
            _pot("", L),
            (_agent("solver", SOLVER, L),),
            _pot("-m", M),
        ),
        _vote(
            "vote-math-medium",
            "pot-medium, single-medium and pot-small",
            TaskKind.MATH,
            _pot("", M),
            (_agent("solver", SOLVER, M),),
            _pot("-s", S),
        ),
        _vote(
            "vote-choice",
            "single-large, quick-large and quick-medium",
            TaskKind.MULTIPLE_CHOICE,
            (_agent("solver", SOLVER, L),),
            (_agent("quick", "quick_expert", L),),
            (_agent("quick-m", "quick_expert", M),),
        ),
        _vote(
            "vote-choice-pot",
            "pot-choice-large, single-large and quick-large",
            TaskKind.MULTIPLE_CHOICE,
            _pot("", L, pick=True),
            (_agent("solver", SOLVER, L),),
            (_agent("quick", "quick_expert", L),),
        ),
    ]
    return found + [_replica(c, REPLICA_SEED) for c in found if not c.sampled]


def _pot(suffix: str, tier: Capacity, *, pick: bool = False) -> tuple[dict[str, Any], ...]:
    """Program of thought's agents (``coder<suffix>`` then ``run<suffix>``; with ``pick``,
    ``pick<suffix>`` maps the result to the nearest option)."""
    agents: tuple[dict[str, Any], ...] = (
        _agent(f"coder{suffix}", "programmer", tier),
        _agent(f"run{suffix}", "python_executor", S, f"coder{suffix}"),
    )
    if pick:
        agents += (_agent(f"pick{suffix}", "option_picker", S, f"run{suffix}"),)
    return agents


def _vote(name: str, over: str, kind: TaskKind, *teams: tuple[dict[str, Any], ...]) -> Column:
    """A vote among ``teams`` (each answering by its last agent), ties to the first."""
    agents = tuple(agent for team in teams for agent in team)
    voters = [team[-1]["name"] for team in teams]
    return Column(
        name=name,
        description=f"a deterministic vote among {over} (ties to the first)",
        agents=(*agents, _agent("vote", "voter", S, *voters)),
        output="vote",
        kinds=(kind,),
    )


REPLICA_SEED = 1
"""The seed of every column's replica (``<team>-r1``)."""


def _replica(col: Column, seed: int) -> Column:
    """The second, independent answer of a greedy column: the same team with every model agent
    sampled at :data:`SAMPLE_TEMPERATURE` with ``seed`` (tool agents are deterministic). An
    outcome that both answers get right replicates; one only greedy decoding gets right may be
    luck. ``single-medium-r1`` asks exactly ``sample-medium-1``'s questions, so a table holding
    one answers the other."""
    return col.model_copy(
        update={
            "name": f"{col.name}-r{seed}",
            "description": f"{col.description}; sampled at temperature {SAMPLE_TEMPERATURE}, "
            f"seed {seed} (the replica of {col.name})",
            "temperature": SAMPLE_TEMPERATURE,
            "seed": seed,
        }
    )


def replica_of(name: str) -> str | None:
    """The greedy column a replica column replicates (``pot-large-r1`` -> ``pot-large``)."""
    base, _, seed = name.rpartition("-r")
    return base if seed == str(REPLICA_SEED) and base in COLUMNS else None


COLUMNS: dict[str, Column] = {c.name: c for c in _catalogue()}


def column(name: str) -> Column:
    """The column called ``name``; ``KeyError`` with the known names otherwise."""
    try:
        return COLUMNS[name]
    except KeyError:
        raise KeyError(f"unknown team {name!r} (known: {', '.join(COLUMNS)})") from None


def columns(names: Iterable[str]) -> list[Column]:
    return [column(name) for name in names]


LARGE_ALONE = ("single-large", "quick-large")
"""The columns that are one agent on the large tier: the reference cost figures are quoted
against (MMLU's tables hold the short-format ``quick-large`` and no ``single-large``)."""


def large_alone(teams: Iterable[str]) -> str | None:
    """The first of :data:`LARGE_ALONE` among ``teams``, or None."""
    present = set(teams)
    return next((name for name in LARGE_ALONE if name in present), None)
