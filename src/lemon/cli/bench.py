"""``lemon bench NAME``: run the harness ``bench_NAME.py`` of the source checkout (``--json``
prints one JSON object, with the headline comparison under ``ratio``).

A harness is a script, run as Python runs a script (``python bench_NAME.py ARGS``, in a child
process, so the modules beside it import by name). It is looked up in ``benchmarks/`` (the
performance harnesses), then in ``experiments/*/`` (an experiment whose driver is a
``bench_*.py``, such as ``learning``: credit in the simulator).

The harnesses live in the source checkout, not in the package: they are found in
``$LEMON_BENCHMARKS_DIR`` (a ``benchmarks/`` folder; the ``experiments/`` beside it), else in the
checkout that an editable install (``pip install -e .``) points at, read from the installed
distribution's ``direct_url.json`` (PEP 610). An install from a wheel has no checkout, and the
command says so.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from importlib.metadata import distributions
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from lemon.cli import DISTRIBUTION
from lemon.cli.options import UsageError, add_json_option

__all__ = ["BENCHMARKS_ENV", "benchmarks_dir", "checkout_of", "find_harness", "register", "run"]

BENCHMARKS_ENV = "LEMON_BENCHMARKS_DIR"


def checkout_of(direct_url: str | None) -> Path | None:
    """The source directory of an editable install, from its ``direct_url.json`` (PEP 610);
    None for an install from a wheel or an index."""
    if not direct_url:
        return None
    record = json.loads(direct_url)
    url = urlparse(str(record.get("url", "")))
    if url.scheme != "file" or not (record.get("dir_info") or {}).get("editable"):
        return None
    return Path(unquote(url.path))


def benchmarks_dir() -> Path:
    env = os.environ.get(BENCHMARKS_ENV)
    if env:
        return Path(env)
    records = (found.read_text("direct_url.json") for found in distributions(name=DISTRIBUTION))
    checkout = checkout_of(next((record for record in records if record), None))
    if checkout is None:
        raise UsageError(
            "lemon is not installed from a source checkout, and benchmarks/ ships only with the "
            f"source: install it with `pip install -e .` from a checkout, or set {BENCHMARKS_ENV}"
        )
    directory = checkout / "benchmarks"
    if not directory.is_dir():
        raise UsageError(f"{directory}: no such folder in the checkout lemon is installed from")
    return directory


def _harnesses(directory: Path) -> dict[str, Path]:
    """Every harness by its command name: ``benchmarks/bench_*.py``, then the experiments'
    ``experiments/*/bench_*.py`` (a performance harness wins a clash)."""
    found: dict[str, Path] = {}
    for path in [
        *sorted(directory.glob("bench_*.py")),
        *sorted((directory.parent / "experiments").glob("*/bench_*.py")),
    ]:
        found.setdefault(path.stem.removeprefix("bench_").replace("_", "-"), path)
    return found


def find_harness(name: str, directory: Path) -> Path:
    """The script ``lemon bench NAME`` runs."""
    harnesses = _harnesses(directory)
    path = harnesses.get(name.replace("_", "-"))
    if path is None:
        raise UsageError(f"unknown benchmark {name!r} (known: {', '.join(sorted(harnesses))})")
    return path


def run(args: argparse.Namespace) -> int:
    path = find_harness(args.name, benchmarks_dir())
    argv = [*(["--json"] if args.json else []), *args.bench_args]
    return subprocess.run([sys.executable, str(path), *argv], check=False).returncode


def register(sub: Any) -> None:
    about = "run a harness from benchmarks/ or experiments/*/ (bench_NAME.py)"
    p = sub.add_parser("bench", help=about, description=about)
    p.add_argument("name", metavar="NAME")
    add_json_option(p)
    p.add_argument("bench_args", nargs=argparse.REMAINDER, help="passed to the benchmark")
    p.set_defaults(handler=run)
