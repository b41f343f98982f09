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
