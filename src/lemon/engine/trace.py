"""Run traces: one JSON object per line, one line per event, written as events happen.

Events: ``run_start``, ``agent_start``, ``agent_retry``, ``agent_finish`` (status succeeded,
failed, skipped or cancelled, with tokens, latency and the output or the reason) and
``run_finish``. Each line is flushed when written, so a trace survives a crash or a kill up to
its last event. ``lemon trace PATH`` renders a trace as a table or a timeline.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

__all__ = ["TraceWriter", "read_trace", "render_table", "render_timeline"]


class TraceWriter:
    """Appends events to a JSONL file (or keeps them in memory when ``path`` is None)."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.events: list[dict[str, Any]] = []
        self._on_event = on_event
        self._file: IO[str] | None = None
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._t0 = time.perf_counter()

    def emit(self, event: str, **fields: Any) -> None:
        record = {"event": event, "t": round(time.perf_counter() - self._t0, 6), **fields}
        self.events.append(record)
        if self._file is not None:
            self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._file.flush()
        if self._on_event is not None:
            self._on_event(record)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_trace(path: str | Path) -> list[dict[str, Any]]:
    """Read a trace (``-``: standard input); a torn last line (a killed writer) is ignored,
    other bad lines raise."""
    events = []
    text = sys.stdin.read() if str(path) == "-" else Path(path).read_text(encoding="utf-8")
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if number == len(lines):
                break
            raise ValueError(f"{path}:{number}: not a JSON trace event ({exc.msg})") from None
    return events


def _agents(events: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    agents: dict[str, dict[str, Any]] = {}
    for event in events:
        name = event.get("agent")
        if name is None:
            continue
        row = agents.setdefault(name, {"agent": name})
        if event["event"] == "agent_start":
            row["start"] = event["t"]
            row.update({k: event[k] for k in ("role", "capacity", "model") if k in event})
        elif event["event"] == "agent_finish":
            row["end"] = event["t"]
            row.update({k: v for k, v in event.items() if k not in {"event", "t"}})
    return agents


def render_table(events: list[dict[str, Any]]) -> str:
    """One row per agent: status, tier, tokens, latency, and the reason for failures."""
    rows = list(_agents(events).values())
    header = (
        f"{'agent':<18} {'status':<10} {'tier':<7} {'prompt':>7} {'compl':>6} {'secs':>7}  note"
    )
    lines = [header, "-" * len(header)]
    for row in rows:
        note = row.get("error") or ("reused" if row.get("reused") else "")
        lines.append(
            f"{row['agent']:<18} {row.get('status', 'running'):<10} "
            f"{row.get('capacity', ''):<7} {row.get('prompt_tokens', 0):>7} "
            f"{row.get('completion_tokens', 0):>6} {row.get('latency_s', 0.0):>7.2f}  {note}"
        )
    finish = next((e for e in events if e["event"] == "run_finish"), None)
    if finish is not None:
        lines.append(
            f"run {finish.get('status')}: {finish.get('tokens', {}).get('total', 0)} tokens, "
            f"{finish.get('wall_s', 0.0):.2f} s wall"
            + (f" ({finish['error']})" if finish.get("error") else "")
        )
    else:
        lines.append("run did not finish (no run_finish event)")
    return "\n".join(lines)


def render_timeline(events: list[dict[str, Any]], *, width: int = 60) -> str:
    """A bar per agent over the run's wall time: '#' running, '.' waiting."""
    agents = _agents(events)
    end = max([e["t"] for e in events] or [0.0]) or 1.0
    lines = []
    for row in agents.values():
        start = row.get("start", row.get("end", 0.0))
        stop = row.get("end", end)
        a, b = int(start / end * width), max(int(stop / end * width), int(start / end * width) + 1)
        bar = "." * a + "#" * (b - a) + " " * max(0, width - b)
        lines.append(f"{row['agent']:<18} |{bar[:width]}| {row.get('status', 'running')}")
    lines.append(f"{'':<18}  0s{'':>{width - 8}}{end:.2f}s")
    return "\n".join(lines)
