"""``lemon roles``: the role library (built-in roles plus ``--roles`` files and
``$LEMON_ROLES``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from lemon.cli.options import EXIT_OK, add_json_option, add_roles_option

__all__ = ["register", "run"]


def run(args: argparse.Namespace) -> int:
    from lemon.spec.roles import default_roles

    roles = default_roles(args.roles)
    if args.json:
        print(json.dumps([role.model_dump() for role in roles.values()], indent=2))
        return EXIT_OK
    width = max(map(len, roles))
    for role in roles.values():
        print(f"{role.name:<{width}}  {role.description}")
    return EXIT_OK


def register(sub: Any) -> None:
    about = "list the role library"
    p = sub.add_parser("roles", help=about, description=about)
    add_json_option(p, help_text="print the roles as a JSON array")
    add_roles_option(p)
    p.set_defaults(handler=run)
