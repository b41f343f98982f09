"""Append-only JSONL files of records keyed by ``id``, which a rerun resumes.

Records are appended and flushed one line at a time as work finishes, so an interrupted run
loses at most the line it was writing; a rerun cuts that torn line and skips every item whose
record is already there (``lemon eval``'s ``items.jsonl``, ``lemon teacher``'s SFT rows).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["JsonLineError", "RecordFile", "drop_torn_tail", "json_lines", "read_records"]

T = TypeVar("T")
Record = dict[str, Any]


def drop_torn_tail(path: Path) -> None:
    """Cut a last line that an interrupted writer left without its newline, so that appended
    records start on a line of their own (the torn record's item simply runs again)."""
    if not path.is_file():
        return
    with path.open("rb+") as handle:
        size = handle.seek(0, 2)
        if size == 0:
            return
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return
        handle.seek(0)
        data = handle.read()
        handle.truncate(data.rfind(b"\n") + 1)


class JsonLineError(ValueError):
    """A line of a JSONL file that is not JSON; the message is ``PATH:LINE:COL: not JSON: ...``."""


def json_lines(
    path: Path,
    *,
    label: str | None = None,
    on_torn_tail: Callable[[str], None] | None = None,
) -> Iterator[tuple[str, str, Any]]:
    """``(where, line, value)`` for every non-blank line of ``path``, ``where`` being
    ``LABEL:LINE`` (``label`` defaults to the path; lines 1-based) for the caller's own located
    errors. A line that is not JSON raises
    :class:`JsonLineError`; with ``on_torn_tail``, a malformed *last* line (a writer stopped
    mid-row) is passed to it by ``where`` and skipped instead. ``OSError`` propagates."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{label or path}:{number}"
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            if on_torn_tail is not None and number == len(lines):
                on_torn_tail(where)
                continue
            raise JsonLineError(f"{where}:{exc.colno}: not JSON: {exc.msg}") from None
        yield where, line, value


def read_records(path: Path) -> dict[str, Record]:
    """The records in ``path`` by id (lines that are not a JSON object with an ``id`` are
    skipped: their items run again)."""
    records: dict[str, Record] = {}
    if not path.is_file():
        return records
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and isinstance(record.get("id"), str):
            records[record["id"]] = record
    return records


class RecordFile:
    """A JSONL file of records keyed by ``id``, opened to resume: a torn last line is cut and
    the records already there are in :attr:`done`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        drop_torn_tail(path)
        self.done: dict[str, Record] = read_records(path)

    async def append_each(
        self,
        items: Sequence[T],
        *,
        key: Callable[[T], str],
        work: Callable[[T], Awaitable[Record | None]],
        on_record: Callable[[T, Record | None], None] | None = None,
    ) -> None:
        """Run ``work`` concurrently on every item whose key has no record yet and append each
        record it returns (None: nothing to write) as one flushed line, in the order they
        finish; ``on_record`` sees each outcome right after it is written. ``work`` bounds its
        own concurrency."""
        todo = [item for item in items if key(item) not in self.done]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as sink:

            async def one(item: T) -> None:
                record = await work(item)
                if record is not None:
                    sink.write(json.dumps(record, ensure_ascii=False) + "\n")
                    sink.flush()
                if on_record is not None:
                    on_record(item, record)

            await asyncio.gather(*(one(item) for item in todo))
