"""Where the web view's runs come from: one small interface, two implementations.

:class:`lemon.ui.files.LocalFiles` reads the files LEMON writes (``lemon ui``); the
orchestration service implements the same interface over the runs it keeps in memory
(``lemon_service.web``), so both serve the same pages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from lemon.events import Event
from lemon.ui.runs import RunSummary

__all__ = ["EvalRef", "RunEvents", "Source", "TrainingRef"]


@dataclass(slots=True)
class EvalRef:
    """An evaluation run folder a source offers."""

    id: str
    path: Path
    """The run folder (``items.jsonl``, ``summary.json``)."""
    label: str


@dataclass(slots=True)
class TrainingRef:
    """A training run a source offers: its metrics, and its credit file where it wrote one."""

    id: str
    metrics: Path
    credit: Path | None
    label: str


@dataclass(frozen=True, slots=True)
class RunEvents:
    """One run's events as they stand now."""

    events: list[Event]
    over: bool
    """No event will follow (the run finished, failed, was cancelled, or its writer moved on)."""
    source: str
    """Where the run was found, in words (a trace file, the service)."""
    status: str | None = None
    """Overrides the status the events imply (a service run that is queued or cancelled)."""


class Source(Protocol):
    """What the web view reads; every method is called from the HTTP server's threads."""

    @property
    def label(self) -> str:
        """What is shown, in words (the paths given, or the service)."""
        ...

    def run_summaries(self) -> list[RunSummary]:
        """Every run, newest first."""
        ...

    def run(self, run_id: str) -> RunEvents | None:
        """One run's events; None for an id this source does not know."""
        ...

    def evaluations(self) -> Mapping[str, EvalRef]:
        """Evaluation run folders by id (the service has none)."""
        ...

    def trainings(self) -> Mapping[str, TrainingRef]:
        """Training runs by id (the service has none)."""
        ...
