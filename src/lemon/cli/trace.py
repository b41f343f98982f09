"""``lemon trace PATH``: render a run's trace (JSONL, ``lemon run --trace``) as a table of
agents or as a timeline."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lemon.cli.options import EXIT_INVALID, EXIT_OK, UsageError

__all__ = ["register", "run"]


def run(args: argparse.Namespace) -> int:
    from lemon.cli.rendering import render_table, render_timeline
    from lemon.events import read_trace

    try:
        events = read_trace(args.path)
    except OSError as exc:
        raise UsageError(f"cannot read {args.path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_INVALID
    print(render_timeline(events) if args.timeline else render_table(events))
    return EXIT_OK


def register(sub: Any) -> None:
    p = sub.add_parser("trace", help="render a run trace (JSONL) as a table or timeline")
    p.add_argument("path", metavar="PATH", help="a JSONL trace; - reads standard input")
    p.add_argument("--timeline", action="store_true")
    p.set_defaults(handler=run)
