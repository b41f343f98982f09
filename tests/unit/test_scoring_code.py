"""HumanEval scoring in the real sandbox: both output forms, and outputs that must fail."""

from __future__ import annotations

import pytest

from lemon.data import CodeItem, load_items
from lemon.sandbox import SandboxConfig
from lemon.scoring import Prediction, score_predictions
from lemon.scoring.code import build_program, code_body, score_code

CONFIG = SandboxConfig(timeout_s=10, cpu_s=5)


def _item(index: int) -> CodeItem:
    item = load_items("humaneval")[index]
    assert isinstance(item, CodeItem)
    return item


def test_all_canonical_solutions_pass() -> None:
    items = [i for i in load_items("humaneval") if isinstance(i, CodeItem)]
    results = score_code(items, [i.canonical_solution for i in items], config=CONFIG)
    failed = [
        (i.id, r.status, r.stderr[-300:])
        for i, r in zip(items, results, strict=True)
        if not r.passed
    ]
    assert failed == []


def test_full_definition_form_passes() -> None:
    item = _item(0)
    full = (
        "Here is my solution:\n```python\nfrom typing import List\n\n"
        "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
        "    return any(abs(a - b) < threshold for i, a in enumerate(numbers)\n"
        "               for j, b in enumerate(numbers) if i != j)\n```\nDone."
    )
    assert code_body(full).startswith("from typing import List")
    [result] = score_code([item], [full], config=CONFIG)
    assert result.passed, result.stderr


def test_wrong_solutions_fail() -> None:
    item = _item(0)
    [wrong, empty] = score_code([item, item], ["    return True\n", ""], config=CONFIG)
    assert not wrong.passed
    assert not empty.passed


@pytest.mark.parametrize(
    "escape",
    [
        "    import sys; sys.exit(0)\n",
        "    import os; os._exit(0)\n",
        "    raise SystemExit(0)\n",
    ],
)
def test_exiting_before_the_tests_finish_fails(escape: str) -> None:
    item = _item(0)
    [result] = score_code([item], [escape], config=CONFIG)
    assert result.returncode == 0  # a clean exit, before the checks ran: still not a pass
    assert not result.passed


def test_program_layout() -> None:
    item = _item(2)
    program = build_program(item, "    return number % 1.0\n")
    assert program.startswith(item.prompt + "    return number % 1.0\n")
    assert program.rstrip().endswith(f"check({item.entry_point})")


def test_score_predictions_reports_sandbox_status() -> None:
    item = _item(0)
    predictions = [
        Prediction(id=item.id, output=item.canonical_solution),
        Prediction(id=item.id, output="    while True: pass\n"),
    ]
    report = score_predictions(
        "humaneval", predictions, sandbox=SandboxConfig(timeout_s=2, cpu_s=1)
    )
    assert (report.items[0].correct, report.items[0].extracted) == (True, "passed")
    assert report.items[1].correct is False
    assert report.items[1].extracted in {"timeout", "failed"}
    assert (report.n, report.correct) == (2, 1)
