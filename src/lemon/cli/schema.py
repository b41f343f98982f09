"""``lemon schema``: the spec's JSON Schema, for editors (bare, resource or either form)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from lemon.cli.options import EXIT_OK, add_roles_option

__all__ = ["register", "run"]


def run(args: argparse.Namespace) -> int:
    from lemon.spec.roles import default_roles
    from lemon.spec.schema import json_schema

    print(json.dumps(json_schema(args.form, roles=default_roles(args.roles)), indent=2))
    return EXIT_OK


def register(sub: Any) -> None:
    about = "print the spec's JSON Schema (for editors)"
    p = sub.add_parser("schema", help=about, description=about)
    p.add_argument("--form", choices=["any", "bare", "resource"], default="any")
    add_roles_option(p)
    p.set_defaults(handler=run)
