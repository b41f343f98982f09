"""``lemon report RUN...``: compare eval runs as a markdown table (Pareto front marked) and an
accuracy-vs-cost plot (``--png``, needs the ``report`` extra); cost is tier-priced worker tokens
(``--cost priced``, the default) or raw tokens (``--cost tokens``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from lemon.cli.options import EXIT_INVALID, EXIT_OK

__all__ = ["register", "run"]


def run(args: argparse.Namespace) -> int:
    from lemon.evals.report import load_summaries, markdown_table, oracle_summary, plot

    try:
        summaries = load_summaries(args.runs)
        for group in args.oracle or []:
            summaries.append(oracle_summary([p for p in group.split(",") if p]))
    except (OSError, ValueError, KeyError) as exc:
        print(f"lemon report: {exc}", file=sys.stderr)
        return EXIT_INVALID
    table = markdown_table(summaries, args.cost)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table + "\n", encoding="utf-8")
    if args.png:
        plot(summaries, args.png, args.cost)
        print(f"wrote {args.png}", file=sys.stderr)
    return EXIT_OK


def register(sub: Any) -> None:
    p = sub.add_parser(
        "report", help="compare eval runs: markdown table and accuracy against cost PNG"
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="run directories or summary files")
    p.add_argument(
        "--oracle",
        action="append",
        metavar="RUN,RUN[,...]",
        help="add the per-item best of these runs (same items) as an upper bound, kept off the "
        "Pareto front (repeatable)",
    )
    p.add_argument("--png", metavar="PATH")
    p.add_argument("--markdown", metavar="PATH")
    p.add_argument(
        "--cost",
        choices=["priced", "tokens"],
        default="priced",
        help="x axis and Pareto fronts: tier-priced worker tokens (default) or raw tokens",
    )
    p.set_defaults(handler=run)
