"""Run one ``lemon bench`` and store its JSON object beside the exact command that made it.

    .venv/bin/python benchmarks/record.py benchmarks/results/engine-cpu/L50-1.json engine

runs ``lemon bench engine --json`` (arguments after the output file go to the benchmark) and
writes ``{"command", "recorded_at", "commit", "cpus", "loadavg_before", "loadavg_after",
"wall_s", "result"}``, where ``result`` is the benchmark's object unchanged. This machine is
shared, so the load averages (1, 5, 15 minutes) say how busy it was; compare ratios measured
side by side, not absolute times. ``LEMON_*`` variables set for the run are part of the
command.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    code = ["src", "operator", "services", "benchmarks", ":(exclude)benchmarks/results"]
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", *code],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    out, bench = Path(args[0]), args[1:]
    argv_run = [str(Path(sys.executable).with_name("lemon")), "bench", bench[0], "--json"]
    argv_run += bench[1:]
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(os.environ.items())
                   if k.startswith("LEMON_"))  # fmt: skip
    command = " ".join(part for part in (env, "lemon bench", shlex.join(argv_run[2:])) if part)
    before = [round(x, 2) for x in os.getloadavg()]
    started = time.monotonic()
    done = subprocess.run(argv_run, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = round(time.monotonic() - started, 1)
    if done.returncode != 0 and not done.stdout.strip():
        reason = done.stderr[-4000:]
        print(f"record: {command} failed ({done.returncode}):\n{reason}", file=sys.stderr)
        return 1
    record = {
        "command": command,
        "recorded_at": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
        "commit": _commit(),
        "cpus": os.cpu_count(),
        "loadavg_before": before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "wall_s": wall,
        "exit_code": done.returncode,
        "result": json.loads(done.stdout.strip().splitlines()[-1]),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(record))
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
