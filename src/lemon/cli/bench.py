"""``lemon bench NAME``: run ``benchmarks/bench_NAME.py`` (its ``main(argv)``; ``--json``
prints one JSON object, with the headline comparison under ``ratio``).

The benchmarks live in the source checkout, not in the package: they are found in
``$LEMON_BENCHMARKS_DIR``, else in the checkout that an editable install (``pip install -e .``)
points at, read from the installed distribution's ``direct_url.json`` (PEP 610). An install
from a wheel has no checkout, and the command says so.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from collections.abc import Callable
from importlib.metadata import distributions
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from lemon.cli import DISTRIBUTION
from lemon.cli.options import UsageError, add_json_option

__all__ = ["BENCHMARKS_ENV", "benchmarks_dir", "checkout_of", "register", "run"]

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


def run(args: argparse.Namespace) -> int:
    directory = benchmarks_dir()
    path = directory / f"bench_{args.name.replace('-', '_')}.py"
    if not path.is_file():
        known = sorted(
            p.stem.removeprefix("bench_").replace("_", "-") for p in directory.glob("bench_*.py")
        )
        raise UsageError(f"unknown benchmark {args.name!r} (known: {', '.join(known)})")
    spec = importlib.util.spec_from_file_location(f"lemon_bench_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # registered first (importlib's recipe), so that pickle finds the module's functions by
    # name: a benchmark may hand them to worker processes
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    main: Callable[[list[str]], int] = module.main
    return main([*(["--json"] if args.json else []), *args.bench_args])


def register(sub: Any) -> None:
    about = "run a benchmark from benchmarks/ (bench_NAME.py)"
    p = sub.add_parser("bench", help=about, description=about)
    p.add_argument("name", metavar="NAME")
    add_json_option(p)
    p.add_argument("bench_args", nargs=argparse.REMAINDER, help="passed to the benchmark")
    p.set_defaults(handler=run)
