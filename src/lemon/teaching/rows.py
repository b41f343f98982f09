"""SFT rows, what a teacher run counts, and the resumable loop both teachers write through.

One row per item, one JSON object per line (TRL's conversational prompt-completion format; the
prompt is :func:`lemon.policy.prompt.policy_messages`, the completion the canonical spec)::

    {"id": ..., "prompt": [system, user messages], "completion": [{"role": "assistant",
     "content": CANONICAL_SPEC_YAML}], "provenance": {...}}

Rows are appended as items finish and items already in the output are skipped, so an
interrupted run resumes where it stopped (:class:`lemon.jsonl.RecordFile`). What a row's
provenance says of an executed team is a projection of its
:class:`~lemon.orchestration.ItemOutcome` (:func:`outcome_facts`), the same for both teachers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lemon.data.items import Item
from lemon.jsonl import RecordFile
from lemon.orchestration import ItemOutcome
from lemon.policy.prompt import policy_messages, spec_completion
from lemon.spec.models import Spec

__all__ = ["Progress", "TeacherStats", "outcome_facts", "sft_row", "write_rows"]

Progress = Callable[[int, int], None]
"""Called with (items finished, items in all) as each item finishes."""


def outcome_facts(outcome: ItemOutcome) -> dict[str, Any]:
    """What a teacher row records of an executed team: ``success``, ``worker_tokens`` and
    ``priced_tokens`` (rounded to 0.001)."""
    return {
        "success": outcome.success,
        "worker_tokens": outcome.worker_tokens,
        "priced_tokens": round(outcome.priced_tokens or 0.0, 3),
    }


def sft_row(item_id: str, task: str, spec: Spec, provenance: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": item_id,
        "prompt": policy_messages(task),
        "completion": [{"role": "assistant", "content": spec_completion(spec, spec.output)}],
        "provenance": dict(provenance),
    }


@dataclass(slots=True)
class TeacherStats:
    items: int = 0
    written: int = 0
    skipped_done: int = 0
    rejected: int = 0
    executions: int = 0
    reused_calls: int = 0
    cache_hits: int = 0
    """Calls answered from the persistent call cache."""
    details: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "written": self.written,
            "skipped_done": self.skipped_done,
            "rejected": self.rejected,
            "executions": self.executions,
            "reused_calls": self.reused_calls,
            "cache_hits": self.cache_hits,
        }


async def write_rows(
    items: Sequence[Item],
    *,
    out: Path,
    row: Callable[[Item, TeacherStats], Awaitable[dict[str, Any] | None]],
    progress: Progress | None = None,
) -> TeacherStats:
    """Append ``row(item, stats)`` for every item not in ``out`` yet (None: the item is
    rejected, and ``row`` has said why in ``stats.details``)."""
    stats = TeacherStats(items=len(items))
    rows = RecordFile(out)
    stats.skipped_done = sum(1 for item in items if item.id in rows.done)
    finished = stats.skipped_done

    def count(item: Item, record: dict[str, Any] | None) -> None:
        nonlocal finished
        if record is None:
            stats.rejected += 1
        else:
            stats.written += 1
        finished += 1
        if progress is not None:
            progress(finished, len(items))

    await rows.append_each(
        items, key=lambda item: item.id, work=lambda item: row(item, stats), on_record=count
    )
    return stats
