"""``lemon data``: which data directory is read, which benchmark files it holds and how many
items each has (``--splits``: the test/train/all split sizes; ``--verify``: every file against
the directory's SHA256SUMS). It never downloads."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from lemon.cli.options import (
    EXIT_INVALID,
    EXIT_OK,
    UsageError,
    add_data_dir_option,
    add_json_option,
)

__all__ = ["register", "run"]


def run(args: argparse.Namespace) -> int:
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
        raise UsageError(exc.render()) from None
    print(f"data directory: {location.describe()}", file=sys.stderr)
    args.data_dir = location.path
    if args.verify:
        problems = verify_checksums(location.path)
        for problem in problems:
            print(problem)
        if problems:
            return EXIT_INVALID
        print(f"all files match {location.path / 'SHA256SUMS'}", file=sys.stderr)
        return EXIT_OK
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
        raise UsageError(exc.render()) from None
    if args.json:
        payload: dict[str, Any] = {
            "directory": str(location.path),
            "origin": location.origin,
            "files": [e.model_dump(mode="json") for e in entries],
        }
        if args.splits:
            payload["splits"] = splits
        print(json.dumps(payload))
        return EXIT_OK
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
    return EXIT_OK


def register(sub: Any) -> None:
    p = sub.add_parser(
        "data",
        help="list (or --verify) the benchmark files in the data directory",
        description="Say which data directory is read (the copy shipped with lemon, "
        "$LEMON_DATA_DIR or --data-dir), which benchmark files it holds and how many items "
        "each has. It never downloads.",
    )
    add_json_option(p)
    p.add_argument("--splits", action="store_true", help="also count the test/train/all splits")
    p.add_argument(
        "--verify",
        action="store_true",
        help="check every file against the directory's SHA256SUMS (exit 1 on a mismatch)",
    )
    add_data_dir_option(p)
    p.set_defaults(handler=run)
