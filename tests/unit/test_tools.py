"""Tool roles: python_executor runs its dependencies' code in the real sandbox."""

from __future__ import annotations

import asyncio
import json

import pytest

from lemon.backends.scripted import ScriptedBackend, ScriptedConfig, ScriptedRule
from lemon.engine import AgentStatus, CallCache, ExecutionOptions, RunStatus, execute
from lemon.engine.tools import extract_code, run_python_tool
from lemon.spec import Capacity, MutationKind, builtin_roles, mutations, parse_spec
from lemon.tasks import COMPUTE_PREFILL

POT = """\
agents:
  - {name: coder, role: programmer, capacity: large}
  - {name: run, role: python_executor, capacity: small, depends_on: [coder], duties: "Run it."}
"""


def test_extract_code_takes_the_last_block_of_the_last_writer() -> None:
    assert extract_code(["```python\na = 1\n```\ntext\n```\nb = 2\n```"]) == "b = 2\n"
    assert extract_code(["```python\nx = 1\n```", "no code here"]) == "x = 1\n"
    assert extract_code(["print(3)"]) == "print(3)"
    assert extract_code(["```python\nanswer = 6 * 7\n"]) == "answer = 6 * 7\n"  # unclosed fence


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("```python\nanswer = 6 * 7\n```", "42"),  # answer is printed for the model
        ("print(sum(range(5)))", "10"),
        ("x = 1 / 0", "Error: ZeroDivisionError: division by zero"),
        ("while True:\n    pass", "Error: the program timed out after 2 s"),
        ("import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=1)", "Error: "),
        ("print(open('/etc/shadow').read())", "Error: "),
    ],
)
def test_python_tool(code: str, expected: str) -> None:
    result = asyncio.run(run_python_tool([code], timeout_s=2))
    assert result.ok
    assert result.output.startswith(expected), result.output


def backends(output: str) -> dict[Capacity, ScriptedBackend]:
    config = ScriptedConfig(rules=(ScriptedRule(output=output),))
    return {tier: ScriptedBackend(config, tier=tier.value) for tier in Capacity}


def test_programmer_then_executor_computes_the_answer() -> None:
    parsed = parse_spec(POT)
    options = ExecutionOptions(prefill={"programmer": COMPUTE_PREFILL})
    result = asyncio.run(
        execute(
            parsed.spec, task="What is 6 times 7?", backends=backends("6 * 7\n```"), options=options
        )
    )
    assert result.status is RunStatus.SUCCEEDED
    assert result.answer == "42"
    coder, run = result.agents
    assert coder.output == "```python\nanswer = 6 * 7\n"  # cut at the closing fence
    assert run.model == "tool:python"
    assert (run.prompt_tokens, run.completion_tokens) == (0, 0)
    assert run.latency_s > 0
    assert result.calls == 1  # the tool is no model call


def test_a_failing_program_is_an_answer_not_a_crash() -> None:
    parsed = parse_spec(POT)
    result = asyncio.run(
        execute(parsed.spec, task="t", backends=backends("```python\nprint(undefined)\n```"))
    )
    assert result.agents[1].status is AgentStatus.SUCCEEDED
    assert "NameError" in (result.answer or "")


def test_tool_results_are_reused() -> None:
    parsed = parse_spec(POT)
    cache = CallCache()
    tiers = backends("```python\nprint(2 + 2)\n```")
    asyncio.run(execute(parsed.spec, task="t", backends=tiers, cache=cache))
    again = asyncio.run(execute(parsed.spec, task="t", backends=tiers, cache=cache))
    assert [a.reused for a in again.agents] == [True, True]
    assert again.answer == "4"


def test_tool_agents_have_no_capacity_mutant() -> None:
    parsed = parse_spec(POT)
    found = mutations(parsed)
    assert {(m.kind, m.agent) for m in found} == {
        (MutationKind.DOWNGRADE_CAPACITY, "coder"),
        (MutationKind.DROP_DEPENDENCY, "run"),
        (MutationKind.ROLLBACK_ROLE, "run"),
    }
    for mutation in found:
        assert parse_spec(mutation.text).spec == mutation.spec


def test_python_executor_is_an_ordinary_base_role() -> None:
    role = builtin_roles()["python_executor"]
    assert role.is_tool
    assert role.tool == "python"
    assert not builtin_roles()["programmer"].is_tool


def test_template_policy_compute_variant_runs_a_python_executor() -> None:
    from tests.conftest import run_lemon

    result = run_lemon("run", "--profile", "scripted", "--template", "compute", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [a["name"] for a in data["agents"]] == ["planner", "coder", "run", "verifier"]
    run = data["agents"][2]
    assert run["model"] == "tool:python"
    assert run["prompt_tokens"] == run["completion_tokens"] == 0
    assert data["agents"][1]["output"].startswith("```python\nanswer = ")  # the prefill
    assert data["spec_origin"] == "template policy (math, compute)"
