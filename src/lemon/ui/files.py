"""What ``lemon ui`` shows, found in the files LEMON writes (read-only, never written).

Given files and folders, :class:`LocalFiles` finds, recursively (hidden folders, ``.venv``,
``node_modules`` and ``__pycache__`` skipped):

- **run traces**: JSONL files whose first line is a trace event (``lemon run --trace``); one
  file may hold several runs, one after another;
- **evaluations**: folders with an ``items.jsonl`` (``lemon eval`` run folders; their
  ``summary.json`` when written);
- **training runs**: JSONL files whose first line is a logged step (``{"step": ...}``, the
  ``metrics.jsonl`` of a training output, or copies named ``metrics-*.jsonl``), with the
  counterfactual credit GRPO records beside them (``credit.jsonl`` for ``metrics.jsonl``,
  ``credit-X.jsonl`` for ``metrics-X.jsonl``).

The index is rebuilt at most every :attr:`LocalFiles.rescan_s` seconds by a background
thread: folders are walked again, and only files whose size or modification time changed are
read again, so a list of 10,000 traces stays cheap to refresh while runs append to it.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lemon.events import EVENT_TYPES, Event, RunFinished, decode_event
from lemon.ui.runs import RunSummary, split_runs, summarise
from lemon.ui.sources import EvalRef, RunEvents, TrainingRef

__all__ = ["EvalRef", "LocalFiles", "RunRef", "TrainingRef", "read_events", "short_id"]

_SKIP_DIRS = {".venv", "node_modules", "__pycache__", ".git"}
_MAX_DEPTH = 8


def short_id(*parts: str) -> str:
    """A stable, URL-safe id for a thing found on disk."""
    return hashlib.sha1("\x00".join(parts).encode()).hexdigest()[:12]


def read_events(path: Path) -> list[Event]:
    """A trace file's events; lines that do not decode (a torn last line, another writer's
    noise) are left out rather than failing the page."""
    events: list[Event] = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return events
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if isinstance(record, dict):
                events.append(decode_event(record))
        except ValueError:
            continue
    return events


def _first_line(path: Path) -> dict[str, object] | None:
    try:
        with path.open("rb") as handle:
            line = handle.readline(1 << 16)
    except OSError:
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


@dataclass(slots=True)
class RunRef:
    """A run found in a trace file: the file and which of its runs."""

    id: str
    path: Path
    index: int
    summary: RunSummary


@dataclass(slots=True)
class _TraceFile:
    stamp: tuple[int, int]
    runs: list[RunRef] = field(default_factory=list)


def credit_file(metrics: Path) -> Path:
    """Where GRPO's credit record for ``metrics`` lies (see the module's docstring)."""
    name = metrics.name
    suffix = name.removeprefix("metrics") if name.startswith("metrics") else f"-{name}"
    return metrics.with_name(f"credit{suffix}")


class LocalFiles:
    """The runs, evaluations and training runs under ``paths`` (see the module docstring)."""

    rescan_s = 2.0

    def __init__(self, paths: Sequence[str | os.PathLike[str]], *, watch: bool = True) -> None:
        self.paths = [Path(p) for p in paths]
        self.base = Path.cwd()
        self._lock = threading.Lock()
        self._traces: dict[Path, _TraceFile] = {}
        self._other: dict[Path, tuple[int, int]] = {}
        self._runs: list[RunRef] = []
        self._by_id: dict[str, RunRef] = {}
        self._evals: dict[str, EvalRef] = {}
        self._trainings: dict[str, TrainingRef] = {}
        self.scan()
        self._stop = threading.Event()
        if watch:
            thread = threading.Thread(target=self._watch, name="lemon-ui-rescan", daemon=True)
            thread.start()

    @property
    def label(self) -> str:
        return ", ".join(self._show(p) for p in self.paths)

    def _show(self, path: Path) -> str:
        try:
            return str(path.resolve().relative_to(self.base))
        except ValueError:
            return str(path)

    def close(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(self.rescan_s):
            self.scan()

    def _walk(self) -> Iterable[Path]:
        for root in self.paths:
            if root.is_file():
                yield root
                continue
            yield from self._walk_dir(root, 0)

    def _walk_dir(self, folder: Path, depth: int) -> Iterable[Path]:
        if depth > _MAX_DEPTH:
            return
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if not entry.name.startswith(".") and entry.name not in _SKIP_DIRS:
                    yield from self._walk_dir(Path(entry.path), depth + 1)
            elif entry.name.endswith(".jsonl"):
                yield Path(entry.path)

    def scan(self) -> None:
        """Walk the paths again; read only what changed since the last scan."""
        traces: dict[Path, _TraceFile] = {}
        evals: dict[str, EvalRef] = {}
        trainings: dict[str, TrainingRef] = {}
        other: dict[Path, tuple[int, int]] = {}
        for path in self._walk():
            if path.name == "items.jsonl":
                folder = path.parent
                key = short_id("eval", str(folder.resolve()))
                evals[key] = EvalRef(key, folder, self._show(folder))
                continue
            if path.suffix != ".jsonl" or path.name.startswith("credit"):
                continue
            try:
                stat = path.stat()
            except OSError:
                continue
            stamp = (stat.st_size, stat.st_mtime_ns)
            known = self._traces.get(path)
            if known is not None and known.stamp == stamp:
                traces[path] = known
                continue
            if self._other.get(path) == stamp:  # neither a trace nor metrics, unchanged
                other[path] = stamp
                continue
            first = _first_line(path)
            if first is None or not (first.get("event") in EVENT_TYPES or "step" in first):
                other[path] = stamp
                continue
            if first.get("event") in EVENT_TYPES:
                traces[path] = self._read_trace(path, stamp, stat.st_mtime)
            elif "step" in first and "samples" not in first:
                key = short_id("training", str(path.resolve()))
                credit = credit_file(path)
                trainings[key] = TrainingRef(
                    key, path, credit if credit.is_file() else None, self._show(path)
                )
        runs = [run for trace in traces.values() for run in trace.runs]
        runs.sort(key=lambda r: (r.summary.when, r.index), reverse=True)
        self._other = other
        with self._lock:
            self._traces = traces
            self._runs = runs
            self._by_id = {run.id: run for run in runs}
            self._evals = dict(sorted(evals.items(), key=lambda item: item[1].label))
            self._trainings = dict(sorted(trainings.items(), key=lambda item: item[1].label))

    def _read_trace(self, path: Path, stamp: tuple[int, int], mtime: float) -> _TraceFile:
        runs = split_runs(read_events(path))
        shown = self._show(path)
        refs = []
        for index, events in enumerate(runs):
            run_id = short_id("run", str(path.resolve()), str(index))
            # runs earlier in a file are older; the last one was written at the file's mtime
            when = mtime - (len(runs) - 1 - index) * 1e-3
            source = shown if len(runs) == 1 else f"{shown} #{index + 1}"
            refs.append(
                RunRef(run_id, path, index, summarise(events, id=run_id, when=when, source=source))
            )
        return _TraceFile(stamp, refs)

    # -- what the app asks --------------------------------------------------------------------
    def run_summaries(self) -> list[RunSummary]:
        with self._lock:
            return [run.summary for run in self._runs]

    def run(self, run_id: str) -> RunEvents | None:
        """The run's events as the file holds them now; over once it finished or is not the
        file's last run."""
        with self._lock:
            ref = self._by_id.get(run_id)
        if ref is None:
            return None
        runs = split_runs(read_events(ref.path))
        if ref.index >= len(runs):  # the file was rewritten shorter
            return RunEvents([], True, ref.summary.source)
        events = runs[ref.index]
        over = ref.index < len(runs) - 1 or any(isinstance(e, RunFinished) for e in events)
        return RunEvents(events, over, ref.summary.source)

    def evaluations(self) -> dict[str, EvalRef]:
        with self._lock:
            return dict(self._evals)

    def trainings(self) -> dict[str, TrainingRef]:
        with self._lock:
            return dict(self._trainings)
