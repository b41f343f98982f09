"""The one harness behind every ``lemon bench`` script: its command line, its output, its record.

A harness ``bench_NAME.py`` measures and builds one JSON object (``"benchmark": NAME`` and, where
it sets two things side by side, the headline figure under ``ratio``); this module does the rest,
the same way for all of them::

    bench = harness.Harness("engine", __doc__, repeats=5)
    bench.parser.add_argument("--latency", type=float, default=0.05)
    args = bench.parse(argv)
    ...
    return bench.finish(args, result, text=lambda r: f"ratio {r['ratio']}")

- the common arguments: ``--json`` (print the object, one line), ``--record PATH`` (also store the
  run, below), and ``--rounds``/``--repeats`` where the harness repeats its measurement, and
  ``--out FILE`` (the object alone, indented) where a harness offers it;
- the output: one JSON object on stdout with ``--json``, else the harness's own summary line(s)
  (by default ``key: value`` per key); nothing else on stdout;
- the record (``--record PATH``, or ``benchmarks/record.py``, which runs ``lemon bench`` with it):
  ``{"command", "recorded_at", "commit", "cpus", "loadavg_before", "loadavg_after", "wall_s",
  "exit_code", "result"}``, ``result`` the object unchanged. This machine is shared, so the load
  averages (1, 5, 15 minutes) say how busy it was; compare ratios measured side by side, not
  absolute times. ``LEMON_*`` variables set for the run are part of the command;
- the side-by-side helpers: :func:`alternating` (which side goes first in a round),
  :func:`ratio`, :func:`percentile`, and :func:`interval`, a paired bootstrap interval through
  :func:`lemon.scoring.stats.paired_bootstrap` (the one in the tree).

Harnesses are scripts (``lemon bench`` runs ``python bench_NAME.py``), so they import this module
by name, as the module beside them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from lemon.scoring.stats import paired_bootstrap

__all__ = [
    "ROOT",
    "Harness",
    "alternating",
    "commit",
    "interval",
    "percentile",
    "ratio",
    "record_path",
]

ROOT = Path(__file__).resolve().parents[1]
"""The checkout the harnesses belong to."""

_T = TypeVar("_T")

Result = dict[str, Any]


def commit() -> str:
    """The checkout's short commit, with ``+changes`` when code (not results) differs from it."""
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    code = ["src", "operator", "services", "benchmarks", ":(exclude)benchmarks/results"]
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", *code], cwd=ROOT, capture_output=True, text=True
    )
    return done.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def record_path(path: Path, *, name: str, at: dt.datetime) -> Path:
    """Where ``--record PATH`` stores a run: PATH itself when it names a ``.json`` file, else
    ``PATH/NAME-YYYYmmddTHHMMSSZ.json``."""
    if path.suffix == ".json":
        return path
    return path / f"{name}-{at.strftime('%Y%m%dT%H%M%SZ')}.json"


def _command(name: str, argv: Sequence[str]) -> str:
    """The run as ``lemon bench NAME --json ARGS`` (``--record`` left out), after the ``LEMON_*``
    variables set for it."""
    rest: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--record":
            skip = True
        elif not arg.startswith("--record=") and arg != "--json":
            rest.append(arg)
    env = " ".join(
        f"{key}={shlex.quote(value)}"
        for key, value in sorted(os.environ.items())
        if key.startswith("LEMON_")
    )
    command = shlex.join(["lemon", "bench", name, "--json", *rest])
    return f"{env} {command}" if env else command


def _key_lines(result: Result) -> str:
    return "\n".join(f"{key}: {value}" for key, value in result.items())


def _write_json(path: Path, value: object) -> None:
    """``value`` indented, written whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
    partial.replace(path)


class Harness:
    """One ``lemon bench NAME`` script's command line and output.

    ``parser`` holds the common arguments; the harness adds its own, then calls :meth:`parse`
    (which notes the start: time and load) and, with its result, :meth:`finish`.
    """

    def __init__(
        self,
        name: str,
        doc: str | None,
        *,
        rounds: int | None = None,
        rounds_help: str | None = None,
        repeats: int | None = None,
        repeats_help: str | None = None,
        out: bool = False,
    ) -> None:
        self.name = name
        self.parser = argparse.ArgumentParser(
            prog=f"lemon bench {name}", description=(doc or name).strip().splitlines()[0]
        )
        self.parser.add_argument("--json", action="store_true", help="print one JSON object")
        self.parser.add_argument(
            "--record",
            type=Path,
            metavar="PATH",
            help="also store the run (its command, commit, load and result) in PATH: a .json "
            f"file, or a folder (as {name}-<UTC time>.json)",
        )
        if rounds is not None:
            self.parser.add_argument("--rounds", type=int, default=rounds, help=rounds_help)
        if repeats is not None:
            self.parser.add_argument("--repeats", type=int, default=repeats, help=repeats_help)
        if out:
            self.parser.add_argument("--out", type=Path, help="also write the JSON object here")
        self._argv: list[str] = []
        self._load_before: list[float] = []
        self._started = 0.0

    def parse(self, argv: Sequence[str] | None = None) -> argparse.Namespace:
        """The arguments (``sys.argv`` when ``argv`` is None); the run starts here."""
        self._argv = list(sys.argv[1:] if argv is None else argv)
        args = self.parser.parse_args(self._argv)
        self._load_before = [round(x, 2) for x in os.getloadavg()]
        self._started = time.monotonic()
        return args

    def finish(
        self,
        args: argparse.Namespace,
        result: Result,
        *,
        text: Callable[[Result], str] = _key_lines,
        code: int = 0,
    ) -> int:
        """Print ``result`` (one JSON line with ``--json``, else ``text(result)``), write it to
        ``--out`` and record it under ``--record`` where asked; returns ``code``, the exit
        status."""
        wall = round(time.monotonic() - self._started, 1)
        if getattr(args, "out", None) is not None:
            _write_json(args.out, result)
        print(json.dumps(result) if args.json else text(result))
        if args.record is not None:
            now = dt.datetime.now(dt.UTC).replace(microsecond=0)
            path = record_path(args.record, name=self.name, at=now)
            _write_json(
                path,
                {
                    "command": _command(self.name, self._argv),
                    "recorded_at": now.isoformat(),
                    "commit": commit(),
                    "cpus": os.cpu_count(),
                    "loadavg_before": self._load_before,
                    "loadavg_after": [round(x, 2) for x in os.getloadavg()],
                    "wall_s": wall,
                    "exit_code": code,
                    "result": result,
                },
            )
            print(f"lemon bench {self.name}: recorded in {path}", file=sys.stderr)
        return code


def alternating(index: int, first: _T, second: _T) -> tuple[_T, _T]:
    """The order of round ``index`` of a side-by-side measurement: ``(first, second)`` in even
    rounds, ``(second, first)`` in odd ones, so a drift in the machine's speed hits both alike."""
    return (first, second) if index % 2 == 0 else (second, first)


def ratio(numerator: float, denominator: float, *, digits: int = 4) -> float:
    """``numerator / denominator`` rounded to ``digits``: a side-by-side figure such as the
    headline ``ratio``."""
    return round(numerator / denominator, digits)


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank quantile ``q`` (0 to 1) of ``values``: the sorted value at index
    ``round(q * (n - 1))``, so a measured value, never an interpolation."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def interval(
    statistic: Callable[..., float],
    *samples: Sequence[float],
    rounds: int = 2000,
    seed: int = 0,
    digits: int = 4,
) -> list[float]:
    """The 95% interval of ``statistic`` over the paired ``samples`` (items resampled together,
    :func:`lemon.scoring.stats.paired_bootstrap`), rounded, as a JSON pair ``[low, high]``."""
    lo, hi = paired_bootstrap(statistic, *samples, rounds=rounds, seed=seed)
    return [round(lo, digits), round(hi, digits)]
