"""A training row's own gold answer is scored by the one success rule (numbers and letters)."""

from __future__ import annotations

import pytest

from lemon.data.items import ChoiceItem, gold_item
from lemon.scoring import item_success

TASK = "Pick one.\n\nAnswer Choices:\n(A) 3\n(B) 4\n(C) seven\n(D) 8"


def test_numbers_and_letters() -> None:
    assert item_success(gold_item("3 + 4?", "7"), "So 3 + 4 = 7. The answer is 7.") == 1.0
    assert item_success(gold_item("3 + 4?", "7"), "The answer is 8.") == 0.0
    assert item_success(gold_item(TASK, "C"), "The answer is (C).") == 1.0
    assert item_success(gold_item(TASK, "c"), "The answer is B.") == 0.0
    assert item_success(gold_item("3 + 4?", "7"), None) == 0.0
    # the option's text counts, as it does for benchmark items
    assert item_success(gold_item(TASK, "C"), "It is seven.") == 1.0
    choice = gold_item(TASK, "C")
    assert isinstance(choice, ChoiceItem)
    assert choice.options == ("3", "4", "seven", "8")


def test_a_gold_answer_of_no_known_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="neither a number nor a letter"):
        gold_item("task", "seven")
