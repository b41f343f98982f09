"""``lemon fmt PATH...``: rewrite specs in the canonical layout (in place, atomically; or
``--check`` / ``--stdout``). Comments are dropped; invalid files are left alone."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lemon.cli.options import (
    EXIT_INVALID,
    EXIT_OK,
    add_spec_options,
    parse_spec_file,
    validation_options,
)

__all__ = ["register", "run"]


def run(args: argparse.Namespace) -> int:
    from lemon import atomic
    from lemon.spec.formatting import format_resource, format_spec
    from lemon.spec.issues import SpecError

    options = validation_options(args)
    status = EXIT_OK
    for path in args.paths:
        try:
            parsed = parse_spec_file(path, options)
        except SpecError as exc:
            print(exc.render(), file=sys.stderr)
            status = EXIT_INVALID
            continue
        if parsed.resource is not None:
            text = format_resource(parsed.resource, output=parsed.output)
        else:
            text = format_spec(parsed.spec, output=parsed.output)
        if args.check:
            if text != parsed.text:
                print(f"{path}: would reformat", file=sys.stderr)
                status = EXIT_INVALID
        elif args.stdout or path == "-":
            sys.stdout.write(text)
        elif text != parsed.text:
            atomic.write_text(path, text, newline="")
            print(f"formatted {path}", file=sys.stderr)
    return status


def register(sub: Any) -> None:
    about = "rewrite specs in the canonical layout (comments are dropped)"
    p = sub.add_parser("fmt", help=about, description=about)
    p.add_argument("paths", nargs="+", metavar="PATH")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if a file would change")
    mode.add_argument("--stdout", action="store_true", help="print instead of rewriting")
    add_spec_options(p)
    p.set_defaults(handler=run)
