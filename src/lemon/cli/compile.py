"""``lemon compile PATH``: a spec's DAG as levels (default), JSON, Mermaid or Graphviz dot."""

from __future__ import annotations

import argparse
import json
from typing import Any

from lemon.cli.options import EXIT_OK, add_spec_options, single_spec

__all__ = ["register", "run"]


def run(args: argparse.Namespace) -> int:
    from lemon.spec.dag import compile_spec

    parsed = single_spec(args)
    dag = compile_spec(parsed.spec, output=parsed.output)
    if args.format == "json":
        print(json.dumps(dag.to_json()))
    elif args.format == "mermaid":
        print(dag.mermaid())
    elif args.format == "dot":
        print(dag.dot())
    else:
        for depth, level in enumerate(dag.levels):
            print(f"level {depth}: {', '.join(level)}")
        print(f"output: {dag.output}")
        print(f"critical path ({dag.critical_path_length}): {' -> '.join(dag.critical_path)}")
    return EXIT_OK


def register(sub: Any) -> None:
    about = "compile a spec to its DAG (levels, order, edges)"
    p = sub.add_parser("compile", help=about, description=about)
    p.add_argument("path", metavar="PATH")
    group = p.add_mutually_exclusive_group()
    for fmt in ("json", "mermaid", "dot"):
        group.add_argument(f"--{fmt}", dest="format", action="store_const", const=fmt)
    add_spec_options(p)
    p.set_defaults(handler=run)
