"""Filling an outcome table: every missing (item, team) run once, recorded as it finishes.

:func:`table_items` chooses a table's items (a pure function of the files and the seed), and
:func:`build_table` runs every team of the table on every item that lacks its cell, through
:func:`lemon.orchestration.run_item` and :func:`lemon.orchestration.item_outcome` (the one way
to run and score a spec on an item), with ``concurrency`` runs in flight on one set of backends
(so the in-process models batch agents across items; on endpoints, as many as they serve). The
backends should be wrapped with the persistent call cache (:mod:`lemon.backends.callcache`):
a call two teams share (a solver that a verifier then reads) is computed once and both cells
read the same answer.

Work goes item chunk by item chunk (every team on the first ``chunk`` items, then the next),
so a stopped build leaves whole pieces; stopping at any moment loses only the runs in flight.
A run that fails because of the machine rather than the team (a deadline, a tier that cannot
serve, a cancellation) is not recorded: the next build runs it again.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from lemon.backends.base import Backend
from lemon.data.items import ChoiceItem, Item
from lemon.data.splits import Split, split_items
from lemon.engine.results import FailureKind
from lemon.orchestration import ItemSettings, item_outcome, run_item
from lemon.policy.columns import Column
from lemon.pricing import TierPrices
from lemon.spec.models import Capacity
from lemon.tables.store import Cell, Table, stored_calls
from lemon.tasks import classify_task, task_text

__all__ = ["BuildStats", "build_table", "selection_note", "table_items"]

_MACHINE_FAILURES = (FailureKind.DEADLINE, FailureKind.TIER_UNAVAILABLE, FailureKind.CANCELLED)


def _rank(seed: int, item: Item) -> str:
    return hashlib.sha256(f"{seed}:{item.id}".encode()).hexdigest()


def table_items(
    benchmark: str, split: Split | str, *, limit: int | None = None, seed: int = 0
) -> list[Item]:
    """A table's items: the split's items in a seeded order (by ``sha256(seed:id)``), MMLU's
    interleaved across subjects (every subject's first, then every subject's second, ...), the
    first ``limit`` of them. A larger ``limit`` extends the same list."""
    items = sorted(split_items(benchmark, split=split), key=lambda i: _rank(seed, i))
    if any(isinstance(i, ChoiceItem) and i.subject for i in items):
        groups: dict[str | None, list[Item]] = {}
        for item in items:
            groups.setdefault(getattr(item, "subject", None), []).append(item)
        order = sorted(groups)  # type: ignore[type-var]
        width = max(len(g) for g in groups.values())
        items = [groups[s][k] for k in range(width) for s in order if k < len(groups[s])]
    return items if limit is None else items[:limit]


def selection_note(seed: int) -> str:
    return (
        f"the split's items ordered by sha256('{seed}:' + id), MMLU interleaved across subjects "
        "(sorted by name), then the first n"
    )


@dataclass(slots=True)
class BuildStats:
    added: int = 0
    skipped: int = 0
    """Runs not recorded because the machine, not the team, failed (run again next time)."""
    new_calls: int = 0
    errors: list[str] | None = None


async def build_table(
    table: Table,
    items: Sequence[Item],
    columns: Sequence[Column],
    *,
    backends: Mapping[Capacity, Backend],
    settings: ItemSettings,
    prices: TierPrices,
    concurrency: int = 16,
    chunk: int = 50,
    progress: Callable[[int, int], None] | None = None,
    stop_after_s: float | None = None,
) -> BuildStats:
    """Run every (item, team) of ``items`` × ``columns`` the table lacks and record it.

    A call the table already holds is answered from it, never asked again: greedy llama.cpp is
    not batch-invariant, so asking ``backends`` again could give another answer than the one
    the table's other cells read, and a new cell would then disagree with its own stored call.
    """
    from lemon.tables.replay import table_backends

    backends, _ = table_backends(table, live=backends)
    stats = BuildStats(errors=[])
    todo = [
        (item, col)
        for start in range(0, len(items), chunk)
        for col in columns
        for item in items[start : start + chunk]
        if col.applies_to(classify_task(task_text(item))) and table.cell(item.id, col.name) is None
    ]
    total, done = len(todo), 0
    semaphore = asyncio.Semaphore(concurrency)
    started = time.monotonic()

    async def one(item: Item, col: Column, writer: object) -> None:
        nonlocal done
        if stop_after_s is not None and time.monotonic() - started > stop_after_s:
            return
        spec = col.spec(classify_task(task_text(item)))
        run_settings = ItemSettings(
            worker_max_tokens=settings.worker_max_tokens,
            deadline_s=settings.deadline_s,
            temperature=col.temperature,
            seed=col.seed,
        )
        async with semaphore:
            if stop_after_s is not None and time.monotonic() - started > stop_after_s:
                return
            result = await run_item(
                item, spec, backends=backends, settings=run_settings, output=col.output
            )
            outcome = await item_outcome(item, result, spec=spec, prices=prices)
        if outcome.failure in _MACHINE_FAILURES:
            stats.skipped += 1
            assert stats.errors is not None
            stats.errors.append(f"{item.id} {col.name}: {outcome.error}")
            return
        cell = Cell.of(outcome, item=item.id, team=col.name)
        stats.new_calls += writer.add(cell, stored_calls(outcome))  # type: ignore[attr-defined]
        stats.added += 1
        done += 1
        if progress is not None:
            progress(done, total)

    with table.writer() as writer:
        await _windowed([functools.partial(one, i, c, writer) for i, c in todo], concurrency * 2)
    return stats


async def _windowed(work: Sequence[Callable[[], Awaitable[None]]], window: int) -> None:
    """Run ``work`` with at most ``window`` coroutines alive at once (a long table does not
    hold every run's coroutine), raising the first failure."""
    pending: set[asyncio.Task[None]] = set()
    for make in work:
        pending.add(asyncio.ensure_future(make()))
        if len(pending) >= max(window, 1):
            finished, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                task.result()
    if pending:
        await asyncio.gather(*pending)
