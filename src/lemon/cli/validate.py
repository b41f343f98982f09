"""``lemon validate PATH...``: check spec files; errors as ``PATH:LINE:COL: message``.

Exit 0 when every file is valid, 1 when any is invalid (one line per error on stdout), 2 when a
file cannot be read (the others are still checked).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lemon.cli.options import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    add_spec_options,
    parse_spec_file,
    print_warnings,
    validation_options,
)

__all__ = ["register", "run"]


def run(args: argparse.Namespace) -> int:
    from lemon.spec.issues import SpecError

    options = validation_options(args)
    invalid = unreadable = 0
    for path in args.paths:
        try:
            parsed = parse_spec_file(path, options)
        except SpecError as exc:
            invalid += 1
            print(exc.render())
            continue
        except UsageError as exc:
            unreadable += 1
            print(f"lemon: {exc}", file=sys.stderr)
            continue
        print_warnings(parsed)
    if not args.quiet:
        valid = len(args.paths) - invalid - unreadable
        summary = f"{valid} valid, {invalid} invalid"
        print(summary + (f", {unreadable} unreadable" if unreadable else ""), file=sys.stderr)
    if unreadable:
        return EXIT_USAGE
    return EXIT_INVALID if invalid else EXIT_OK


def register(sub: Any) -> None:
    about = "check spec files; errors as PATH:LINE:COL: message"
    p = sub.add_parser("validate", help=about, description=about)
    p.add_argument("paths", nargs="+", metavar="PATH", help="spec files ('-' for stdin)")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary line")
    add_spec_options(p)
    p.set_defaults(handler=run)
