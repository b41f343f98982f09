"""The selection and repair tool roles: vote, nearest option, the task's examples (real sandbox)."""

from __future__ import annotations

import asyncio
import gzip
import json

import pytest

from lemon.backends.scripted import ScriptedBackend, ScriptedConfig, ScriptedRule
from lemon.data.paths import data_dir
from lemon.engine import RunStatus, execute
from lemon.engine.examples import parse_examples, run_examples, task_function
from lemon.engine.voting import nearest_option, option_number, stated_answer, vote
from lemon.policy.columns import COLUMNS, column, replica_of
from lemon.spec import Capacity, builtin_roles
from lemon.tasks import TaskKind, choice_options, item_prefills, prefills

AQUA = (
    "A train covers 60 km in 1.5 hours. What is its speed?\n\nAnswer Choices:\n"
    "(A) 30 km/h\n(B) 40 km/h\n(C) 45 km/h\n(D) 90 km/h\n(E) Rs. 1,200"
)
CODE = (
    "Complete this Python function:\n\n```python\ndef add(a, b):\n"
    '    """Add two numbers.\n    >>> add(2, 3)\n    5\n    add(1, 1) == 2\n'
    '    add(0, 0) => true\n    """\n```'
)


def test_choice_options_reads_the_lettered_lines() -> None:
    assert choice_options(AQUA)[:2] == [("A", "30 km/h"), ("B", "40 km/h")]
    assert choice_options("What is 2 + 2?") == []


@pytest.mark.parametrize(
    ("text", "value"),
    [("30 km/h", 30.0), ("Rs. 1,200", 1200.0), ("3/4", 0.75), ("-2.5 m", -2.5), ("none", None)],
)
def test_option_number(text: str, value: float | None) -> None:
    assert option_number(text) == value


def test_nearest_option_maps_a_computed_number() -> None:
    assert nearest_option(["41.9"], task=AQUA).endswith("The answer is B.")
    assert nearest_option(["Error: NameError"], task=AQUA) == "The computation stated no number."
    assert "no answer choices" in nearest_option(["4"], task="What is 2 + 2?")


def test_vote_takes_the_majority_and_ties_go_to_the_first() -> None:
    task = "What is 6 times 7?"
    assert vote(["42", "The answer is 41.", "42.0"], task=task).endswith("The answer is 42.")
    assert vote(["The answer is 41.", "42", "nothing"], task=task).endswith("The answer is 41.")
    assert "No dependency stated an answer" in vote(["none", "no"], task="Who?")
    letters = vote(["The answer is C.", "(B)", "The answer is B"], task=AQUA)
    assert letters.endswith("The answer is B.")
    assert stated_answer("The answer is 8.0", task=task) == "8"


def test_examples_are_parsed_from_the_docstring_only() -> None:
    found = task_function(CODE)
    assert found is not None
    code, entry = found
    assert entry == "add"
    examples = parse_examples(code, entry)
    assert [(e.call, e.expected) for e in examples] == [
        ("add(2, 3)", "5"),
        ("add(1, 1)", "2"),
        ("add(0, 0)", "true"),  # not a Python value: skipped when run, never guessed
    ]


def test_every_humaneval_prompt_parses_and_most_give_examples() -> None:
    path = data_dir() / "humaneval" / "HumanEval.jsonl.gz"
    assert path.exists(), f"no HumanEval file at {path} (lemon data says where it looks)"
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        items = [json.loads(line) for line in lines]
    with_examples = sum(bool(parse_examples(i["prompt"], i["entry_point"])) for i in items)
    assert with_examples >= 140, with_examples  # 164 prompts; a few state no example


def test_examples_run_in_the_sandbox_and_report_failures() -> None:
    right = asyncio.run(
        run_examples(["```python\ndef add(a, b):\n    return a + b\n```"], task=CODE)
    )
    assert right.ok
    assert right.output == "Ran 2 of the task's examples: 2 passed, 0 failed."
    wrong = asyncio.run(
        run_examples(["```python\ndef add(a, b):\n    return a - b\n```"], task=CODE)
    )
    assert wrong.output.splitlines() == [
        "Ran 2 of the task's examples: 0 passed, 2 failed.",
        "add(2, 3): returned -1, expected 5",
        "add(1, 1): returned 0, expected 2",
    ]
    broken = asyncio.run(run_examples(["```python\ndef add(a, b) return\n```"], task=CODE))
    assert broken.output.startswith("The code does not run: SyntaxError")
    raising = asyncio.run(run_examples(["def add(a, b):\n    return a / 0\n"], task=CODE))
    assert "add(2, 3): raised ZeroDivisionError" in raising.output
    none = asyncio.run(run_examples(["x"], task="Complete this:\n```python\nx = 1\n```"))
    assert none.output == "The task defines no function to run examples on."


def _tiers(*rules: ScriptedRule) -> dict[Capacity, ScriptedBackend]:
    config = ScriptedConfig(rules=rules)
    return {tier: ScriptedBackend(config, tier=tier.value) for tier in Capacity}


def test_repair_team_reads_the_failures_and_its_fix_is_the_answer() -> None:
    team = column("repair-medium").spec(TaskKind.CODE)
    tiers = _tiers(
        ScriptedRule(
            match="fixing code", output="```python\ndef add(a, b):\n    return a + b\n```"
        ),
        ScriptedRule(output="```python\ndef add(a, b):\n    return a - b\n```"),
    )
    result = asyncio.run(execute(team, task=CODE, backends=tiers))
    assert result.status is RunStatus.SUCCEEDED
    _coder, check, _fix = result.agents
    assert check.model == "tool:examples"
    assert check.output.startswith("Ran 2")
    assert "returned -1, expected 5" in check.output
    assert "return a + b" in (result.answer or "")
    assert result.calls == 2  # coder and repairer; the examples are no model call


def test_vote_team_answers_by_majority() -> None:
    team = column("vote-math").spec(TaskKind.MATH)
    tiers = _tiers(
        ScriptedRule(match="Python", output="6 * 7\n```"),
        ScriptedRule(output="The answer is 41."),
    )
    options_prefill = {"prefill": prefills(TaskKind.MATH)}
    from lemon.engine import ExecutionOptions

    result = asyncio.run(
        execute(
            team,
            task="What is 6 times 7?",
            backends=tiers,
            options=ExecutionOptions(**options_prefill),
        )
    )
    assert result.status is RunStatus.SUCCEEDED
    assert result.answer is not None
    assert result.answer.endswith("The answer is 42.")


def test_pot_choice_team_picks_the_nearest_option() -> None:
    team = column("pot-choice-small").spec(TaskKind.MULTIPLE_CHOICE)
    tiers = _tiers(ScriptedRule(output="60 / 1.5\n```"))
    from lemon.engine import ExecutionOptions

    options = ExecutionOptions(prefill=prefills(TaskKind.MULTIPLE_CHOICE, AQUA))
    result = asyncio.run(execute(team, task=AQUA, backends=tiers, options=options))
    assert result.answer is not None
    assert result.answer.endswith("The answer is B.")


def test_numeric_choices_prefill_the_programmer_and_word_choices_do_not() -> None:
    assert prefills(TaskKind.MULTIPLE_CHOICE, AQUA) == prefills(TaskKind.MATH)
    words = "Which is a noble gas?\n\nAnswer Choices:\n(A) helium\n(B) iron\n(C) salt\n(D) water"
    assert prefills(TaskKind.MULTIPLE_CHOICE, words) == {}
    from lemon.data.items import ChoiceItem

    item = ChoiceItem(
        id="x",
        benchmark="mmlu",
        question="Which?",
        options=("helium", "iron", "salt", "water"),
        answer="A",
    )
    assert item_prefills(item) == {}


def test_the_new_roles_are_tools_but_the_repairer() -> None:
    roles = builtin_roles()
    assert [roles[n].tool for n in ("voter", "option_picker", "example_runner")] == [
        "vote",
        "nearest_option",
        "examples",
    ]
    assert not roles["repairer"].is_tool


def test_every_greedy_team_has_a_replica_with_a_recorded_seed() -> None:
    greedy = [c for c in COLUMNS.values() if not c.sampled]
    for col in greedy:
        replica = COLUMNS[f"{col.name}-r1"]
        assert (replica.temperature, replica.seed) == (0.7, 1)
        assert replica.agents == col.agents
        assert replica_of(replica.name) == col.name
    assert replica_of("single-medium") is None
    # the replica of one medium solver asks exactly sample-medium-1's question
    assert COLUMNS["single-medium-r1"].agents == COLUMNS["sample-medium-1"].agents
