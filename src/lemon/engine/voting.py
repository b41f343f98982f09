"""Deterministic selection tools: a vote over answers, and the option nearest a computed number.

Both read the answers their dependencies state the way the scorer reads them
(:func:`lemon.scoring.numbers.extract_number` for maths,
:func:`lemon.scoring.letters.extract_letter` for multiple choice), so what a tool chooses is
what would be scored.

- :func:`vote`: the majority over the dependencies' answers; a tie goes to the tied answer of
  the first-named dependency (``depends_on`` order); dependencies that state no answer do not
  vote. Selection by agreement is what pays for small models (SLM-MUX, arXiv 2510.05077):
  unlike a discussion, a wrong answer cannot talk a right one out of being counted.
- :func:`nearest_option`: program of thought on a multiple-choice task computes a number; the
  answer is the option whose (first) number is nearest to it, ties to the earlier letter. A
  deterministic step in code, not a model's guess.

Both answer with a final ``The answer is X.`` line after a one-line account of what they read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from lemon.scoring.letters import extract_letter
from lemon.scoring.numbers import extract_number
from lemon.tasks import TaskKind, choice_options, classify_task

__all__ = ["nearest_option", "option_number", "stated_answer", "vote"]

_OPTION_NUMBER = re.compile(r"[-−]?\d[\d,]*(?:\.\d+)?(?:\s*/\s*\d+)?|[-−]?\.\d+")


def _number_text(value: float) -> str:
    return str(int(value)) if value == int(value) and abs(value) < 1e15 else f"{value:g}"


def stated_answer(output: str, *, task: str) -> str | None:
    """The answer ``output`` states for ``task``, normalised so equal answers compare equal: a
    letter on a multiple-choice task, a number (``8`` for ``8.0``) on any other; None if none."""
    options = choice_options(task)
    if options:
        return extract_letter(output, options=[text for _, text in options])
    number = extract_number(output)
    return None if number is None else _number_text(round(number.value, 6))


def vote(inputs: Sequence[str], *, task: str) -> str:
    """The majority answer of ``inputs`` (the dependencies' outputs, in ``depends_on`` order)."""
    answers = [stated_answer(text, task=task) for text in inputs]
    counts: dict[str, int] = {}
    for answer in answers:
        if answer is not None:
            counts[answer] = counts.get(answer, 0) + 1
    read = ", ".join(answer or "none" for answer in answers)
    if not counts:
        return f"Answers read: {read}. No dependency stated an answer."
    top = max(counts.values())
    winner = next(a for a in answers if a is not None and counts[a] == top)
    return f"Answers read: {read}. {top} of {len(answers)} agree.\nThe answer is {winner}."


def option_number(text: str) -> float | None:
    """The first number an option's text holds (``Rs. 1,200`` -> 1200, ``3/4`` -> 0.75)."""
    match = _OPTION_NUMBER.search(text)
    if match is None:
        return None
    raw = match.group(0).replace(",", "").replace("−", "-").replace(" ", "")
    if "/" in raw:
        top, bottom = raw.split("/")
        return float(top) / float(bottom) if float(bottom) else None
    return float(raw)


def nearest_option(inputs: Sequence[str], *, task: str) -> str:
    """The option whose number is nearest the number the last dependency's output states."""
    options = choice_options(task)
    if not options or classify_task(task) is not TaskKind.MULTIPLE_CHOICE:
        return "The task has no answer choices to pick from."
    numbers = [(letter, option_number(text)) for letter, text in options]
    numeric = [(letter, value) for letter, value in numbers if value is not None]
    if not numeric:
        return "No answer choice holds a number."
    found = extract_number(inputs[-1]) if inputs else None
    if found is None:
        return "The computation stated no number."
    letter, value = min(numeric, key=lambda pair: abs(pair[1] - found.value))
    return (
        f"Computed {_number_text(round(found.value, 6))}; nearest option ({letter}) "
        f"{_number_text(value)}.\nThe answer is {letter}."
    )
