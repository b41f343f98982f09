"""``lemon score`` and ``lemon data``: scoring prediction files and listing benchmark data.

Cheap to import: everything heavy is imported inside the handlers.

Exit codes: 0 success; 1 a bad prediction file (``FILE:LINE: message`` on stderr: malformed
JSON, a missing field, an id the benchmark does not have); 2 usage errors, an unreadable file,
missing data, a sandbox that cannot run here.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["cmd_data", "cmd_score", "register"]

BENCHMARKS = ("gsm8k", "svamp", "multiarith", "aqua", "mmlu", "humaneval")


def _usage(message: str) -> Exception:
    from lemon.cli import UsageError

    return UsageError(message)


def cmd_score(args: argparse.Namespace) -> int:
    from lemon.data import DataError
    from lemon.sandbox import SandboxConfig, SandboxUnavailable
    from lemon.scoring import PredictionError, read_predictions, score_predictions

    try:
        predictions = read_predictions(args.predictions)
        sandbox = SandboxConfig(timeout_s=args.timeout, workers=args.workers)
        report = score_predictions(
            args.benchmark,
            predictions,
            source=args.predictions,
            directory=args.data_dir,
            sandbox=sandbox,
        )
    except PredictionError as exc:
        if exc.line is None:  # the file as a whole could not be read
            raise _usage(exc.render()) from None
        print(exc.render(), file=sys.stderr)
        return 1
    except DataError as exc:
        raise _usage(exc.render()) from None
    except SandboxUnavailable as exc:
        raise _usage(f"the code sandbox cannot run here: {exc}") from None
    if args.json:
        print(json.dumps(report.model_dump(mode="json")))
        return 0
    lo, hi = report.ci95
    print(
        f"{report.benchmark.value}: {report.correct}/{report.n} correct, accuracy "
        f"{report.accuracy:.4f} (95% CI {lo:.4f}-{hi:.4f})"
    )
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from lemon.data import (
        DATA_DIR_ENV,
        OFFICIAL_SOURCES,
        Benchmark,
        DataError,
        Split,
        catalog,
        locate_data,
        split_items,
        verify_checksums,
    )

    try:
        location = locate_data(args.data_dir)
    except DataError as exc:
        raise _usage(exc.render()) from None
    print(f"data directory: {location.describe()}", file=sys.stderr)
    args.data_dir = location.path
    if args.verify:
        problems = verify_checksums(location.path)
        for problem in problems:
            print(problem)
        if problems:
            return 1
        print(f"all files match {location.path / 'SHA256SUMS'}", file=sys.stderr)
        return 0
    try:
        entries = catalog(directory=args.data_dir)
        splits: dict[str, dict[str, int]] = {}
        if args.splits:
            for bench in Benchmark:
                present = [e for e in entries if e.benchmark is bench and e.items is not None]
                if any(e.source.value == "test" for e in present):
                    splits[bench.value] = {
                        part.value: len(split_items(bench, split=part, directory=args.data_dir))
                        for part in Split
                    }
    except DataError as exc:
        raise _usage(exc.render()) from None
    if args.json:
        payload: dict[str, Any] = {
            "directory": str(location.path),
            "origin": location.origin,
            "files": [e.model_dump(mode="json") for e in entries],
        }
        if args.splits:
            payload["splits"] = splits
        print(json.dumps(payload))
        return 0
    for entry in entries:
        if entry.items is not None:
            state = f"{entry.items} items"
        elif entry.error:
            state = f"unreadable: {entry.error}"
        else:
            state = "missing"
        print(f"{entry.benchmark.value:<11} {entry.source.value:<5} {state:<12} {entry.path}")
    for name, counts in splits.items():
        print(f"split {name:<11} " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    missing = [e for e in entries if not e.present]
    if missing:
        print(
            f"\n{len(missing)} missing. This command does not download: place the official "
            f"files at the paths above, or unset ${DATA_DIR_ENV} to use the copy shipped "
            "with lemon. Sources:",
            file=sys.stderr,
        )
        for bench in sorted({e.benchmark for e in missing}):
            print(f"  {bench.value}: {OFFICIAL_SOURCES[bench]}", file=sys.stderr)
    return 0


DATA_DIR_HELP = "default: $LEMON_DATA_DIR if set, else the copy shipped with lemon"


def register(subparsers: Any) -> None:
    """Add ``score`` and ``data`` to the ``lemon`` command."""
    p = subparsers.add_parser(
        "score",
        help="score a predictions file (JSONL of {id, output}) against a benchmark",
        description='Score predictions: one JSON object {"id", "output"} per line; ids may '
        "repeat; results keep input order. Errors are reported as FILE:LINE: message.",
    )
    p.set_defaults(handler=cmd_score)
    p.add_argument("--benchmark", required=True, choices=BENCHMARKS)
    p.add_argument("--predictions", required=True, metavar="FILE.jsonl")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    p.add_argument(
        "--timeout", type=float, default=10.0, metavar="S", help="HumanEval: seconds per program"
    )
    p.add_argument(
        "--workers", type=int, default=None, metavar="N", help="HumanEval: programs at once"
    )

    p = subparsers.add_parser(
        "data",
        help="list (or --verify) the benchmark files in the data directory",
        description="Say which data directory is read (the copy shipped with lemon, "
        "$LEMON_DATA_DIR or --data-dir), which benchmark files it holds and how many items "
        "each has. It never downloads.",
    )
    p.set_defaults(handler=cmd_data)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--splits", action="store_true", help="also count the test/train/all splits")
    p.add_argument(
        "--verify",
        action="store_true",
        help="check every file against the directory's SHA256SUMS (exit 1 on a mismatch)",
    )
    p.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
