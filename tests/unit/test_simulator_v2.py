"""Simulator v2: rewards by hand, common random numbers, the optimum and the reading figures."""

from __future__ import annotations

import itertools
import random

import pytest

from lemon.learning import simulator_v2 as v2
from lemon.spec.formatting import format_spec
from lemon.spec.models import Agent, Capacity, Spec
from lemon.spec.mutations import PAPER_KINDS, TWO_WAY_KINDS, mutations
from lemon.spec.validation import parse_spec

S, M, L = Capacity.SMALL, Capacity.MEDIUM, Capacity.LARGE


def task(*needs: v2.Need, draws: tuple[float, ...] = (0.5,) * 7) -> v2.Task:
    return v2.Task("t", tuple(needs), draws, "text")


def test_reward_by_hand() -> None:
    t = task(v2.Need("math_solver", L, True), v2.Need("programmer", S, False))
    best, reward = v2.optimal(t)
    assert [(a.name, a.capacity, a.duties) for a in best.agents] == [
        ("math", L, v2.DUTIES),
        ("code", S, None),
        ("final", S, None),  # two parts: a small aggregator
    ]
    # success 1; tokens 6000 + 1000 + 1000 + 1000; 3 agents; 2 edges
    assert reward == pytest.approx(1 - 0.02 * 9 - 0.01 * 3 - 0.005 * 2)
    # math one tier short (0.35), code with needless duties (0.7): expected 0.35 × 0.7
    worse = v2.spec_for([None, (M, True), (S, True), None, None, None], S)
    result = v2.evaluate(worse, "final", t, sampled=False)
    assert result.success == pytest.approx(0.35 * 0.7)
    # sampled: right only when every part succeeds with the task's draws
    draws = (0.1, 0.3, 0.1, 0.1, 0.1, 0.1, 0.1)  # math 0.3 < 0.35, code 0.1 < 0.7
    assert v2.evaluate(worse, "final", task(*t.needs, draws=draws)).success == 1.0
    draws = (0.1, 0.4, 0.1, 0.1, 0.1, 0.1, 0.1)  # math 0.4 ≥ 0.35
    assert v2.evaluate(worse, "final", task(*t.needs, draws=draws)).success == 0.0
    # an uncovered role fails the answer; a specialist as output answers nothing
    lone = Spec(agents=[Agent(name="math", role="math_solver", capacity=L, duties="x")])
    assert v2.evaluate(lone, "math", t).success == 0.0
    no_code = v2.spec_for([None, (L, True), None, None, None, None], S)
    assert v2.evaluate(no_code, "final", t, sampled=False).success == 0.0


def test_aggregator_tier_grows_with_the_parts() -> None:
    assert [v2.aggregator_tier(n) for n in range(1, 7)] == [S, S, M, M, L, L]
    needs = [v2.Need(s.role, S, False) for s in v2.SPECIALISTS[:3]]
    t = task(*needs)
    small = v2.spec_for([(S, False)] * 3 + [None] * 3, S)
    assert v2.evaluate(small, "final", t, sampled=False).success == pytest.approx(0.35)


def test_mutants_share_the_tasks_draws() -> None:
    """Common random numbers: a spec and its mutants are scored with the same u."""
    t = task(v2.Need("math_solver", L, False), draws=(0.9, 0.3, 0.9, 0.9, 0.9, 0.9, 0.1))
    parsed = parse_spec(format_spec(v2.spec_for([None, (M, False), *[None] * 4], S)))
    assert v2.evaluate(parsed.spec, "final", t).success == 1.0  # u = 0.3 < 0.35
    kinds = [*PAPER_KINDS, *TWO_WAY_KINDS]
    by_kind = {
        (m.kind.value, m.agent): v2.evaluate(m.spec, "final", t).success
        for m in mutations(parsed, kinds=kinds)
    }
    assert by_kind[("downgrade_capacity", "math")] == 0.0  # 0.3 ≥ 0.35²
    assert by_kind[("upgrade_capacity", "math")] == 1.0
    assert by_kind[("remove_agent", "math")] == 0.0
    assert by_kind[("drop_dependency", "final")] == 0.0


def _wider(t: v2.Task) -> list[Spec]:
    """Every spec over the needed roles plus one unneeded one: each present or not, any tier
    and duties, any aggregator tier and duties, the aggregator reading all or all but one."""
    roles = [n.role for n in t.needs]
    extra = next(s.role for s in v2.SPECIALISTS if s.role not in roles)
    pool = [s for s in v2.SPECIALISTS if s.role in {*roles, extra}]
    options: list[v2.Choice] = [None, *itertools.product(v2.TIERS, (False, True))]
    specs = []
    for picks in itertools.product(options, repeat=len(pool)):
        agents = [
            Agent(name=s.name, role=s.role, capacity=c[0], duties=v2.DUTIES if c[1] else None)
            for s, c in zip(pool, picks, strict=True)
            if c is not None
        ]
        names = [a.name for a in agents]
        reads = [names] + [[n for n in names if n != gone] for gone in names]
        for tier, duties, deps in itertools.product(v2.TIERS, (None, "x"), reads[:2]):
            final = Agent(
                name="final", role="aggregator", capacity=tier, duties=duties, depends_on=deps
            )
            specs.append(Spec(agents=[*agents, final], output="final"))
    return specs


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_optimum_beats_every_spec_of_a_wider_family(seed: int) -> None:
    rng = random.Random(seed)
    roles = rng.sample([s.role for s in v2.SPECIALISTS], 2)
    t = task(*(v2.Need(r, rng.choice(v2.TIERS), rng.random() < 0.5) for r in roles))
    _, best = v2.optimal(t)
    for spec in _wider(t):
        assert v2.evaluate(spec, "final", t, sampled=False).reward <= best + 1e-9, format_spec(spec)


def test_every_needed_part_pays_even_on_six_parts() -> None:
    """A large, strict part on a task needing all six roles is still worth its cost."""
    needs = [v2.Need(s.role, L, True) for s in v2.SPECIALISTS]
    t = task(*needs)
    _, best = v2.optimal(t)
    for i in range(6):
        picks: list[v2.Choice] = [(L, True)] * 6
        picks[i] = None
        assert v2.evaluate(v2.spec_for(picks, L), "final", t, sampled=False).reward < best
        picks[i] = (M, True)
        assert v2.evaluate(v2.spec_for(picks, L), "final", t, sampled=False).reward < best


def test_reading_figures() -> None:
    held = v2.make_tasks(64, seed=777)
    blind, share = v2.task_blind_best(held)
    assert share <= 0.7  # the simulator needs the task read
    # exact: no single spec of the family (each specialist's choice, aggregator tier) beats it
    rng = random.Random(0)
    options: list[v2.Choice] = [None, *itertools.product(v2.TIERS, (False, True))]
    blind_total = sum(v2.evaluate(blind, "final", t, sampled=False).reward for t in held)
    for _ in range(200):
        other = v2.spec_for([rng.choice(options) for _ in v2.SPECIALISTS], rng.choice(v2.TIERS))
        total = sum(v2.evaluate(other, "final", t, sampled=False).reward for t in held)
        assert total <= blind_total + 1e-9
    assert v2.uniform_share(held) < share
    _, fixed = v2.fixed_tier_best(held)
    assert share < fixed < 0.8  # 80% of R* needs tiers read
    assert v2.teacher_mode_share(held) < fixed  # the stingy teacher's greedy spec: lower still


def test_the_teacher_is_stingy() -> None:
    rng = random.Random(0)
    t = task(v2.Need("math_solver", L, False))
    specs = [parse_spec(v2.teacher_spec(t, rng)).spec for _ in range(2000)]
    tiers = [next(a.capacity for a in s.agents if a.name == "math") for s in specs]
    share = tiers.count(M) / len(tiers)
    assert share == pytest.approx(v2.TEACHER_STINGY, abs=0.04)
    assert set(tiers) == {M, L}


def test_tasks_rows_and_teacher() -> None:
    tasks = v2.make_tasks(50, seed=3)
    assert tasks == v2.make_tasks(50, seed=3)
    for t in tasks:
        assert 1 <= len(t.needs) <= 6
        assert len(t.draws) == 7
        assert v2.task_from_row(v2.task_row(t)) == t
        words = t.text.removeprefix("Task: ").removesuffix(".").split("; ")
        assert len(words) == len(t.needs)
        teacher = parse_spec(v2.teacher_spec(t, random.Random(1)))
        roles = {a.role for a in teacher.spec.agents}
        assert {n.role for n in t.needs} <= roles
        for need in t.needs:  # the teacher knows strictness; its tiers are never too high
            agent = next(a for a in teacher.spec.agents if a.role == need.role)
            assert (agent.duties is not None) == need.strict
            assert v2.TIERS.index(need.tier) - 1 <= v2.TIERS.index(agent.capacity)
            assert v2.TIERS.index(agent.capacity) <= v2.TIERS.index(need.tier)
        assert teacher.output == v2.AGGREGATOR_NAME
    assert v2.parse_data("synthetic-v2:12") == 12
    assert v2.parse_data("synthetic:12") is None
    with pytest.raises(ValueError, match="positive integer"):
        v2.parse_data("synthetic-v2:x")
    with pytest.raises(ValueError, match="lacks column"):
        v2.task_from_row({"id": "x"})
