"""The `lemon` command as users run it: exit codes, output formats, JSON keys."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import yaml

from tests.conftest import EXAMPLES, ROOT, run_lemon

PLAN_SOLVE = "examples/specs/02-plan-solve-verify.yaml"


def test_validate_ok() -> None:
    result = run_lemon("validate", *map(str, EXAMPLES))
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert f"{len(EXAMPLES)} valid, 0 invalid" in result.stderr


def test_validate_reports_path_as_given(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("agents:\n  - name: a\n    role: planner\n    capacity: gigantic\n")
    relative = "./" + str(bad.relative_to(tmp_path))
    result = run_lemon("validate", relative, str(ROOT / PLAN_SOLVE), cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines == [
        f"{relative}:4:15: agents[0].capacity: Input should be 'small', 'medium' or 'large' "
        "(got 'gigantic')"
    ]


def test_validate_usage_errors_exit_2(tmp_path: Path) -> None:
    assert run_lemon("validate").returncode == 2
    missing = run_lemon("validate", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2
    assert "cannot read" in missing.stderr
    assert "Traceback" not in missing.stderr
    assert run_lemon("validate", str(tmp_path)).returncode == 2
    both = run_lemon("validate", str(tmp_path / "nope.yaml"), PLAN_SOLVE)
    assert both.returncode == 2
    assert "1 valid, 0 invalid, 1 unreadable" in both.stderr
    assert run_lemon("validate", "--max-agents", "0", PLAN_SOLVE).returncode == 2


def test_validate_reads_stdin() -> None:
    result = run_lemon("validate", "-", stdin="agents: []\n")
    assert result.returncode == 1
    assert result.stdout.startswith("-:1:9: ")


def test_compile_json_keys() -> None:
    result = run_lemon("compile", PLAN_SOLVE, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["order"] == ["planner", "solver", "checker"]
    assert data["levels"] == [["planner"], ["solver"], ["checker"]]
    assert data["edges"] == [["planner", "solver"], ["planner", "checker"], ["solver", "checker"]]
    assert data["output"] == "checker"


def test_compile_pictures_and_text() -> None:
    assert run_lemon("compile", PLAN_SOLVE, "--mermaid").stdout.startswith("flowchart TD")
    assert run_lemon("compile", PLAN_SOLVE, "--dot").stdout.startswith("digraph lemon {")
    assert "level 1: solver" in run_lemon("compile", PLAN_SOLVE).stdout


def test_compile_invalid_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "cycle.yaml"
    bad.write_text(
        "agents:\n  - {name: a, role: planner, capacity: small, depends_on: [b]}\n"
        "  - {name: b, role: planner, capacity: small, depends_on: [a]}\n"
    )
    result = run_lemon("compile", str(bad), "--json")
    assert result.returncode == 1
    assert result.stdout == ""
    assert f"{bad}:2:60: dependency cycle: a -> b -> a" in result.stderr


def test_mutate_json_lines() -> None:
    result = run_lemon("mutate", PLAN_SOLVE, "--json")
    assert result.returncode == 0, result.stderr
    text = (ROOT / PLAN_SOLVE).read_text()
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(records) == 7
    for record in records:
        assert set(record) == {"kind", "agent", "target", "span", "spec"}
        start, end = record["span"]
        assert 0 <= start < end <= len(text)
        mutant = yaml.safe_load(record["spec"])
        assert mutant["output"] == "checker"
    kinds = [r["kind"] for r in records]
    assert kinds.count("drop_dependency") == 3
    assert kinds.count("rollback_role") == 2
    assert kinds.count("downgrade_capacity") == 2
    only = run_lemon("mutate", PLAN_SOLVE, "--json", "--kind", "downgrade_capacity")
    assert len(only.stdout.splitlines()) == 2


def test_fmt_check_write_and_stdout(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    original = (ROOT / PLAN_SOLVE).read_text()
    path.write_text(original)
    assert run_lemon("fmt", "--check", str(path)).returncode == 1
    printed = run_lemon("fmt", "--stdout", str(path))
    assert printed.returncode == 0
    assert path.read_text() == original
    assert run_lemon("fmt", str(path)).returncode == 0
    assert path.read_text() == printed.stdout
    assert run_lemon("fmt", "--check", str(path)).returncode == 0
    assert list(tmp_path.iterdir()) == [path]  # no temp file left behind


def test_fmt_leaves_invalid_files_alone(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("agents: [\n")
    result = run_lemon("fmt", str(path))
    assert result.returncode == 1
    assert path.read_text() == "agents: [\n"


def test_schema_accepts_examples_and_rejects_junk() -> None:
    result = run_lemon("schema")
    assert result.returncode == 0
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for path in EXAMPLES:
        validator.validate(yaml.safe_load(path.read_text()))
    errors = list(validator.iter_errors({"agents": [{"name": "A", "capacity": "huge"}]}))
    assert errors
    roles = schema["$defs"]["Agent"]["properties"]["role"]["examples"]
    assert "math_solver" in roles


def test_roles_listing() -> None:
    result = run_lemon("roles", "--json")
    names = [role["name"] for role in json.loads(result.stdout)]
    assert "knowledge_expert" in names
    assert len(names) >= 8


def test_unknown_benchmark_is_a_usage_error() -> None:
    result = run_lemon("bench", "no-such-thing", "--json")
    assert result.returncode == 2
    assert "unknown benchmark" in result.stderr


def test_bench_spec_reports_a_ratio() -> None:
    result = run_lemon("bench", "spec", "--json", "--rounds", "1", "--seconds", "0.05")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["benchmark"] == "spec"
    assert data["ratio"] > 0
    assert [case["agents"] for case in data["cases"]] == [8, 64]


def test_mutate_takes_the_two_way_kinds() -> None:
    text = (ROOT / PLAN_SOLVE).read_text()
    result = run_lemon(
        "mutate", PLAN_SOLVE, "--json", "--kind", "upgrade_capacity", "--kind", "remove_agent"
    )
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert {r["kind"] for r in records} == {"upgrade_capacity", "remove_agent"}
    for record in records:
        mutant = yaml.safe_load(record["spec"])
        assert mutant["output"] == "checker"
        start, end = record["span"]
        if record["kind"] == "remove_agent":
            assert text[start:end] == f"name: {record['agent']}"
            assert record["agent"] not in {a["name"] for a in mutant["agents"]}
    bad = run_lemon("mutate", PLAN_SOLVE, "--kind", "teleport")
    assert bad.returncode == 2
