"""Counterfactual mutations: one per field, valid mutants, spans from the parser's marks."""

from __future__ import annotations

from collections import Counter

import pytest

from lemon.spec import Capacity, MutationKind, mutate, mutations, parse_spec

TEXT = """\
agents:
  - name: plan
    role: planner
    duties: |
      Break it down.
      Keep it short.
    capacity: large
  - name: solve
    role: math_solver
    duties: 'Solve, carefully.'
    capacity: medium
    depends_on:
      - plan
  - name: judge
    role: aggregator
    capacity: small
    depends_on: [plan, solve]
"""


def test_one_mutation_per_field() -> None:
    found = mutations(parse_spec(TEXT))
    assert Counter(m.kind for m in found) == {
        MutationKind.DROP_DEPENDENCY: 3,
        MutationKind.ROLLBACK_ROLE: 2,
        MutationKind.DOWNGRADE_CAPACITY: 2,
    }
    assert [m.span for m in found] == sorted(m.span for m in found)


def test_spans_cover_the_edited_values() -> None:
    parsed = parse_spec(TEXT)
    covered = {(m.kind, m.agent, m.target): TEXT[m.span[0] : m.span[1]] for m in mutations(parsed)}
    assert covered == {
        (
            MutationKind.ROLLBACK_ROLE,
            "plan",
            "planner",
        ): "|\n      Break it down.\n      Keep it short.\n",
        (MutationKind.DOWNGRADE_CAPACITY, "plan", "medium"): "large",
        (MutationKind.ROLLBACK_ROLE, "solve", "math_solver"): "'Solve, carefully.'",
        (MutationKind.DOWNGRADE_CAPACITY, "solve", "small"): "medium",
        (MutationKind.DROP_DEPENDENCY, "solve", "plan"): "plan",
        (MutationKind.DROP_DEPENDENCY, "judge", "plan"): "plan",
        (MutationKind.DROP_DEPENDENCY, "judge", "solve"): "solve",
    }


def test_mutants_are_valid_and_keep_the_output() -> None:
    parsed = parse_spec(TEXT)
    for mutation in mutations(parsed):
        again = parse_spec(mutation.text)
        assert again.spec.output == "judge"
        assert again.spec == mutation.spec
        changed = [
            (a.name, b.model_dump(), a.model_dump())
            for a, b in zip(parsed.spec.agents, again.spec.agents, strict=True)
            if a != b
        ]
        assert len(changed) == 1
        assert changed[0][0] == mutation.agent


def test_each_kind_edits_only_its_field() -> None:
    parsed = parse_spec(TEXT)
    drop = mutate(parsed, MutationKind.DROP_DEPENDENCY, "judge", "plan")
    assert drop.spec.agents[2].depends_on == ["solve"]
    rollback = mutate(parsed, MutationKind.ROLLBACK_ROLE, "solve", "math_solver")
    assert rollback.spec.agents[1].duties is None
    assert rollback.spec.agents[1].role == "math_solver"
    down = mutate(parsed, MutationKind.DOWNGRADE_CAPACITY, "plan", "medium")
    assert down.spec.agents[0].capacity is Capacity.MEDIUM
    with pytest.raises(KeyError):
        mutate(parsed, MutationKind.DOWNGRADE_CAPACITY, "judge", "small")


def test_dropping_the_only_edge_keeps_output_explicit() -> None:
    text = (
        "agents:\n  - {name: a, role: planner, capacity: small}\n"
        "  - {name: b, role: verifier, capacity: small, depends_on: [a]}\n"
    )
    (drop,) = mutations(parse_spec(text), kinds=[MutationKind.DROP_DEPENDENCY])
    assert drop.spec.output == "b"
    assert parse_spec(drop.text).output == "b"  # two sinks now: output must be explicit


def test_resource_mutants_stay_resources() -> None:
    body = "".join("  " + line + "\n" for line in TEXT.splitlines())
    text = f"apiVersion: lemon.ai/v1alpha1\nkind: LemonSpec\nmetadata:\n  name: m\nspec:\n{body}"
    parsed = parse_spec(text)
    for mutation in mutations(parsed):
        again = parse_spec(mutation.text)
        assert again.resource is not None
        assert again.resource.metadata.name == "m"
        assert mutation.to_json()["span"] == list(mutation.span)
    value = {m.kind: text[m.span[0] : m.span[1]] for m in mutations(parsed)}
    assert value[MutationKind.DOWNGRADE_CAPACITY] in {"large", "medium"}


def test_to_json_keys() -> None:
    (first, *_) = mutations(parse_spec(TEXT))
    assert set(first.to_json()) == {"kind", "agent", "target", "span", "spec"}


def test_default_listing_stays_the_papers_three_kinds() -> None:
    from lemon.spec.mutations import PAPER_KINDS, TWO_WAY_KINDS

    assert {m.kind for m in mutations(parse_spec(TEXT))} == set(PAPER_KINDS)
    both = mutations(parse_spec(TEXT), kinds=[*PAPER_KINDS, *TWO_WAY_KINDS])
    assert Counter(m.kind for m in both) == {
        MutationKind.DROP_DEPENDENCY: 3,
        MutationKind.ROLLBACK_ROLE: 2,
        MutationKind.DOWNGRADE_CAPACITY: 2,
        MutationKind.UPGRADE_CAPACITY: 2,  # small -> medium, medium -> large; large has none
        MutationKind.REMOVE_AGENT: 2,  # plan and solve; judge is the output
    }


def test_upgrade_capacity_goes_one_tier_up_on_the_value() -> None:
    parsed = parse_spec(TEXT)
    ups = mutations(parsed, kinds=[MutationKind.UPGRADE_CAPACITY])
    assert {(m.agent, m.target, TEXT[m.span[0] : m.span[1]]) for m in ups} == {
        ("solve", "large", "medium"),
        ("judge", "medium", "small"),
    }
    for mutation in ups:
        assert mutation.credit_span == mutation.span  # a value edit credits the value only
        again = parse_spec(mutation.text)
        assert again.spec.agents[parsed.agent_index[mutation.agent]].capacity.value == (
            mutation.target
        )
    with pytest.raises(KeyError):
        mutate(parsed, MutationKind.UPGRADE_CAPACITY, "plan", "large")  # already large


def test_remove_agent_drops_the_agent_and_every_edge_to_it() -> None:
    parsed = parse_spec(TEXT)
    removed = mutate(parsed, MutationKind.REMOVE_AGENT, "plan", "planner")
    again = parse_spec(removed.text)
    assert [a.name for a in again.spec.agents] == ["solve", "judge"]
    assert again.spec.agents[0].depends_on == []
    assert again.spec.agents[1].depends_on == ["solve"]
    assert again.output == "judge"
    assert TEXT[removed.span[0] : removed.span[1]] == "name: plan"
    assert TEXT[removed.credit_span[0] : removed.credit_span[1]] == "- name: plan"
    assert removed.field == ("plan", "agent")
    assert all(m.agent != "judge" for m in mutations(parsed, kinds=[MutationKind.REMOVE_AGENT]))


def test_removing_agents_keeps_every_mutant_valid() -> None:
    text = (
        "agents:\n  - {name: a, role: planner, capacity: small}\n"
        "  - {name: b, role: math_solver, capacity: small, depends_on: [a]}\n"
        "  - {name: c, role: verifier, capacity: small, depends_on: [a, b]}\n"
    )
    parsed = parse_spec(text)
    found = mutations(parsed, kinds=[MutationKind.REMOVE_AGENT])
    assert [m.agent for m in found] == ["a", "b"]
    for mutation in found:
        again = parse_spec(mutation.text)
        assert again.output == "c"
        names = {agent.name for agent in again.spec.agents}
        assert mutation.agent not in names
        assert all(set(agent.depends_on) <= names for agent in again.spec.agents)
        start, end = mutation.credit_span
        assert text[start:end] == f"name: {mutation.agent}"  # flow mapping: no item indicator


def test_credit_spans_cover_what_creates_the_field() -> None:
    """Presence edits credit the key or indicator that opens the thing; value edits the value."""
    parsed = parse_spec(TEXT)
    credit = {
        (m.kind, m.agent, m.target): TEXT[m.credit_span[0] : m.credit_span[1]]
        for m in mutations(parsed)
    }
    assert credit[(MutationKind.ROLLBACK_ROLE, "solve", "math_solver")] == (
        "duties: 'Solve, carefully.'"
    )
    assert credit[(MutationKind.DOWNGRADE_CAPACITY, "plan", "medium")] == "large"
    assert credit[(MutationKind.DROP_DEPENDENCY, "solve", "plan")] == "- plan"  # block list
    assert credit[(MutationKind.DROP_DEPENDENCY, "judge", "plan")] == "[plan"  # flow list
    assert credit[(MutationKind.DROP_DEPENDENCY, "judge", "solve")] == ", solve"
    for mutation in mutations(parsed):
        assert mutation.credit_span[0] <= mutation.span[0] <= mutation.span[1]
        assert mutation.span[1] == mutation.credit_span[1]


def test_capacity_mutation_reaches_every_tier() -> None:
    from lemon.spec.mutations import capacity_mutation

    parsed = parse_spec(TEXT)
    far = capacity_mutation(parsed, "judge", Capacity.LARGE)
    assert far.kind is MutationKind.UPGRADE_CAPACITY
    assert far.spec.agents[2].capacity is Capacity.LARGE
    assert TEXT[far.span[0] : far.span[1]] == "small"
    down = capacity_mutation(parsed, "plan", Capacity.SMALL)
    assert down.kind is MutationKind.DOWNGRADE_CAPACITY
    assert down.field == ("plan", "capacity")
    with pytest.raises(ValueError, match="already"):
        capacity_mutation(parsed, "solve", Capacity.MEDIUM)
