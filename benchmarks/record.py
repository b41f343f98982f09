"""Run one ``lemon bench`` and store its JSON object beside the exact command that made it.

    .venv/bin/python benchmarks/record.py benchmarks/results/engine-cpu/L50-1.json engine

runs ``lemon bench engine --json --record benchmarks/results/engine-cpu/L50-1.json``
(arguments after the benchmark's name go to it): the shared harness (:mod:`harness`) writes
``{"command", "recorded_at", "commit", "cpus", "loadavg_before", "loadavg_after", "wall_s",
"exit_code", "result"}``, ``result`` the benchmark's object unchanged. Every harness takes
``--record PATH`` itself; this script is the older spelling of it, kept for the commands the
results' READMEs quote.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import harness


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    out, name, rest = args[0], args[1], args[2:]
    lemon = str(Path(sys.executable).with_name("lemon"))
    command = [lemon, "bench", name, "--json", "--record", out, *rest]
    return subprocess.run(command, cwd=harness.ROOT, check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main())
