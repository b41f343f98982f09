"""What kind of task a task is, and what follows from that for the agents working on it.

A task is classified once, by its surface form (:func:`classify_task`), and the
:class:`TaskKind` is carried from there: the template policy picks its team by it, the fixed
teams pick their solver role by it, and the executor's prefills (:func:`prefills`) come from it.

- ``code``: a Python signature, a code fence, or "write a function";
- ``multiple_choice``: lettered options such as ``(A) ...`` / ``A) ...``, or "Answer Choices";
- ``math``: any other task with a digit in it;
- ``general``: the rest.

Benchmark items (:mod:`lemon.data`) become tasks through :func:`task_text`.
"""

from __future__ import annotations

import re
from enum import StrEnum

from lemon.data.items import ChoiceItem, CodeItem, Item, NumericItem

__all__ = [
    "COMPUTE_PREFILL",
    "TaskKind",
    "choice_options",
    "classify_task",
    "item_prefills",
    "prefills",
    "task_text",
]

COMPUTE_PREFILL = "```python\nanswer = "
"""What a programmer's answer starts with on numeric tasks. Small models write a program far
more often when the code block is already open: on the first 20 MultiArith items the packaged
135M model solved 0/20 with plain program-of-thought prompting and 2/20 with this prefill."""


class TaskKind(StrEnum):
    MATH = "math"
    MULTIPLE_CHOICE = "multiple_choice"
    CODE = "code"
    GENERAL = "general"


_OPTIONS = re.compile(r"(?m)(^|\s)\(?([A-E])[\).:]\s+\S")
_CODE = re.compile(r"(?m)^\s*def \w+\(|```|\bwrite (a|the) (python )?function\b", re.IGNORECASE)


def classify_task(task: str) -> TaskKind:
    if _CODE.search(task):
        return TaskKind.CODE
    letters = {m.group(2) for m in _OPTIONS.finditer(task)}
    if len(letters) >= 3 or "answer choices" in task.lower():
        return TaskKind.MULTIPLE_CHOICE
    if re.search(r"\d", task):
        return TaskKind.MATH
    return TaskKind.GENERAL


_CHOICE_LINE = re.compile(r"(?m)^\s*\(([A-J])\)\s*(.*?)\s*$")


def choice_options(task: str) -> list[tuple[str, str]]:
    """The lettered options of a multiple-choice task, as :func:`task_text` writes them (one
    ``(A) text`` line each after ``Answer Choices:``); empty when the task has none."""
    _, marker, rest = task.rpartition("Answer Choices:")
    if not marker:
        return []
    return [(m.group(1), m.group(2)) for m in _CHOICE_LINE.finditer(rest)]


def _numeric_choices(task: str) -> bool:
    """Most options are numbers (AQuA): a program can compute the answer and pick the nearest."""
    options = choice_options(task)
    numeric = sum(bool(re.match(r"\s*[-−$€£₹]?\s*(?:rs\.?\s*)?\.?\d", t, re.I)) for _, t in options)
    return len(options) >= 3 and numeric * 2 > len(options)


def prefills(kind: TaskKind, task: str = "") -> dict[str, str]:
    """Assistant prefills per role for a task kind: programmers compute on maths tasks, and on
    multiple-choice tasks whose options are mostly numbers (``task`` tells)."""
    computes = kind is TaskKind.MATH or (
        kind is TaskKind.MULTIPLE_CHOICE and _numeric_choices(task)
    )
    return {"programmer": COMPUTE_PREFILL} if computes else {}


def item_prefills(item: Item) -> dict[str, str]:
    """The prefills for a benchmark item: a numeric answer computes; so does a choice among
    mostly numeric options (AQuA)."""
    if isinstance(item, NumericItem):
        return prefills(TaskKind.MATH)
    if isinstance(item, ChoiceItem):
        return prefills(TaskKind.MULTIPLE_CHOICE, task_text(item))
    return {}


def task_text(item: Item) -> str:
    """The task an item poses, as the agents see it."""
    if isinstance(item, ChoiceItem):
        options = "\n".join(
            f"({letter}) {text}" for letter, text in zip(item.letters, item.options, strict=True)
        )
        return f"{item.question}\n\nAnswer Choices:\n{options}"
    if isinstance(item, CodeItem):
        return f"Complete this Python function:\n\n```python\n{item.prompt}```"
    return item.question
