"""Option-letter extraction, with option text as the fallback."""

from __future__ import annotations

import pytest

from lemon.data import ChoiceItem, split_items
from lemon.scoring import extract_letter

OPTIONS = ["5", "10", "15", "20", "None of these"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is C.", "C"),
        ("Answer: (B)", "B"),
        ("Answer: E", "E"),
        ("I think (A) is wrong; the correct option is D", "D"),
        ("(C)", "C"),
        ("C) 15", "C"),
        ("B", "B"),
        ("A. 5", "A"),
        ("#### D", "D"),
        ("\\boxed{B}", "B"),
        ("Both (A) and (B) look close, but (C) fits", "C"),
        ("So we get 10 apples", "B"),
        ("It is none of these.", "E"),
        ("The answer is 15", "C"),
        ("the answer is a tricky one: 20", "D"),  # lower-case 'a' is an article
        ("The answer is F", None),  # no option F
        ("Therefore the answer is: c", "C"),
        ("answer: (b) because 10", "B"),
        ("The answer is a.\nThat is all", "A"),
        ("The answer is C. Option D is wrong, and the best choice is not B", "C"),
        ("Option A fails, option B fails; the right choice is (E)", "E"),
        ("Check option A: 5 is too small.", "A"),  # only the option text fallback applies
        ("I cannot tell", None),
    ],
)
def test_extracts(text: str, expected: str | None) -> None:
    assert extract_letter(text, options=OPTIONS) == expected


def test_letters_beyond_the_options_do_not_count() -> None:
    assert extract_letter("The answer is E", options=["1", "2", "3", "4"]) is None


def test_option_text_matches_whole_words_only() -> None:
    # "5" must not match inside "15"
    assert extract_letter("it is 15", options=OPTIONS) == "C"


@pytest.mark.parametrize("benchmark", ["aqua", "mmlu"])
def test_gold_letters_and_texts_on_real_items(benchmark: str) -> None:
    items = [i for i in split_items(benchmark, split="all") if isinstance(i, ChoiceItem)]
    for item in items:
        assert extract_letter(
            f"Reasoning...\nThe answer is {item.answer}.", options=item.options
        ) == (item.answer)
        assert extract_letter(f"({item.answer})", options=item.options) == item.answer
    by_text = sum(
        extract_letter(item.options[item.letters.index(item.answer)], options=item.options)
        == item.answer
        for item in items
    )
    # the fallback fails only where options repeat or contain each other
    assert by_text / len(items) > 0.98
