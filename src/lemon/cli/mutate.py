"""``lemon mutate PATH``: the spec's single-field counterfactual mutations, each with the span
of the edited field in the original text (``--json``: one object per line)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from lemon.cli.options import EXIT_OK, add_json_option, add_spec_options, single_spec

__all__ = ["register", "run"]


def run(args: argparse.Namespace) -> int:
    from lemon.spec.mutations import PAPER_KINDS, MutationKind, mutations

    parsed = single_spec(args)
    kinds = [MutationKind(k) for k in args.kind] if args.kind else list(PAPER_KINDS)
    found = mutations(parsed, kinds=kinds)
    if args.json:
        for mutation in found:
            print(json.dumps(mutation.to_json()))
        return EXIT_OK
    for mutation in found:
        start, end = mutation.span
        edited = parsed.text[start:end]
        print(
            f"{mutation.kind.value:<19} {mutation.agent:<16} -> {mutation.target:<16} "
            f"[{start}, {end}) {edited!r}"
        )
    print(f"{len(found)} mutations", file=sys.stderr)
    return EXIT_OK


def register(sub: Any) -> None:
    from lemon.spec.mutations import MutationKind

    about = "list single-field counterfactual mutations of a spec"
    p = sub.add_parser("mutate", help=about, description=about)
    p.add_argument("path", metavar="PATH")
    add_json_option(p, help_text="one JSON object per line")
    p.add_argument(
        "--kind",
        action="append",
        choices=[kind.value for kind in MutationKind],
        help="only these kinds (repeatable; default: the paper's three, drop_dependency, "
        "rollback_role and downgrade_capacity; upgrade_capacity and remove_agent on request)",
    )
    add_spec_options(p)
    p.set_defaults(handler=run)
