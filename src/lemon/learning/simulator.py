"""A synthetic orchestration environment: a SIMULATOR for measuring whether training learns.

This is not a benchmark and says nothing about real tasks. It exists so that "does GRPO learn,
and does counterfactual credit help?" has a measured answer on a CPU: every task has latent
requirements, R_orch of any spec is known in closed form, and so is the optimal spec.

A task has four latent features, each shown to the policy only as a word in the task text
(synonyms drawn at random, so the mapping must be learned, not copied):

- ``domain`` (math | code): which solver role works (``math_solver`` | ``programmer``);
- ``difficulty`` (easy | medium | hard): the least tier the solver needs (small | medium | large);
- ``tricky``: the answer must be checked by a ``verifier`` that reads the solver (an edge);
- ``strict``: the solver needs task-specific ``duties`` (the answer format).

Closed-form outcome of a valid spec (every factor belongs to one field, so counterfactual
credit has something to localise):

- the *solver* is the output agent when it has the domain's role, or the one agent of that role
  the output agent depends on directly when the output agent is a ``verifier``; no solver on
  the answer path → ``success = 0``;
- ``success = q_tier × q_duties × q_check`` where ``q_tier = TIER_SHORTFALL ** (tiers short)``
  (solver's ``capacity``), ``q_duties = MISSING_DUTIES`` when strict and the solver has no
  duties (its ``duties``), ``q_check = UNCHECKED`` when tricky and the output agent is not a
  verifier depending on the solver (the verifier's ``depends_on`` entry);
- ``worker_tokens`` = Σ over all agents of ``TIER_TOKENS[capacity]`` (+ ``DUTIES_TOKENS`` with
  duties): every agent, useful or not, costs;
- ``R = orchestration_reward(success, worker_tokens, agents, edges)`` (:mod:`lemon.reward`).

The optimum is the best spec of the canonical family (a solver, optionally a verifier reading
it; every tier and duties choice), found by enumeration; ``tests/unit/test_simulator.py`` checks
that no spec of a wider space (extra agents, wrong roles, extra edges) beats it.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from enum import StrEnum

from lemon.reward import DEFAULT_CONFIG, RewardConfig, orchestration_reward
from lemon.spec.formatting import format_spec
from lemon.spec.models import Agent, Capacity, Spec
from lemon.spec.validation import ParsedSpec

__all__ = [
    "DUTIES",
    "DUTIES_TOKENS",
    "MISSING_DUTIES",
    "SOLVER_NAME",
    "TIER_SHORTFALL",
    "TIER_TOKENS",
    "UNCHECKED",
    "VERIFIER_NAME",
    "Domain",
    "Evaluation",
    "SyntheticTask",
    "canonical_specs",
    "evaluate",
    "evaluate_parsed",
    "make_tasks",
    "optimal",
    "parse_synthetic_data",
    "synthetic_messages",
    "teacher_spec",
]


class Domain(StrEnum):
    MATH = "math"
    CODE = "code"


SOLVER_ROLE = {Domain.MATH: "math_solver", Domain.CODE: "programmer"}
TIERS = (Capacity.SMALL, Capacity.MEDIUM, Capacity.LARGE)
TIER_TOKENS = {Capacity.SMALL: 1000, Capacity.MEDIUM: 2500, Capacity.LARGE: 5000}
DUTIES_TOKENS = 500
TIER_SHORTFALL = 0.35
MISSING_DUTIES = 0.5
UNCHECKED = 0.5
SOLVER_NAME = "solver"
VERIFIER_NAME = "checker"
DUTIES = "Use the exact answer format."

_WORDS: dict[str, dict[object, tuple[str, ...]]] = {
    "domain": {Domain.MATH: ("arithmetic", "algebra"), Domain.CODE: ("coding", "programming")},
    "difficulty": {
        Capacity.SMALL: ("easy", "simple"),
        Capacity.MEDIUM: ("moderate", "intermediate"),
        Capacity.LARGE: ("hard", "difficult"),
    },
    "tricky": {True: ("tricky", "deceptive"), False: ("routine", "plain")},
    "strict": {True: ("strict", "exact"), False: ("loose", "free")},
}


@dataclass(frozen=True, slots=True)
class SyntheticTask:
    """One simulated task: its latent features and the text the policy sees."""

    id: str
    domain: Domain
    difficulty: Capacity
    """The least tier the solver needs."""
    tricky: bool
    strict: bool
    text: str

    @property
    def solver_role(self) -> str:
        return SOLVER_ROLE[self.domain]


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The closed-form outcome of one valid spec on one task."""

    success: float
    worker_tokens: int
    agents: int
    edges: int
    reward: float


def make_tasks(count: int, *, seed: int = 0) -> list[SyntheticTask]:
    """``count`` tasks with uniformly drawn features and synonyms (deterministic in ``seed``)."""
    if count < 1:
        raise ValueError(f"need at least one synthetic task, got {count}")
    rng = random.Random(seed)
    tasks = []
    for i in range(count):
        domain = rng.choice(list(Domain))
        difficulty = rng.choice(TIERS)
        tricky = rng.random() < 0.5
        strict = rng.random() < 0.5
        words = [
            rng.choice(_WORDS[name][value])
            for name, value in (
                ("difficulty", difficulty),
                ("tricky", tricky),
                ("domain", domain),
                ("strict", strict),
            )
        ]
        text = f"Task: {words[0]}, {words[1]} {words[2]} problem; {words[3]} answer format."
        tasks.append(
            SyntheticTask(f"synthetic-{seed}-{i}", domain, difficulty, tricky, strict, text)
        )
    return tasks


def parse_synthetic_data(data: str) -> int | None:
    """``synthetic:<N>`` → N; any other data string → None; a malformed N → ``ValueError``."""
    if not data.startswith("synthetic:"):
        return None
    count = data.removeprefix("synthetic:")
    if not count.isdigit() or int(count) < 1:
        raise ValueError(f"data {data!r}: expected synthetic:<N> with N a positive integer")
    return int(count)


def synthetic_messages(task: SyntheticTask | str) -> list[dict[str, str]]:
    """The short chat prompt of the simulator (kept short so a tiny CPU policy learns fast)."""
    text = task.text if isinstance(task, SyntheticTask) else task
    return [{"role": "user", "content": f"Write the LEMON spec for: {text}"}]


def _solver(spec: Spec, output: str, role: str) -> tuple[Agent | None, bool]:
    """The solver on the answer path and whether a verifier reading it is the output agent."""
    by_name = {agent.name: agent for agent in spec.agents}
    out = by_name[output]
    if out.role == role:
        return out, False
    if out.role == "verifier":
        for dep in out.depends_on:
            if by_name[dep].role == role:
                return by_name[dep], True
    return None, False


def evaluate(
    spec: Spec,
    output: str,
    task: SyntheticTask,
    *,
    config: RewardConfig = DEFAULT_CONFIG,
) -> Evaluation:
    """R_orch of a valid ``spec`` (``output``: its resolved output agent) on ``task``."""
    solver, checked = _solver(spec, output, task.solver_role)
    success = 0.0
    if solver is not None:
        short = max(0, TIERS.index(task.difficulty) - TIERS.index(solver.capacity))
        success = TIER_SHORTFALL**short
        if task.strict and solver.duties is None:
            success *= MISSING_DUTIES
        if task.tricky and not checked:
            success *= UNCHECKED
    tokens = sum(
        TIER_TOKENS[a.capacity] + (DUTIES_TOKENS if a.duties is not None else 0)
        for a in spec.agents
    )
    edges = sum(len(a.depends_on) for a in spec.agents)
    reward = orchestration_reward(
        success, worker_tokens=tokens, agents=len(spec.agents), edges=edges, config=config
    )
    return Evaluation(success, tokens, len(spec.agents), edges, reward)


def evaluate_parsed(
    parsed: ParsedSpec, task: SyntheticTask, *, config: RewardConfig = DEFAULT_CONFIG
) -> Evaluation:
    return evaluate(parsed.spec, parsed.output, task, config=config)


def _family_spec(
    task: SyntheticTask,
    tier: Capacity,
    duties: bool,
    checker: tuple[Capacity, bool] | None,
) -> Spec:
    agents = [
        Agent(
            name=SOLVER_NAME,
            role=task.solver_role,
            duties=DUTIES if duties else None,
            capacity=tier,
        )
    ]
    output = SOLVER_NAME
    if checker is not None:
        agents.append(
            Agent(
                name=VERIFIER_NAME,
                role="verifier",
                duties=DUTIES if checker[1] else None,
                capacity=checker[0],
                depends_on=[SOLVER_NAME],
            )
        )
        output = VERIFIER_NAME
    return Spec(agents=agents, output=output)


def canonical_specs(task: SyntheticTask) -> list[Spec]:
    """The canonical family: a solver of the right role, optionally a verifier reading it."""
    checkers: list[tuple[Capacity, bool] | None] = [None]
    checkers += list(itertools.product(TIERS, (False, True)))
    return [
        _family_spec(task, tier, duties, checker)
        for tier, duties, checker in itertools.product(TIERS, (False, True), checkers)
    ]


def optimal(task: SyntheticTask, *, config: RewardConfig = DEFAULT_CONFIG) -> tuple[Spec, float]:
    """The optimal spec for ``task`` and its reward (best of the canonical family)."""
    best = max(
        canonical_specs(task),
        key=lambda spec: evaluate(spec, spec.output or SOLVER_NAME, task, config=config).reward,
    )
    return best, evaluate(best, best.output or SOLVER_NAME, task, config=config).reward


def teacher_spec(task: SyntheticTask, rng: random.Random) -> str:
    """An SFT target: a valid canonical-family spec with the right role and random fields.

    The teacher teaches the language (and the domain's role), not the optimum: tiers, duties
    and the verifier are drawn at random, so what GRPO gains afterwards is measurable.
    """
    checker = None
    if rng.random() < 0.5:
        checker = (rng.choice(TIERS), rng.random() < 0.5)
    spec = _family_spec(task, rng.choice(TIERS), rng.random() < 0.5, checker)
    return format_spec(spec)
