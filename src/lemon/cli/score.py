"""``lemon score``: score a predictions file (JSONL of ``{"id", "output"}``) against a benchmark.

Exit codes: 0 success; 1 a bad prediction file (``FILE:LINE: message`` on stderr: malformed
JSON, a missing field, an id the benchmark does not have); 2 usage errors, an unreadable file,
missing data, a sandbox that cannot run here.
"""

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

BENCHMARKS = ("gsm8k", "svamp", "multiarith", "aqua", "mmlu", "humaneval")


def run(args: argparse.Namespace) -> int:
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
            raise UsageError(exc.render()) from None
        print(exc.render(), file=sys.stderr)
        return EXIT_INVALID
    except DataError as exc:
        raise UsageError(exc.render()) from None
    except SandboxUnavailable as exc:
        raise UsageError(f"the code sandbox cannot run here: {exc}") from None
    if args.json:
        print(json.dumps(report.model_dump(mode="json")))
        return EXIT_OK
    lo, hi = report.ci95
    print(
        f"{report.benchmark.value}: {report.correct}/{report.n} correct, accuracy "
        f"{report.accuracy:.4f} (95% CI {lo:.4f}-{hi:.4f})"
    )
    return EXIT_OK


def register(sub: Any) -> None:
    p = sub.add_parser(
        "score",
        help="score a predictions file (JSONL of {id, output}) against a benchmark",
        description='Score predictions: one JSON object {"id", "output"} per line; ids may '
        "repeat; results keep input order. Errors are reported as FILE:LINE: message.",
    )
    p.add_argument("--benchmark", required=True, choices=BENCHMARKS)
    p.add_argument("--predictions", required=True, metavar="FILE.jsonl")
    add_json_option(p)
    add_data_dir_option(p)
    p.add_argument(
        "--timeout", type=float, default=10.0, metavar="S", help="HumanEval: seconds per program"
    )
    p.add_argument(
        "--workers", type=int, default=None, metavar="N", help="HumanEval: programs at once"
    )
    p.set_defaults(handler=run)
