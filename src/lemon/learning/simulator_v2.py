"""Simulator v2: a closed-form orchestration SIMULATOR whose optimum needs the task read.

A simulator, not a benchmark: it says whether training machinery learns and whether
counterfactual credit helps, never how well a real policy orchestrates real tasks. Version 1
(:mod:`lemon.learning.simulator`) stays as it is; its best task-blind spec already scores about
0.93 of the optimum, so it cannot tell a policy that reads from one that does not.

**Tasks.** Six specialist roles (:data:`SPECIALISTS`); each is needed with probability
:data:`NEED_PROBABILITY` (at least one per task). A needed role has a required tier (small,
medium, large, uniform) and a strictness (needs ``duties`` or not, even odds). The task text
names each needed role by one of two synonyms, followed by a synonym of its tier and one of its
strictness, in a shuffled order: ``Task: scripting tough exact; review light loose.`` Nothing
else in the text carries information. Each task also holds its random draws ``u`` (one per
specialist and one for the aggregator, uniform on [0, 1)), used by every spec scored on it.

**Outcome of a valid spec** (closed form, ``output`` the resolved output agent):

- the answer comes from an ``aggregator``: when the output agent has another role,
  ``success = 0``;
- role ``r`` is *covered* when the output aggregator depends directly on an agent of role ``r``
  (with several, the best one counts); for a needed role,
  ``p_r = TIER_SHORTFALL ** (tiers short of the required one) × (MISSING_DUTIES if strict and
  the agent has no duties) × (NEEDLESS_DUTIES if not strict and it has duties)``, and
  ``p_r = 0`` when it is not covered;
- the aggregator's own required tier grows with the number ``n`` of needed roles (small for
  n ≤ 2, medium for 3-4, large for 5-6): ``p_agg = TIER_SHORTFALL ** (tiers short)``;
- *sampled* success (training) is ``1`` when ``u_agg < p_agg`` and ``u_r < p_r`` for every
  needed role, else ``0``: the answer is right only when every part is. The draws belong to
  the task, so a spec, all of its mutants and the other specs sampled for the same task see the
  same draws (common random numbers; a worker that gives the same answer to the same call, as
  the engine's reuse cache assumes). *Expected* success (evaluation, ``sampled=False``) is
  ``p_agg × Π_r p_r``;
- ``worker_tokens = Σ_agents TIER_TOKENS[capacity] + DUTIES_TOKENS`` per agent with duties:
  every agent costs, needed or not (small 1,000, medium 3,000, large 6,000; duties 1,000);
- ``R = orchestration_reward(success, worker_tokens, agents, edges)`` (:mod:`lemon.reward`,
  default weights: 0.02 per 1,000 tokens, 0.01 per agent, 0.005 per edge).

**Optimum.** One agent per needed role at its required tier, with duties exactly when strict,
and an aggregator at its required tier without duties that depends on all of them: every factor
is 1, and nothing cheaper keeps them so. Leaving a needed role out makes success 0; a tier
short (``TIER_SHORTFALL = 0.35``) multiplies it by 0.35 while saving at most 0.06 of R; missing
duties halve it for 0.02; needless duties cost 0.3 of it and 0.02; extra agents only cost.
``tests/unit/test_simulator_v2.py`` checks the optimum against every spec of a wider family.
:func:`task_blind_best` finds the best spec that ignores the text (exactly) and
:func:`uniform_share` the share of R* of a policy drawing every choice uniformly.

The SFT teacher (:func:`teacher_spec`) is *stingy*: it writes the task's roles with the right
duties, but each tier (the specialists' and the aggregator's) is one below the required one
with probability :data:`TEACHER_STINGY` (0.6), and it adds each unneeded role with probability
:data:`TEACHER_EXTRA`. A policy that learned it writes, greedily, every tier that can be one too
low one too low (:func:`teacher_mode_share`), the right tier being its second choice (0.4). What
GRPO must learn is to move up exactly the tiers the task asks for: a policy that writes large
everywhere instead stops at :func:`fixed_tier_best` (about 0.75 of R* on the held-out tasks),
below the 0.8 the benchmark asks.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lemon.reward import DEFAULT_CONFIG, RewardConfig, orchestration_reward
from lemon.spec.formatting import format_spec
from lemon.spec.models import Agent, Capacity, Spec

__all__ = [
    "AGGREGATOR_NAME",
    "DATA_PREFIX",
    "DUTIES",
    "NEED_PROBABILITY",
    "SPECIALISTS",
    "Need",
    "SimulatorV2Evaluation",
    "Specialist",
    "Task",
    "evaluate",
    "fixed_tier_best",
    "make_tasks",
    "optimal",
    "parse_data",
    "spec_for",
    "task_blind_best",
    "task_from_row",
    "task_row",
    "teacher_mode_share",
    "teacher_spec",
    "uniform_share",
]


@dataclass(frozen=True, slots=True)
class Specialist:
    role: str
    name: str
    """The agent name the teacher and the optimum use for this role."""
    words: tuple[str, str]
    """The two synonyms that name the role in a task."""


SPECIALISTS: tuple[Specialist, ...] = (
    Specialist("planner", "plan", ("planning", "outline")),
    Specialist("math_solver", "math", ("algebra", "arithmetic")),
    Specialist("programmer", "code", ("coding", "scripting")),
    Specialist("tester", "test", ("testing", "checks")),
    Specialist("critic", "critic", ("review", "critique")),
    Specialist("knowledge_expert", "facts", ("history", "trivia")),
)
AGGREGATOR_ROLE = "aggregator"
AGGREGATOR_NAME = "final"
TIERS = (Capacity.SMALL, Capacity.MEDIUM, Capacity.LARGE)
TIER_WORDS = {
    Capacity.SMALL: ("easy", "light"),
    Capacity.MEDIUM: ("moderate", "fair"),
    Capacity.LARGE: ("hard", "tough"),
}
STRICT_WORDS = {True: ("exact", "strict"), False: ("loose", "rough")}
NEED_PROBABILITY = 0.4
TEACHER_EXTRA = 0.1
TEACHER_STINGY = 0.6
TIER_TOKENS = {Capacity.SMALL: 1000, Capacity.MEDIUM: 3000, Capacity.LARGE: 6000}
DUTIES_TOKENS = 1000
TIER_SHORTFALL = 0.35
MISSING_DUTIES = 0.5
NEEDLESS_DUTIES = 0.7
DUTIES = "Be exact."
DATA_PREFIX = "synthetic-v2:"
_ROLE_INDEX = {s.role: i for i, s in enumerate(SPECIALISTS)}


@dataclass(frozen=True, slots=True)
class Need:
    """A role the task needs, the least tier that serves it, and whether it needs duties."""

    role: str
    tier: Capacity
    strict: bool


@dataclass(frozen=True, slots=True)
class Task:
    id: str
    needs: tuple[Need, ...]
    draws: tuple[float, ...]
    """``u`` per specialist (in :data:`SPECIALISTS` order), then the aggregator's."""
    text: str

    @property
    def aggregator_tier(self) -> Capacity:
        return aggregator_tier(len(self.needs))


def aggregator_tier(parts: int) -> Capacity:
    """The aggregator's least tier for ``parts`` needed roles (1-2 small, 3-4 medium, 5-6 large)."""
    return TIERS[min(2, (max(parts, 1) - 1) // 2)]


@dataclass(frozen=True, slots=True)
class SimulatorV2Evaluation:
    success: float
    """Sampled (0 or 1) or expected, as asked."""
    expected_success: float
    worker_tokens: int
    agents: int
    edges: int
    reward: float


def make_tasks(count: int, *, seed: int = 0) -> list[Task]:
    """``count`` tasks with drawn needs, synonyms, order and draws (deterministic in ``seed``)."""
    if count < 1:
        raise ValueError(f"need at least one simulator task, got {count}")
    rng = random.Random(f"lemon-simulator-v2:{seed}")
    tasks = []
    for i in range(count):
        needs: list[Need] = []
        while not needs:
            needs = [
                Need(s.role, rng.choice(TIERS), rng.random() < 0.5)
                for s in SPECIALISTS
                if rng.random() < NEED_PROBABILITY
            ]
        shown = list(needs)
        rng.shuffle(shown)
        phrases = [
            f"{rng.choice(SPECIALISTS[_ROLE_INDEX[n.role]].words)} "
            f"{rng.choice(TIER_WORDS[n.tier])} {rng.choice(STRICT_WORDS[n.strict])}"
            for n in shown
        ]
        draws = tuple(rng.random() for _ in range(len(SPECIALISTS) + 1))
        text = f"Task: {'; '.join(phrases)}."
        tasks.append(Task(f"v2-{seed}-{i}", tuple(needs), draws, text))
    return tasks


def parse_data(data: str) -> int | None:
    """``synthetic-v2:<N>`` → N; any other data string → None; a malformed N → ``ValueError``."""
    if not data.startswith(DATA_PREFIX):
        return None
    count = data.removeprefix(DATA_PREFIX)
    if not count.isdigit() or int(count) < 1:
        raise ValueError(f"data {data!r}: expected {DATA_PREFIX}<N> with N a positive integer")
    return int(count)


def task_row(task: Task) -> dict[str, Any]:
    """The dataset columns a reward function reads the task back from (:func:`task_from_row`)."""
    return {
        "task": task.text,
        "id": task.id,
        "simulator": "v2",
        "needs": json.dumps([[n.role, n.tier.value, n.strict] for n in task.needs]),
        "draws": json.dumps(list(task.draws)),
    }


def task_from_row(row: Mapping[str, Any]) -> Task:
    try:
        needs = tuple(
            Need(str(role), Capacity(tier), bool(strict))
            for role, tier, strict in json.loads(row["needs"])
        )
        draws = tuple(float(u) for u in json.loads(row["draws"]))
        return Task(str(row["id"]), needs, draws, str(row["task"]))
    except KeyError as exc:
        raise ValueError(f"simulator v2 row lacks column {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"simulator v2 row {row.get('id')!r} is malformed: {exc}") from None


_TIER_INDEX = {tier: i for i, tier in enumerate(TIERS)}


def _shortfall(have: Capacity, need: Capacity) -> int:
    return max(0, _TIER_INDEX[need] - _TIER_INDEX[have])


def _part(agent: Agent, need: Need) -> float:
    p: float = TIER_SHORTFALL ** _shortfall(agent.capacity, need.tier)
    if need.strict and agent.duties is None:
        p *= MISSING_DUTIES
    if not need.strict and agent.duties is not None:
        p *= NEEDLESS_DUTIES
    return p


def evaluate(
    spec: Spec,
    output: str,
    task: Task,
    *,
    sampled: bool = True,
    config: RewardConfig = DEFAULT_CONFIG,
) -> SimulatorV2Evaluation:
    """R_orch of a valid ``spec`` on ``task``: sampled success (training) or expected."""
    by_name = {agent.name: agent for agent in spec.agents}
    out = by_name[output]
    expected = 0.0
    success = 0.0
    if out.role == AGGREGATOR_ROLE:
        p_agg: float = TIER_SHORTFALL ** _shortfall(out.capacity, task.aggregator_tier)
        parts = [by_name[name] for name in out.depends_on]
        expected = p_agg
        succeeded = task.draws[-1] < p_agg
        for need in task.needs:
            p = max((_part(a, need) for a in parts if a.role == need.role), default=0.0)
            expected *= p
            succeeded = succeeded and task.draws[_ROLE_INDEX[need.role]] < p
        success = float(succeeded)
    tokens = sum(
        TIER_TOKENS[a.capacity] + (DUTIES_TOKENS if a.duties is not None else 0)
        for a in spec.agents
    )
    edges = sum(len(a.depends_on) for a in spec.agents)
    value = success if sampled else expected
    reward = orchestration_reward(
        value, worker_tokens=tokens, agents=len(spec.agents), edges=edges, config=config
    )
    return SimulatorV2Evaluation(value, expected, tokens, len(spec.agents), edges, reward)


Choice = tuple[Capacity, bool] | None
"""A specialist's setting in a spec: absent, or (tier, duties)."""


def spec_for(choices: Sequence[Choice], aggregator: Capacity) -> Spec:
    """The canonical spec: the present specialists in :data:`SPECIALISTS` order, each named as
    its :class:`Specialist`, and an aggregator at ``aggregator`` reading all of them."""
    agents = [
        Agent(
            name=s.name,
            role=s.role,
            duties=DUTIES if choice[1] else None,
            capacity=choice[0],
        )
        for s, choice in zip(SPECIALISTS, choices, strict=True)
        if choice is not None
    ]
    agents.append(
        Agent(
            name=AGGREGATOR_NAME,
            role=AGGREGATOR_ROLE,
            capacity=aggregator,
            depends_on=[a.name for a in agents],
        )
    )
    return Spec(agents=agents, output=AGGREGATOR_NAME)


def optimal(task: Task, *, config: RewardConfig = DEFAULT_CONFIG) -> tuple[Spec, float]:
    """The optimal spec for ``task`` and its reward (success 1, sampled or expected)."""
    wanted = {n.role: (n.tier, n.strict) for n in task.needs}
    spec = spec_for([wanted.get(s.role) for s in SPECIALISTS], task.aggregator_tier)
    return spec, evaluate(spec, AGGREGATOR_NAME, task, sampled=False, config=config).reward


def _stingy(tier: Capacity, rng: random.Random) -> Capacity:
    """The teacher's tier for a part that needs ``tier``: one below with probability
    :data:`TEACHER_STINGY` (small stays small)."""
    if rng.random() < TEACHER_STINGY:
        return TIERS[max(0, _TIER_INDEX[tier] - 1)]
    return tier


def teacher_spec(task: Task, rng: random.Random) -> str:
    """An SFT target from a stingy teacher: the task's roles with the right duties, each tier
    (the specialists' and the aggregator's) one below the required one with probability
    :data:`TEACHER_STINGY`, plus each unneeded role with probability :data:`TEACHER_EXTRA`
    (random tier and duties)."""
    needs = {n.role: n for n in task.needs}
    choices: list[Choice] = []
    for s in SPECIALISTS:
        if s.role in needs:
            choices.append((_stingy(needs[s.role].tier, rng), needs[s.role].strict))
        elif rng.random() < TEACHER_EXTRA:
            choices.append((rng.choice(TIERS), rng.random() < 0.5))
        else:
            choices.append(None)
    return format_spec(spec_for(choices, _stingy(task.aggregator_tier, rng)))


# ── figures of the simulator itself ───────────────────────────────────────────────────────


_CHOICES: tuple[Choice, ...] = (None, *((t, d) for t in TIERS for d in (False, True)))


def _cost(choice: Choice, config: RewardConfig) -> float:
    if choice is None:
        return 0.0
    tokens = TIER_TOKENS[choice[0]] + (DUTIES_TOKENS if choice[1] else 0)
    return config.token_cost * tokens / 1000 + config.agent_cost + config.edge_cost


def _factors(tasks: Sequence[Task]) -> list[list[list[float]]]:
    """``[specialist][choice][task]``: the success factor a choice gives each task (1 where the
    specialist is not needed)."""
    out = []
    for s in SPECIALISTS:
        needs = [next((n for n in t.needs if n.role == s.role), None) for t in tasks]
        rows = []
        for choice in _CHOICES:
            if choice is None:
                rows.append([0.0 if n else 1.0 for n in needs])
                continue
            agent = Agent(
                name=s.name, role=s.role, capacity=choice[0], duties=DUTIES if choice[1] else None
            )
            rows.append([_part(agent, n) if n else 1.0 for n in needs])
        out.append(rows)
    return out


def task_blind_best(
    tasks: Sequence[Task], *, config: RewardConfig = DEFAULT_CONFIG
) -> tuple[Spec, float]:
    """The one spec with the highest mean expected R over ``tasks``, and its share of the mean
    R* (Σ R / Σ R*). Exact: depth-first over every specialist's choice (absent, or a tier and
    duties) for each aggregator tier, pruned with the bound "later factors are at most 1 and
    later costs at least 0"."""
    factors = _factors(tasks)
    count = len(tasks)
    best: list[Any] = [float("-inf"), None]

    def walk(depth: int, product: list[float], cost: float, chosen: list[Choice]) -> None:
        bound = sum(product) / count - cost
        if bound <= best[0]:
            return
        if depth == len(SPECIALISTS):
            best[:] = [bound, list(chosen)]
            return
        rows = factors[depth]
        options = sorted(
            range(len(_CHOICES)),
            key=lambda c: -sum(p * f for p, f in zip(product, rows[c], strict=True)),
        )
        for c in options:
            chosen.append(_CHOICES[c])
            nxt = [p * f for p, f in zip(product, rows[c], strict=True)]
            walk(depth + 1, nxt, cost + _cost(_CHOICES[c], config), chosen)
            chosen.pop()

    found: list[tuple[float, list[Choice], Capacity]] = []
    for tier in TIERS:
        best[:] = [float("-inf"), None]
        start = [TIER_SHORTFALL ** _shortfall(tier, t.aggregator_tier) for t in tasks]
        walk(0, start, config.agent_cost + config.token_cost * TIER_TOKENS[tier] / 1000, [])
        found.append((best[0], best[1], tier))
    _, choices, tier = max(found, key=lambda item: item[0])
    spec = spec_for(choices, tier)
    reward = sum(
        evaluate(spec, AGGREGATOR_NAME, t, sampled=False, config=config).reward for t in tasks
    )
    optimum = sum(optimal(t, config=config)[1] for t in tasks)
    return spec, reward / optimum


def fixed_tier_best(
    tasks: Sequence[Task], *, config: RewardConfig = DEFAULT_CONFIG
) -> tuple[tuple[Capacity, Capacity], float]:
    """The best policy that writes the task's roles with the right duties and never reads a
    tier: one tier for every specialist and one for the aggregator. Its tiers and its share
    of R* (Σ R / Σ R*); going above it needs tiers read."""
    optimum = sum(optimal(t, config=config)[1] for t in tasks)
    best: tuple[float, tuple[Capacity, Capacity]] | None = None
    for tier in TIERS:
        for aggregator in TIERS:
            total = sum(
                _reward(_read(task, lambda need, tier=tier: tier), aggregator, task, config)
                for task in tasks
            )
            if best is None or total > best[0]:
                best = (total, (tier, aggregator))
    assert best is not None
    return best[1], best[0] / optimum


def teacher_mode_share(tasks: Sequence[Task], *, config: RewardConfig = DEFAULT_CONFIG) -> float:
    """Share of R* of the stingy teacher's most likely spec: every tier one below the required
    one (what an SFT policy that learned the teacher writes greedily)."""
    optimum = sum(optimal(t, config=config)[1] for t in tasks)
    total = 0.0
    for task in tasks:
        below = TIERS[max(0, _TIER_INDEX[task.aggregator_tier] - 1)]
        lower = _read(task, lambda need: TIERS[max(0, _TIER_INDEX[need.tier] - 1)])
        total += _reward(lower, below, task, config)
    return total / optimum


def _read(task: Task, tier_of: Any) -> list[Choice]:
    needs = {n.role: n for n in task.needs}
    return [
        (tier_of(needs[s.role]), needs[s.role].strict) if s.role in needs else None
        for s in SPECIALISTS
    ]


def _reward(choices: list[Choice], aggregator: Capacity, task: Task, config: RewardConfig) -> float:
    spec = spec_for(choices, aggregator)
    return evaluate(spec, AGGREGATOR_NAME, task, sampled=False, config=config).reward


def uniform_share(
    tasks: Sequence[Task],
    *,
    samples: int = 64,
    seed: int = 0,
    config: RewardConfig = DEFAULT_CONFIG,
) -> float:
    """Mean expected R over ``tasks`` of a policy drawing every choice uniformly (each
    specialist present or not, its tier and duties, the aggregator's tier), over mean R*."""
    rng = random.Random(seed)
    total = 0.0
    for task in tasks:
        for _ in range(samples):
            choices: list[Choice] = [
                rng.choice(_CHOICES[1:]) if rng.random() < 0.5 else None for _ in SPECIALISTS
            ]
            spec = spec_for(choices, rng.choice(TIERS))
            total += evaluate(spec, AGGREGATOR_NAME, task, sampled=False, config=config).reward
    optimum = sum(optimal(t, config=config)[1] for t in tasks)
    return total / samples / optimum
