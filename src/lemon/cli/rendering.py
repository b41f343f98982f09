"""A run's trace for the terminal (``lemon run``, ``lemon trace``): a table of its agents and
a timeline. Presentation only: the events and their encoding live in :mod:`lemon.events`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from lemon.events import (
    AgentFailed,
    AgentFinished,
    AgentRetrying,
    AgentStarted,
    Event,
    RunFinished,
    TraceTruncated,
)

__all__ = ["render_table", "render_timeline"]


@dataclass(slots=True)
class _Row:
    agent: str
    start: float | None = None
    started: AgentStarted | None = None
    finished: AgentFinished | None = None


def _agents(events: Iterable[Event]) -> dict[str, _Row]:
    rows: dict[str, _Row] = {}
    for event in events:
        if isinstance(event, AgentStarted):
            row = rows.setdefault(event.agent, _Row(event.agent))
            row.start, row.started = event.t, event
        elif isinstance(event, AgentFinished):
            rows.setdefault(event.agent, _Row(event.agent)).finished = event
        elif isinstance(event, AgentRetrying | AgentFailed):
            rows.setdefault(event.agent, _Row(event.agent))
    return rows


def render_table(events: list[Event]) -> str:
    """One row per agent: status, tier, tokens, latency, and the reason for failures."""
    header = (
        f"{'agent':<18} {'status':<10} {'tier':<7} {'prompt':>7} {'compl':>6} {'secs':>7}  note"
    )
    lines = [header, "-" * len(header)]
    for row in _agents(events).values():
        done = row.finished
        note = (done.error or ("reused" if done.reused else "")) if done is not None else ""
        tier = row.started.capacity if row.started is not None else ""
        lines.append(
            f"{row.agent:<18} {done.status if done else 'running':<10} {tier:<7} "
            f"{done.prompt_tokens if done else 0:>7} {done.completion_tokens if done else 0:>6} "
            f"{done.latency_s if done else 0.0:>7.2f}  {note}"
        )
    left_out = sum(e.left_out for e in events if isinstance(e, TraceTruncated))
    if left_out:
        lines.append(f"({left_out} events left out of this trace)")
    finish = next((e for e in events if isinstance(e, RunFinished)), None)
    if finish is not None:
        lines.append(
            f"run {finish.status}: {finish.tokens.get('total', 0)} tokens, "
            f"{finish.wall_s:.2f} s wall" + (f" ({finish.error})" if finish.error else "")
        )
    else:
        lines.append("run did not finish (no run_finish event)")
    return "\n".join(lines)


def render_timeline(events: list[Event], *, width: int = 60) -> str:
    """A bar per agent over the run's wall time: '#' running, '.' waiting."""
    end = max([e.t for e in events] or [0.0]) or 1.0
    lines = []
    for row in _agents(events).values():
        finished = row.finished.t if row.finished is not None else None
        start = row.start if row.start is not None else (finished or 0.0)
        stop = finished if finished is not None else end
        a, b = int(start / end * width), max(int(stop / end * width), int(start / end * width) + 1)
        bar = "." * a + "#" * (b - a) + " " * max(0, width - b)
        status = row.finished.status if row.finished is not None else "running"
        lines.append(f"{row.agent:<18} |{bar[:width]}| {status}")
    lines.append(f"{'':<18}  0s{'':>{width - 8}}{end:.2f}s")
    return "\n".join(lines)
