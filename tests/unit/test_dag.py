"""The DAG compiler: order, levels, edges, output and critical path."""

from __future__ import annotations

import pytest

from lemon.spec import Spec, compile_spec, parse_spec

DIAMOND = """\
agents:
  - {name: plan, role: planner, capacity: small}
  - {name: left, role: math_solver, capacity: medium, depends_on: [plan]}
  - {name: right, role: math_solver, capacity: large, depends_on: [plan]}
  - {name: check, role: verifier, capacity: small, depends_on: [left]}
  - {name: judge, role: aggregator, capacity: large, depends_on: [check, right]}
"""


def test_diamond() -> None:
    parsed = parse_spec(DIAMOND)
    dag = compile_spec(parsed.spec, output=parsed.output)
    assert dag.order == ("plan", "left", "right", "check", "judge")
    assert dag.levels == (("plan",), ("left", "right"), ("check",), ("judge",))
    assert dag.edges == (
        ("plan", "left"),
        ("plan", "right"),
        ("left", "check"),
        ("check", "judge"),
        ("right", "judge"),
    )
    assert dag.output == "judge"
    assert dag.critical_path == ("plan", "left", "check", "judge")
    assert dag.critical_path_length == 4
    assert dag.to_json()["levels"] == [["plan"], ["left", "right"], ["check"], ["judge"]]


def test_ties_follow_file_order_not_names() -> None:
    text = """\
agents:
  - {name: zeta, role: math_solver, capacity: small}
  - {name: alpha, role: math_solver, capacity: small}
  - {name: mid, role: aggregator, capacity: small, depends_on: [alpha, zeta]}
"""
    dag = compile_spec(parse_spec(text).spec)
    assert dag.order == ("zeta", "alpha", "mid")
    assert dag.levels == (("zeta", "alpha"), ("mid",))
    assert dag.edges == (("alpha", "mid"), ("zeta", "mid"))


def test_declared_after_use_is_fine() -> None:
    text = """\
agents:
  - {name: last, role: aggregator, capacity: small, depends_on: [first]}
  - {name: first, role: planner, capacity: small}
"""
    dag = compile_spec(parse_spec(text).spec)
    assert dag.order == ("first", "last")
    assert dag.output == "last"


def test_single_agent() -> None:
    dag = compile_spec(parse_spec("agents:\n  - {name: a, role: planner, capacity: small}\n").spec)
    assert dag.order == ("a",)
    assert dag.levels == (("a",),)
    assert dag.edges == ()
    assert dag.critical_path == ("a",)


def test_unvalidated_cycle_raises() -> None:
    spec = Spec.model_validate(
        {
            "agents": [
                {"name": "a", "role": "planner", "capacity": "small", "depends_on": ["b"]},
                {"name": "b", "role": "planner", "capacity": "small", "depends_on": ["a"]},
            ]
        }
    )
    with pytest.raises(ValueError, match="cycle"):
        compile_spec(spec)


def test_pictures() -> None:
    dag = compile_spec(parse_spec(DIAMOND).spec)
    mermaid = dag.mermaid()
    assert mermaid.startswith("flowchart TD")
    assert "  plan --> left" in mermaid
    assert "class judge output" in mermaid
    dot = dag.dot()
    assert '"right" -> "judge";' in dot
    assert '{ rank=same; "left"; "right"; }' in dot
