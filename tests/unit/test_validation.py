"""Validation: every rejection is located at its YAML node, all in one pass."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lemon.spec import (
    LemonSpec,
    RoleLibrary,
    SpecError,
    ValidationOptions,
    builtin_roles,
    load_roles,
    load_spec,
    parse_spec,
)
from lemon.spec.source import MAX_DEPTH
from tests.conftest import EXAMPLES

GOOD = """\
agents:
  - name: planner
    role: planner
    duties: "List the steps."
    capacity: small
  - name: solver
    role: math_solver
    capacity: large
    depends_on: [planner]
output: solver
"""


def errors(text: str, **options: object) -> list[tuple[int, int, str]]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, options=ValidationOptions(**options))  # type: ignore[arg-type]
    return [(issue.line, issue.column, issue.message) for issue in info.value.issues]


def only_error(text: str, **options: object) -> tuple[int, int, str]:
    found = errors(text, **options)
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_are_valid(path: Path) -> None:
    parsed = load_spec(path)
    assert parsed.output in {agent.name for agent in parsed.spec.agents}


def test_good_spec_parses_to_typed_models() -> None:
    parsed = parse_spec(GOOD)
    assert [a.name for a in parsed.spec.agents] == ["planner", "solver"]
    assert parsed.spec.agents[1].depends_on == ["planner"]
    assert parsed.spec.agents[0].capacity == "small"
    assert parsed.output == "solver"
    assert parsed.resource is None
    assert parsed.warnings == ()


def test_resource_form_is_accepted_and_equivalent() -> None:
    body = "".join("  " + line + "\n" for line in GOOD.splitlines())
    text = f"apiVersion: lemon.ai/v1alpha1\nkind: LemonSpec\nmetadata:\n  name: demo\nspec:\n{body}"
    parsed = parse_spec(text)
    assert isinstance(parsed.resource, LemonSpec)
    assert parsed.resource.metadata.name == "demo"
    bare = parse_spec(GOOD).spec
    assert parsed.spec.agents == bare.agents
    assert parsed.base == ("spec",)


def test_implicit_output_is_the_only_sink() -> None:
    parsed = parse_spec(GOOD.replace("output: solver\n", ""))
    assert parsed.spec.output is None
    assert parsed.output == "solver"


def test_every_independent_error_is_reported_in_one_pass() -> None:
    text = """\
agents:
  - name: Planner
    role: plannr
    capacity: huge
    extra: 1
  - name: solver
    role: math_solver
    capacity: small
    depends_on: [ghost, solver]
  - name: solver
    role: critic
    capacity: small
output: nobody
"""
    found = errors(text)
    assert [(line, col) for line, col, _ in found] == [
        (2, 11),
        (3, 11),
        (4, 15),
        (5, 5),
        (9, 18),
        (9, 25),
        (10, 11),
        (13, 9),
    ]
    messages = " | ".join(message for _, _, message in found)
    for expected in (
        "'Planner' is not a valid name",
        "unknown role 'plannr'; did you mean 'planner'?",
        "Input should be 'small', 'medium' or 'large'",
        "unknown key 'extra'",
        "depends on unknown agent 'ghost'",
        "'solver' depends on itself",
        "duplicate agent name 'solver'",
        "output names unknown agent 'nobody'",
    ):
        assert expected in messages


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ("agents: [\n", 2, 1, "YAML syntax error"),
        ("agents:\n  - name: a\n\tx: 1\n", 3, 1, "YAML syntax error"),
        ("- 1\n- 2\n", 1, 1, "root must be a mapping"),
        ("just text\n", 1, 1, "root must be a mapping"),
        ("", 1, 1, "empty document"),
        ("agents: []\n", 1, 9, "no agents"),
        ("agents:\n  - name: a\n    role: planner\n", 2, 5, "missing required key 'capacity'"),
        ("agents:\n  - name: a\n    role: planner\n    capacity: 3\n", 4, 15, "capacity"),
        (
            "agents:\n  - name: a\n    role: planner\n    capacity: small\n    depends_on: a\n",
            5,
            17,
            "depends_on",
        ),
        ("agents:\n  - name: a\n    role: wizard\n    capacity: small\n", 3, 11, "unknown role"),
        (
            "agents:\n  - name: a\n    role: planner\n    capacity: small\n    duties: ''\n",
            5,
            13,
            "duties",
        ),
        (
            "agents:\n  - name: a\n    role: planner\n    capacity: small\n    duties: '  '\n",
            5,
            13,
            "duties",
        ),
        (
            "agents:\n  - name: a\n    role: planner\n    capacity: small\noutput: 7\n",
            5,
            9,
            "output",
        ),
        (
            "agents:\n  - name: a\n    role: planner\n    capacity: small\n    capacity: large\n",
            5,
            5,
            "duplicate key 'capacity'",
        ),
        (
            "agents:\n  - name: a\n    role: planner\n"
            "    capacity: !!python/name:os.system small\n",
            4,
            15,
            "unsupported YAML tag",
        ),
        (
            "agents:\n  - name: a\n    role: planner\n    capacity: small\n    1: x\n",
            5,
            5,
            "keys must be plain strings",
        ),
        ("a: 1\n---\nb: 2\n", 2, 1, "YAML syntax error"),
        (
            "agents:\n  - name: a\n    role: planner\n    capacity: small\nstatus: {}\n",
            5,
            1,
            "unknown key 'status'",
        ),
    ],
)
def test_rejections_are_located(text: str, line: int, column: int, fragment: str) -> None:
    found = errors(text)
    assert any(
        (found_line, found_col) == (line, column) and fragment in message
        for found_line, found_col, message in found
    ), found


def test_self_reference_and_dangling_reference() -> None:
    text = GOOD.replace("depends_on: [planner]", "depends_on: [solver, planer]")
    found = errors(text)
    assert found[0][:2] == (9, 18)
    assert "depends on itself" in found[0][2]
    assert found[1][:2] == (9, 26)
    assert "did you mean 'planner'?" in found[1][2]


def test_dependency_listed_twice() -> None:
    line, col, message = only_error(GOOD.replace("[planner]", "[planner, planner]"))
    assert (line, col) == (9, 27)
    assert "listed twice" in message


def test_cycle_is_named() -> None:
    text = """\
agents:
  - name: a
    role: planner
    capacity: small
    depends_on: [c]
  - name: b
    role: planner
    capacity: small
    depends_on: [a]
  - name: c
    role: planner
    capacity: small
    depends_on: [b]
  - name: d
    role: aggregator
    capacity: small
    depends_on: [a]
"""
    line, col, message = only_error(text)
    assert (line, col) == (5, 18)
    assert "dependency cycle: a -> c -> b -> a" in message


def test_two_cycles_are_both_reported() -> None:
    text = """\
agents:
  - {name: a, role: planner, capacity: small, depends_on: [b]}
  - {name: b, role: planner, capacity: small, depends_on: [a]}
  - {name: c, role: planner, capacity: small, depends_on: [d]}
  - {name: d, role: planner, capacity: small, depends_on: [c]}
  - {name: e, role: planner, capacity: small, depends_on: [a, c]}
"""
    found = errors(text)
    assert [m for _, _, m in found] == [
        "dependency cycle: a -> b -> a (each agent depends on the next)",
        "dependency cycle: c -> d -> c (each agent depends on the next)",
    ]


def test_ambiguous_output() -> None:
    text = GOOD.replace("    depends_on: [planner]\n", "").replace("output: solver\n", "")
    line, col, message = only_error(text)
    assert (line, col) == (2, 3)
    assert "output is ambiguous: 2 agents have no dependants (planner, solver)" in message


def test_agent_limit_is_configurable() -> None:
    agents = "".join(f"  - {{name: a{i}, role: planner, capacity: small}}\n" for i in range(5))
    text = f"agents:\n{agents}output: a0\n"
    line, _, message = only_error(text, max_agents=4)
    assert line == 6
    assert "too many agents: 5 (the limit is 4)" in message
    assert len(parse_spec(text, options=ValidationOptions(max_agents=5)).spec.agents) == 5


def test_default_limit_is_64() -> None:
    agents = "".join(f"  - {{name: a{i}, role: planner, capacity: small}}\n" for i in range(65))
    _, _, message = only_error(f"agents:\n{agents}output: a0\n")
    assert "the limit is 64" in message


def test_wrong_api_version_and_kind_are_located() -> None:
    text = "apiVersion: v1\nkind: Pod\nspec:\n  agents: []\n"
    found = errors(text)
    assert [(line, col) for line, col, _ in found] == [(1, 13), (2, 7), (4, 11)]


def test_oversized_document_is_rejected_before_parsing() -> None:
    text = GOOD + "#" + "x" * (1 << 20) + "\n"
    started = time.perf_counter()
    line, col, message = only_error(text)
    assert time.perf_counter() - started < 5
    assert (line, col) == (1, 1)
    assert "the limit is 1048576 bytes" in message


def test_alias_bomb_is_rejected_quickly() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 12)]
    text = "\n".join(lines) + "\n"
    started = time.perf_counter()
    found = errors(text)
    assert time.perf_counter() - started < 5  # generous; it takes milliseconds
    assert len(found) == 110
    assert all("aliases are not allowed" in message for _, _, message in found)
    assert found[0][:2] == (2, 10)


def test_recursive_alias_is_rejected() -> None:
    found = errors("agents: &a [*a]\n")
    assert found[0][:2] == (1, 13)


def test_deep_nesting_is_bounded() -> None:
    depth = MAX_DEPTH + 5
    found = errors("agents: " + "[" * depth + "]" * depth + "\n")
    assert any("nesting deeper than" in message for _, _, message in found)
    found = errors("agents: " + "[" * 5000 + "]" * 5000 + "\n")
    assert found  # libyaml's own nesting limit: a located syntax error, not a crash


def test_block_nesting_is_bounded() -> None:
    found = errors("agents:\n" + "- " * (MAX_DEPTH + 5) + "x\n")
    assert any("nesting deeper than" in message for _, _, message in found)
    found = errors("agents:\n" + "- " * 3000 + "x\n")
    assert found[0][0] == 2  # libyaml's own limit, located


def test_non_utf8_file_is_located(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"agents:\n  - name: \xff\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    issue = info.value.issues[0]
    assert (issue.line, issue.column) == (2, 11)
    assert "not valid UTF-8" in issue.message


def test_crlf_and_unicode_keep_character_offsets(tmp_path: Path) -> None:
    text = GOOD.replace('"List the steps."', '"Liste les étapes — vite."').replace("\n", "\r\n")
    path = tmp_path / "crlf.yaml"
    path.write_bytes(text.encode())
    parsed = load_spec(path)
    start, end = parsed.source_map.span(("agents", 0, "duties"))
    assert parsed.text[start:end] == '"Liste les étapes — vite."'


def test_error_source_is_printed_as_given() -> None:
    with pytest.raises(SpecError) as info:
        parse_spec("agents: []\n", source="./weird path/x.yaml")
    assert info.value.render() == "./weird path/x.yaml:1:9: no agents: a spec needs at least one"


def test_unused_agent_is_a_warning_not_an_error() -> None:
    text = GOOD.replace("    depends_on: [planner]\n", "")
    parsed = parse_spec(text)
    assert [w.message for w in parsed.warnings] == [
        "warning: agent 'planner' does not feed the output agent 'solver'"
    ]


def test_user_roles_extend_the_library(tmp_path: Path) -> None:
    role_file = tmp_path / "roles.yaml"
    role_file.write_text(
        "roles:\n"
        "  - name: translator\n"
        "    description: Translates.\n"
        "    duties: Translate the text.\n"
        "    output_format: the translation.\n"
        "    template: '{duties} {task} {inputs} {output_format}'\n"
    )
    text = "agents:\n  - name: t\n    role: translator\n    capacity: small\n"
    assert "unknown role" in only_error(text)[2]
    library = builtin_roles().merged(load_roles(role_file))
    parsed = parse_spec(text, options=ValidationOptions(roles=library))
    assert parsed.spec.agents[0].role == "translator"


def test_bad_role_file_is_located(tmp_path: Path) -> None:
    role_file = tmp_path / "roles.yaml"
    role_file.write_text(
        "roles:\n  - name: Bad Name\n    description: x\n    duties: y\n"
        "    output_format: z\n    template: '{nope}'\n"
    )
    with pytest.raises(SpecError) as info:
        load_roles(role_file)
    rendered = info.value.render()
    assert f"{role_file}:2:11:" in rendered
    assert f"{role_file}:6:15:" in rendered
    assert "unknown placeholders ['nope']" in rendered


def test_builtin_library_has_the_eight_base_roles() -> None:
    roles = builtin_roles()
    assert {
        "planner",
        "math_solver",
        "verifier",
        "programmer",
        "tester",
        "critic",
        "aggregator",
        "knowledge_expert",
    } <= set(roles)
    for role in roles.values():
        prompt = role.render(task="TASK-TEXT", inputs="INPUTS-TEXT")
        assert "TASK-TEXT" in prompt
        assert "INPUTS-TEXT" in prompt
        assert role.duties in prompt
        assert role.output_format in prompt


def test_empty_role_library_rejects_every_role() -> None:
    text = "agents:\n  - name: a\n    role: planner\n    capacity: small\n"
    assert "unknown role" in only_error(text, roles=RoleLibrary())[2]
