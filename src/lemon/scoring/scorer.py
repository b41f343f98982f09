"""Scoring predictions against a benchmark's gold answers: ``lemon score``'s engine."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from lemon.data.items import Benchmark, ChoiceItem, CodeItem, Item, NumericItem
from lemon.data.loaders import load_items
from lemon.data.paths import sources
from lemon.sandbox.limits import SandboxConfig
from lemon.scoring.letters import extract_letter
from lemon.scoring.numbers import extract_number, numbers_equal
from lemon.scoring.predictions import Prediction, PredictionError
from lemon.scoring.stats import wilson_interval

__all__ = [
    "ItemScore",
    "ScoreReport",
    "item_index",
    "item_success",
    "score_item",
    "score_predictions",
]


class ItemScore(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    correct: bool
    extracted: float | str | None
    """The number or letter read from the output; for HumanEval the sandbox run's status."""


class ScoreReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    benchmark: Benchmark
    n: int
    correct: int
    accuracy: float
    ci95: tuple[float, float]
    items: list[ItemScore]


def item_index(benchmark: Benchmark, *, directory: Path | str | None = None) -> dict[str, Item]:
    """Every item of every published file set of ``benchmark``, by id."""
    index: dict[str, Item] = {}
    for source in sources(benchmark):
        for item in load_items(benchmark, source=source, directory=directory):
            index[item.id] = item
    return index


def item_success(item: Item, answer: str | None, *, sandbox: SandboxConfig | None = None) -> float:
    """1.0 when ``answer`` solves ``item`` (HumanEval: the program passes its tests in the
    sandbox), else 0.0; no answer scores 0. One rule for the teacher, GRPO and evaluation."""
    if answer is None:
        return 0.0
    if isinstance(item, CodeItem):
        from lemon.scoring.code import score_code

        return float(score_code([item], [answer], config=sandbox)[0].passed)
    return float(score_item(item, answer).correct)


def score_item(item: NumericItem | ChoiceItem, output: str) -> ItemScore:
    """Score one number or letter answer (HumanEval needs the sandbox: see ``score_code``)."""
    if isinstance(item, NumericItem):
        number = extract_number(output)
        if number is None:
            return ItemScore(id=item.id, correct=False, extracted=None)
        return ItemScore(
            id=item.id, correct=numbers_equal(number.value, item.answer), extracted=number.value
        )
    letter = extract_letter(output, options=item.options)
    return ItemScore(id=item.id, correct=letter == item.answer, extracted=letter)


def score_predictions(
    benchmark: Benchmark | str,
    predictions: Sequence[Prediction],
    *,
    source: str = "<predictions>",
    directory: Path | str | None = None,
    sandbox: SandboxConfig | None = None,
) -> ScoreReport:
    """Score every prediction (ids may repeat; input order kept).

    Raises :class:`PredictionError` at the first id the benchmark does not have.
    """
    bench = Benchmark(benchmark)
    index = item_index(bench, directory=directory)
    items = []
    for prediction in predictions:
        item = index.get(prediction.id)
        if item is None:
            raise PredictionError(
                f"unknown {bench.value} id {prediction.id!r}",
                path=source,
                line=prediction.line or None,
            )
        items.append(item)
    if bench is Benchmark.HUMANEVAL:
        from lemon.scoring.code import score_code

        code_items = [item for item in items if isinstance(item, CodeItem)]
        runs = score_code(code_items, [p.output for p in predictions], config=sandbox)
        scores = [
            ItemScore(id=item.id, correct=run.passed, extracted=run.status.value)
            for item, run in zip(code_items, runs, strict=True)
        ]
    else:
        scores = [
            score_item(item, p.output)
            for item, p in zip(items, predictions, strict=True)
            if not isinstance(item, CodeItem)
        ]
    correct = sum(score.correct for score in scores)
    n = len(scores)
    return ScoreReport(
        benchmark=bench,
        n=n,
        correct=correct,
        accuracy=correct / n if n else 0.0,
        ci95=wilson_interval(correct, n),
        items=scores,
    )
