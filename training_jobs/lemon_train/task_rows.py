"""GRPO's dataset: one row per task, from the run's typed data (lemon.learning.training_data).

Every row holds ``prompt`` (the policy's chat messages, in the run's prompt format) and what the
reward function needs to find and score the task again:

- simulator rows (``synthetic:<N>``, ``synthetic-v2:<N>``): the simulator's task columns;
- benchmark rows (``benchmark:...``) and outcome-table rows (``table:...``): ``task``,
  ``benchmark`` and ``id`` of a shipped item (the reward scores it as ``lemon eval`` does);
- file rows (a JSONL path of ``{"task", "answer", "benchmark", "id"}``): the row's own task and
  gold answer, or a shipped item's ``benchmark`` and ``id``.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

from lemon.jsonl import JsonLineError, json_lines
from lemon.learning import simulator_v2
from lemon.learning.simulator import make_tasks, synthetic_messages
from lemon.learning.training_config import TrainingConfig
from lemon.learning.training_data import (
    BenchmarkData,
    FileData,
    SyntheticData,
    SyntheticV2Data,
    TableData,
)
from lemon_train.errors import TrainingError

__all__ = [
    "RowKind",
    "benchmark_rows",
    "file_rows",
    "load_tasks",
    "table_rows",
    "with_cost_weights",
]


class RowKind(StrEnum):
    SIMULATOR_V1 = "simulator-v1"
    SIMULATOR_V2 = "simulator-v2"
    ITEMS = "items"
    """Shipped benchmark items, executed on the profile's tiers."""
    TABLE = "table"
    """An outcome table's items, answered from the table."""


def load_tasks(config: TrainingConfig) -> tuple[list[dict[str, Any]], RowKind]:
    """The GRPO dataset rows and their kind (located errors otherwise)."""
    data, seed, fmt = config.data, config.hyperparameters.seed, config.prompt_format
    if isinstance(data, SyntheticV2Data):
        tasks = simulator_v2.make_tasks(data.tasks, seed=seed)
        rows = [{"prompt": synthetic_messages(t.text), **simulator_v2.task_row(t)} for t in tasks]
        return rows, RowKind.SIMULATOR_V2
    if isinstance(data, SyntheticData):
        rows = [
            {
                "prompt": synthetic_messages(task),
                "task": task.text,
                "id": task.id,
                "domain": task.domain.value,
                "difficulty": task.difficulty.value,
                "tricky": task.tricky,
                "strict": task.strict,
            }
            for task in make_tasks(data.tasks, seed=seed)
        ]
        return rows, RowKind.SIMULATOR_V1
    weights = config.hyperparameters.cost_weights
    if isinstance(data, BenchmarkData):
        rows, kind = benchmark_rows(data, prompt_format=fmt), RowKind.ITEMS
    elif isinstance(data, TableData):
        rows, kind = table_rows(data, prompt_format=fmt), RowKind.TABLE
    else:
        assert isinstance(data, FileData)
        rows, kind = file_rows(Path(data.path), prompt_format=fmt), RowKind.ITEMS
    return (
        with_cost_weights(rows, weights, seed=seed, prompt_format=fmt) if weights else rows
    ), kind


def with_cost_weights(
    rows: list[dict[str, Any]], weights: list[float], *, seed: int, prompt_format: str
) -> list[dict[str, Any]]:
    """Each row with a cost weight drawn from ``weights`` (seeded, so a resumed run draws the
    same), stated in its prompt; the reward scores the row at that weight (``cost_weight``)."""
    import random

    from lemon.policy.prompt import policy_messages

    rng = random.Random(f"cost-weights:{seed}")
    out = []
    for row in rows:
        weight = rng.choice(weights)
        prompt = policy_messages(row["task"], format=prompt_format, cost_weight=weight)
        out.append({**row, "prompt": prompt, "cost_weight": weight})
    return out


def _item_row(item: Any, prompt_format: str) -> dict[str, Any]:
    from lemon.data.items import ChoiceItem, NumericItem
    from lemon.policy.prompt import policy_messages
    from lemon.tasks import task_text

    task = task_text(item)
    answer = (
        item.answer_text
        if isinstance(item, NumericItem)
        else item.answer
        if isinstance(item, ChoiceItem)
        else None
    )
    return {
        "prompt": policy_messages(task, format=prompt_format),
        "task": task,
        "answer": answer,
        "benchmark": item.benchmark.value,
        "id": item.id,
    }


def benchmark_rows(data: BenchmarkData, *, prompt_format: str) -> list[dict[str, Any]]:
    """Rows for a shipped benchmark's items (``lemon data`` lists them); the reward finds each
    row's item again by ``benchmark`` and ``id`` (HumanEval tests, prefills)."""
    from lemon.data import Benchmark, DataError, Split, split_items

    try:
        items = split_items(Benchmark(data.name), split=Split(data.split))
    except DataError as exc:
        raise TrainingError(f"data: {data}: {exc}") from None
    items = items[data.offset : data.offset + data.limit if data.limit else None]
    if not items:
        raise TrainingError(f"data: {data}: no items selected")
    return [_item_row(item, prompt_format) for item in items]


def table_rows(data: TableData, *, prompt_format: str) -> list[dict[str, Any]]:
    """Rows for the items of one or more outcome tables, in the tables' order (``part`` keeps a
    train table's fit or validation part; ``limit``/``offset`` then select a range)."""
    from lemon.data import Benchmark
    from lemon.scoring import item_index
    from lemon.tables.store import Table, TableError

    items = []
    for path in data.paths:
        try:
            table = Table.open(path)
            ids = table.part(data.part)
        except TableError as exc:
            raise TrainingError(f"data: {data}: {exc}") from None
        index = item_index(Benchmark(table.meta.benchmark))
        found = [index[i] for i in ids]
        items += found
    items = items[data.offset : data.offset + data.limit if data.limit else None]
    if not items:
        raise TrainingError(f"data: {data}: no items selected")
    return [_item_row(item, prompt_format) for item in items]


def file_rows(path: Path, *, prompt_format: str) -> list[dict[str, Any]]:
    from lemon.policy.prompt import policy_messages

    rows = []
    try:
        for where, _, row in json_lines(path):
            if not isinstance(row, dict) or not isinstance(row.get("task"), str):
                raise TrainingError(f"{where}: a task row is an object with a string 'task'")
            rows.append(
                {
                    "prompt": policy_messages(row["task"], format=prompt_format),
                    "task": row["task"],
                    "answer": None if row.get("answer") is None else str(row["answer"]),
                    "benchmark": str(row.get("benchmark", "")),
                    "id": str(row.get("id", f"{path.name}:{where.rsplit(':', 1)[1]}")),
                }
            )
    except OSError as exc:
        raise TrainingError(f"data: {path}: cannot read: {exc.strerror or exc}") from None
    except JsonLineError as exc:
        raise TrainingError(str(exc)) from None
    if not rows:
        raise TrainingError(f"data: {path}: no task rows")
    return rows
