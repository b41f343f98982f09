"""Typed benchmark items: one pydantic model per answer kind, all with a stable ``id``."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Benchmark",
    "ChoiceItem",
    "CodeItem",
    "Item",
    "NumericItem",
    "answer_kind",
    "gold_item",
]


class Benchmark(StrEnum):
    """The six benchmarks LEMON reports on."""

    GSM8K = "gsm8k"
    SVAMP = "svamp"
    MULTIARITH = "multiarith"
    AQUA = "aqua"
    MMLU = "mmlu"
    HUMANEVAL = "humaneval"


AnswerKind = Literal["number", "letter", "code"]


def answer_kind(benchmark: Benchmark) -> AnswerKind:
    """How a benchmark's outputs are scored."""
    if benchmark in (Benchmark.AQUA, Benchmark.MMLU):
        return "letter"
    if benchmark is Benchmark.HUMANEVAL:
        return "code"
    return "number"


class _Item(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(description="stable id, e.g. 'gsm8k:0' or 'mmlu:anatomy:3'")
    benchmark: Benchmark


class NumericItem(_Item):
    """A word problem with a numeric answer (GSM8K, SVAMP, MultiArith)."""

    kind: Literal["number"] = "number"
    question: str
    answer: float = Field(description="the gold answer")
    answer_text: str = Field(description="the gold answer as written in the source file")


class ChoiceItem(_Item):
    """A multiple-choice question (AQuA, MMLU); ``options[i]`` belongs to letter ``'A' + i``."""

    kind: Literal["letter"] = "letter"
    question: str
    options: tuple[str, ...] = Field(description="option texts, without their letter prefix")
    answer: str = Field(description="the gold letter, 'A'..'E'")
    subject: str | None = Field(default=None, description="MMLU subject")

    @property
    def letters(self) -> str:
        return "ABCDEFGHIJ"[: len(self.options)]


class CodeItem(_Item):
    """A HumanEval problem: ``prompt`` is a signature and docstring to complete."""

    kind: Literal["code"] = "code"
    task_id: str
    prompt: str
    entry_point: str
    test: str = Field(description="defines check(candidate)")
    canonical_solution: str

    @property
    def question(self) -> str:
        return self.prompt


Item = NumericItem | ChoiceItem | CodeItem


_CHOICE = re.compile(r"(?m)^\s*\(?([A-E])[\).:]\s+(.+?)\s*$")


def gold_item(task: str, answer: object, *, id: str = "row") -> NumericItem | ChoiceItem:
    """An item for a task that is not a shipped benchmark item but carries its gold answer (a
    training row's ``answer``), so it is scored by the same rule as benchmark items
    (:func:`lemon.scoring.item_success`): a number as a maths item, a letter A-E as a
    multiple-choice item whose options are the task's lettered lines (``(A) ...``)."""
    text = str(answer).strip()
    if len(text) == 1 and text.upper() in "ABCDE":
        found = dict(_CHOICE.findall(task))
        letters = "ABCDE"[: max(len(found), "ABCDE".index(text.upper()) + 1)]
        options = tuple(found.get(letter, "") for letter in letters)
        return ChoiceItem(
            id=id, benchmark=Benchmark.AQUA, question=task, options=options, answer=text.upper()
        )
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        raise ValueError(f"gold answer {text!r} is neither a number nor a letter A-E") from None
    return NumericItem(
        id=id, benchmark=Benchmark.GSM8K, question=task, answer=value, answer_text=text
    )
