"""Property-based tests over random valid specs and random corruptions of their text."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lemon.spec import (
    MutationKind,
    SpecError,
    builtin_roles,
    compile_spec,
    format_spec,
    mutations,
    parse_spec,
)
from tests.strategies import STYLES, render, spec_data

ROLES = builtin_roles()
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(data=spec_data(), style=STYLES)
def test_random_valid_specs_validate_and_compile(data: dict[str, Any], style: str) -> None:
    parsed = parse_spec(render(data, style))
    assert [a.name for a in parsed.spec.agents] == [a["name"] for a in data["agents"]]
    dag = compile_spec(parsed.spec, output=parsed.output)
    position = {name: i for i, name in enumerate(dag.order)}
    level_of = {name: i for i, level in enumerate(dag.levels) for name in level}
    assert sorted(position) == sorted(a["name"] for a in data["agents"])
    for agent in parsed.spec.agents:
        for dep in agent.depends_on:
            assert position[dep] < position[agent.name]
            assert level_of[dep] < level_of[agent.name]
    assert len(dag.edges) == sum(len(a.get("depends_on", [])) for a in data["agents"])
    assert dag.critical_path_length == len(dag.levels)


@SETTINGS
@given(data=spec_data(), style=STYLES)
def test_every_mutation_is_valid_and_its_span_holds_the_value(
    data: dict[str, Any], style: str
) -> None:
    text = render(data, style)
    parsed = parse_spec(text)
    by_name = {a["name"]: a for a in data["agents"]}
    found = mutations(parsed)
    expected = sum(
        len(a.get("depends_on", []))
        + ("duties" in a)
        + (a["capacity"] != "small" and not ROLES[a["role"]].is_tool)  # tools keep their tier
        for a in data["agents"]
    )
    assert len(found) == expected
    for mutation in found:
        mutant = parse_spec(mutation.text)
        assert mutant.spec.output == parsed.output
        start, end = mutation.span
        edited = yaml.safe_load(text[start:end])  # the span is a YAML scalar on its own
        original = by_name[mutation.agent]
        if mutation.kind is MutationKind.DROP_DEPENDENCY:
            assert edited == mutation.target
            assert mutation.target in original["depends_on"]
        elif mutation.kind is MutationKind.ROLLBACK_ROLE:
            assert edited == original["duties"]
        else:
            assert edited == original["capacity"]


@SETTINGS
@given(data=spec_data())
def test_canonical_format_round_trips(data: dict[str, Any]) -> None:
    parsed = parse_spec(render(data, "block"))
    text = format_spec(parsed.spec, output=parsed.output)
    again = parse_spec(text)
    assert again.spec == parsed.spec.model_copy(update={"output": parsed.output})
    assert format_spec(again.spec) == text


CORRUPTIONS = st.sampled_from(["delete", "insert", "replace", "swap_lines", "truncate"])
JUNK = st.text(alphabet=":-[]{}&*!|>'\"#%@`, \n\tabcXYZ0123\u00e9", min_size=1, max_size=8)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=spec_data(max_agents=6), style=STYLES, how=CORRUPTIONS, rnd=st.randoms(), junk=JUNK)
def test_corrupted_text_gives_located_errors_never_exceptions(
    data: dict[str, Any], style: str, how: str, rnd: Any, junk: str
) -> None:
    text = render(data, style)
    i = rnd.randrange(len(text))
    j = min(len(text), i + rnd.randrange(1, 12))
    if how == "delete":
        text = text[:i] + text[j:]
    elif how == "insert":
        text = text[:i] + junk + text[i:]
    elif how == "replace":
        text = text[:i] + junk + text[j:]
    elif how == "swap_lines":
        lines = text.splitlines(keepends=True)
        a, b = rnd.randrange(len(lines)), rnd.randrange(len(lines))
        lines[a], lines[b] = lines[b], lines[a]
        text = "".join(lines)
    else:
        text = text[:i]
    try:
        parse_spec(text)
    except SpecError as exc:
        error: SpecError | None = exc
    else:
        error = None
    if error is not None:
        assert error.issues
        line_count = text.count("\n") + 2
        for issue in error.issues:
            assert 1 <= issue.line <= line_count
            assert issue.column >= 1
            assert issue.message
