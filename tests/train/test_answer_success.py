"""The GRPO reward's success term against a task row's gold answer (numbers and letters)."""

from __future__ import annotations

from lemon_train.rewards import answer_success


def test_numbers_and_letters() -> None:
    assert answer_success("So 3 + 4 = 7. The answer is 7.", "7") == 1.0
    assert answer_success("The answer is 8.", "7") == 0.0
    assert answer_success("The answer is (C).", "C") == 1.0
    assert answer_success("The answer is B.", "c") == 0.0
    assert answer_success(None, "7") == 0.0
