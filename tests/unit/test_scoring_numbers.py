"""Numeric extraction and equality."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lemon.data import NumericItem, split_items
from lemon.scoring import extract_number, numbers_equal


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is 42.", 42),
        ("5 apples, then 7 pears. The answer is 12", 12),
        ("First 3, then 4.\n#### 1,234", 1234),
        ("We get \\boxed{17} and then check 18", 17),
        ("\\boxed{\\frac{3}{4}} is it; 9 steps", 0.75),
        ("Answer: -$1,234.50 in total, 9 days", -1234.5),
        ("The final answer is: 7 and not 9", 7),
        ("So the answer is 5 - 3 = 2 and 99 others", 2),
        ("the answer is $18.\n\nCheck: 16 - 3 - 4 = 9, 9 * 2 = 18.5", 18),
        ("The answer is 3.5. Then 9", 3.5),
        ("Answer: 1/2", 0.5),
        ("It drops to −3 degrees", -3),
        ("x = -17.5", -17.5),
        ("costs $1,000,000", 1_000_000),
        ("I had 10-3 = 7", 7),
        ("Janet has 16 eggs and sells them for $2 each: she makes 18", 18),
        ("That is 50%", 50),
        ("£4.20 each", 4.2),
        ("Answer: +5", 5),
    ],
)
def test_extracts(text: str, expected: float) -> None:
    found = extract_number(text)
    assert found is not None
    assert numbers_equal(found.value, expected), (text, found)


def test_explicit_answer_wins_over_last_number() -> None:
    found = extract_number("The answer is 5. Double check: 2 + 3 = 5, times 10 is 50")
    assert found is not None
    assert found.value == 5
    assert found.explicit


def test_last_explicit_statement_wins() -> None:
    found = extract_number("The answer is 4.\nWait, recount.\nThe answer is 6.\n9 left over")
    assert found is not None
    assert found.value == 6


def test_explicit_phrase_without_number_falls_back() -> None:
    found = extract_number("The answer is negative. We had 12 and then -4")
    assert found is not None
    assert (found.value, found.explicit) == (-4, False)


def test_subtraction_is_not_a_sign() -> None:
    found = extract_number("10-3")
    assert found is not None
    assert found.value == 3


def test_no_number() -> None:
    assert extract_number("I do not know.") is None
    assert extract_number("") is None


def test_tolerance_is_small() -> None:
    assert numbers_equal(0.1 + 0.2, 0.3)
    assert numbers_equal(1e9, 1e9 + 0.5)  # relative tolerance 1e-6
    assert not numbers_equal(17, 17.01)
    assert not numbers_equal(0, 0.01)
    assert not numbers_equal(-18, 18)


@pytest.mark.parametrize("benchmark", ["gsm8k", "svamp", "multiarith"])
@pytest.mark.parametrize("template", ["The answer is {}.", "#### {}", "\\boxed{{{}}}", "{} total"])
def test_every_gold_answer_written_out_is_read_back(benchmark: str, template: str) -> None:
    items = [i for i in split_items(benchmark, split="all") if isinstance(i, NumericItem)]
    wrong = []
    for item in items:
        found = extract_number("Work: 2 + 2 = 4.\n" + template.format(item.answer_text))
        if found is None or not numbers_equal(found.value, item.answer):
            wrong.append(item.id)
    assert wrong == []


def test_gsm8k_reference_solutions_score_perfectly() -> None:
    import json

    from lemon.data import data_dir

    lines = (data_dir() / "gsm8k" / "test.jsonl").read_text().splitlines()
    items = split_items("gsm8k", split="test")
    for line, item in zip(lines, items, strict=True):
        assert isinstance(item, NumericItem)
        found = extract_number(json.loads(line)["answer"])
        assert found is not None
        assert numbers_equal(found.value, item.answer), item.id


@given(
    value=st.integers(min_value=-(10**12), max_value=10**12),
    cents=st.sampled_from(["", ".5", ".25", ".75"]),
    commas=st.booleans(),
    currency=st.sampled_from(["", "$", "€", "£"]),
    template=st.sampled_from(["The answer is {}.", "#### {}", "Answer: {}", "so {} in total"]),
    noise=st.sampled_from(["", "Step 1: 3 + 4 = 7.\n", "We had 12, lost 5 (-5), ", "x"]),
)
def test_any_written_number_is_read_back(
    value: int, cents: str, commas: bool, currency: str, template: str, noise: str
) -> None:
    digits = f"{abs(value):,}" if commas else str(abs(value))
    written = ("-" if value < 0 else "") + currency + digits + cents
    expected = (abs(value) + float(cents or 0)) * (-1 if value < 0 else 1)
    found = extract_number(noise + template.format(written))
    assert found is not None
    assert numbers_equal(found.value, expected), (written, found)
