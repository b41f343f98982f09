"""The synthetic simulator: closed-form rewards by hand, and the optimum really is the maximum."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lemon.learning.simulator import (
    DUTIES,
    Domain,
    SyntheticTask,
    evaluate,
    make_tasks,
    optimal,
    parse_synthetic_data,
    teacher_spec,
)
from lemon.reward import RewardConfig
from lemon.spec.formatting import format_spec
from lemon.spec.models import Agent, Capacity, Spec
from lemon.spec.mutations import MutationKind, mutations
from lemon.spec.validation import parse_spec

TIERS = list(Capacity)


def task(
    domain: Domain = Domain.MATH,
    difficulty: Capacity = Capacity.MEDIUM,
    *,
    tricky: bool = True,
    strict: bool = True,
) -> SyntheticTask:
    return SyntheticTask("t", domain, difficulty, tricky, strict, "text")


def test_reward_by_hand() -> None:
    # solver medium with duties, checker small reading it: all requirements met
    spec = parse_spec(
        "agents:\n"
        "  - name: solver\n    role: math_solver\n"
        f'    duties: "{DUTIES}"\n    capacity: medium\n'
        "  - name: checker\n    role: verifier\n    capacity: small\n"
        "    depends_on: [solver]\n"
        "output: checker\n"
    )
    result = evaluate(spec.spec, spec.output, task())
    assert result.success == 1.0
    assert result.worker_tokens == 2500 + 500 + 1000
    # R = 1 - 0.02 * 4.0 - 0.01 * 2 - 0.005 * 1
    assert result.reward == pytest.approx(1 - 0.08 - 0.02 - 0.005)
    # one tier short, no duties, unchecked: 0.35 * 0.5 * 0.5
    lone = Spec(agents=[Agent(name="s", role="math_solver", capacity=Capacity.SMALL)])
    short = evaluate(lone, "s", task())
    assert short.success == pytest.approx(0.35 * 0.5 * 0.5)
    # the wrong role answers nothing
    wrong = Spec(agents=[Agent(name="s", role="programmer", capacity=Capacity.LARGE)])
    assert evaluate(wrong, "s", task()).success == 0.0


def test_mutations_are_field_local() -> None:
    """Each needed field's mutant loses reward; a wasteful field's mutant gains."""
    t = task(difficulty=Capacity.MEDIUM, tricky=True, strict=True)
    text = (
        "agents:\n"
        "  - name: solver\n    role: math_solver\n"
        f'    duties: "{DUTIES}"\n    capacity: medium\n'
        "  - name: checker\n    role: verifier\n    capacity: large\n"
        "    depends_on: [solver]\n"
        "output: checker\n"
    )
    parsed = parse_spec(text)
    base = evaluate(parsed.spec, parsed.output, t).reward
    deltas = {
        (m.kind, m.agent): base - evaluate(m.spec, m.spec.output or parsed.output, t).reward
        for m in mutations(parsed)
    }
    assert deltas[(MutationKind.DOWNGRADE_CAPACITY, "solver")] > 0.3  # needed tier
    assert deltas[(MutationKind.ROLLBACK_ROLE, "solver")] > 0.3  # needed duties
    assert deltas[(MutationKind.DROP_DEPENDENCY, "checker")] > 0.3  # needed edge
    assert deltas[(MutationKind.DOWNGRADE_CAPACITY, "checker")] < 0  # oversized checker


def _wide_specs(t: SyntheticTask) -> list[tuple[Spec, str]]:
    """Every spec of up to 3 agents drawn from a few roles, tiers, duties and edges."""
    roles = [
        t.solver_role,
        "verifier",
        "planner",
        "programmer" if t.domain == Domain.MATH else "math_solver",
    ]
    out: list[tuple[Spec, str]] = []
    shapes = [
        ((), None),
        ((0,), None),
        ((0,), (1,)),
        ((0,), (0,)),
    ]  # deps of agent 1, deps of agent 2 (None: no agent 2)
    for n_agents, (deps1, deps2) in itertools.product((1, 2, 3), shapes):
        if n_agents == 1 and (deps1 or deps2 is not None):
            continue
        if n_agents == 2 and deps2 is not None:
            continue
        if n_agents == 3 and deps2 is None:
            continue
        choices = [roles, [Capacity.SMALL, Capacity.MEDIUM, Capacity.LARGE], [None, DUTIES]]
        per_agent = list(itertools.product(*choices))
        if n_agents == 3:  # keep it exhaustive over roles and tiers, sample the rest
            per_agent = [a for a in per_agent if a[2] is None]
        for combo in itertools.product(per_agent, repeat=n_agents):
            agents = []
            for i, (role, tier, duties) in enumerate(combo):
                deps = [] if i == 0 else [f"a{d}" for d in (deps1 if i == 1 else deps2 or ())]
                agents.append(
                    Agent(name=f"a{i}", role=role, capacity=tier, duties=duties, depends_on=deps)
                )
            for output in range(n_agents):
                out.append((Spec(agents=agents), f"a{output}"))
    return out


@pytest.mark.parametrize(
    ("domain", "difficulty", "tricky", "strict"),
    list(itertools.product(list(Domain), TIERS, (False, True), (False, True))),
)
def test_optimum_is_the_maximum_of_a_wide_space(
    domain: Domain, difficulty: Capacity, tricky: bool, strict: bool
) -> None:
    t = task(domain, difficulty, tricky=tricky, strict=strict)
    _, best = optimal(t)
    top = max(evaluate(spec, output, t).reward for spec, output in _wide_specs(t))
    assert top <= best + 1e-12


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    token_cost=st.floats(0.0, 0.05),
    agent_cost=st.floats(0.0, 0.05),
)
def test_teacher_specs_never_beat_the_optimum(
    seed: int, token_cost: float, agent_cost: float
) -> None:
    config = RewardConfig(token_cost=token_cost, agent_cost=agent_cost)
    rng = random.Random(seed)
    for t in make_tasks(4, seed=seed):
        parsed = parse_spec(teacher_spec(t, rng))
        assert parsed.spec.agents[0].role == t.solver_role
        spec, best = optimal(t, config=config)
        assert evaluate(parsed.spec, parsed.output, t, config=config).reward <= best + 1e-12
        assert parse_spec(format_spec(spec)).spec == spec


def test_tasks_are_deterministic_and_reveal_features_as_words() -> None:
    first, again = make_tasks(20, seed=3), make_tasks(20, seed=3)
    assert first == again
    for t in first:
        assert t.text.startswith("Task: ")
        assert ("tricky" in t.text or "deceptive" in t.text) == t.tricky


def test_synthetic_data_names() -> None:
    assert parse_synthetic_data("synthetic:12") == 12
    assert parse_synthetic_data("tasks.jsonl") is None
    with pytest.raises(ValueError, match="synthetic:<N>"):
        parse_synthetic_data("synthetic:zero")
    with pytest.raises(ValueError, match="at least one"):
        make_tasks(0)
