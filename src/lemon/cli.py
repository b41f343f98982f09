"""The ``lemon`` command line.

Exit codes: 0 success; 1 a spec was invalid (errors printed as ``PATH:LINE:COL: message``);
2 usage errors and unreadable files.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lemon import __version__
from lemon.spec.errors import SpecError
from lemon.spec.validation import DEFAULT_MAX_AGENTS, ParsedSpec, ValidationOptions

__all__ = [
    "COMMAND_MODULES",
    "EXIT_INVALID",
    "EXIT_OK",
    "EXIT_USAGE",
    "PLUGIN_GROUP",
    "UsageError",
    "main",
]

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2

COMMAND_MODULES: tuple[str, ...] = (
    "lemon.run_cli",
    "lemon.evaluation_cli",
    "lemon.eval_cli",
    "lemon.teacher_cli",
)
"""Modules that add subcommands: each defines ``register(subparsers) -> None`` and must be
cheap to import (heavy imports go inside the command handlers). Handlers take the parsed
``argparse.Namespace`` and return an exit code; they may raise :class:`UsageError`."""

PLUGIN_GROUP = "lemon.commands"
"""Entry-point group through which the edge packages add commands (``lemon train`` from
``lemon_train``, ``lemon serve``/``lemon client`` from ``lemon_service``): each entry point names
a ``register(subparsers)`` function. The core never imports an edge package by name; an edge
package that is not installed (or fails to import) simply adds no command, and
``lemon COMMAND`` then says which extra provides it."""

PLUGIN_EXTRAS = {"train": "train", "serve": "service", "client": "service"}
"""Commands an edge package provides, and the pyproject extra that installs it."""


class UsageError(Exception):
    """Reported as ``lemon: message`` with exit code 2."""


def _read(path: str) -> str:
    from lemon.spec.validation import read_text

    if path == "-":
        return sys.stdin.read()
    try:
        return read_text(path)
    except IsADirectoryError:
        raise UsageError(f"cannot read {path}: is a directory") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


def _options(args: argparse.Namespace) -> ValidationOptions:
    from lemon.spec.roles import default_roles

    if args.max_agents < 1:
        raise UsageError("--max-agents must be at least 1")
    try:
        roles = default_roles(args.roles)
    except OSError as exc:
        raise UsageError(f"cannot read role file: {exc}") from None
    return ValidationOptions(max_agents=args.max_agents, roles=roles)


def _parse(path: str, options: ValidationOptions) -> ParsedSpec:
    from lemon.spec.validation import parse_spec

    return parse_spec(_read(path), source=path, options=options)


def _print_warnings(parsed: ParsedSpec) -> None:
    for warning in parsed.warnings:
        print(warning.render(parsed.source), file=sys.stderr)


def _single(args: argparse.Namespace) -> ParsedSpec:
    """Parse the one spec a command works on, or print its errors and exit 1."""
    try:
        parsed = _parse(args.path, _options(args))
    except SpecError as exc:
        print(exc.render(), file=sys.stderr)
        raise SystemExit(EXIT_INVALID) from None
    _print_warnings(parsed)
    return parsed


def cmd_validate(args: argparse.Namespace) -> int:
    options = _options(args)
    invalid = unreadable = 0
    for path in args.paths:
        try:
            parsed = _parse(path, options)
        except SpecError as exc:
            invalid += 1
            print(exc.render())
            continue
        except UsageError as exc:
            unreadable += 1
            print(f"lemon: {exc}", file=sys.stderr)
            continue
        _print_warnings(parsed)
    if not args.quiet:
        valid = len(args.paths) - invalid - unreadable
        summary = f"{valid} valid, {invalid} invalid"
        print(summary + (f", {unreadable} unreadable" if unreadable else ""), file=sys.stderr)
    if unreadable:
        return EXIT_USAGE
    return EXIT_INVALID if invalid else EXIT_OK


def cmd_compile(args: argparse.Namespace) -> int:
    from lemon.spec.dag import compile_spec

    parsed = _single(args)
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


def cmd_mutate(args: argparse.Namespace) -> int:
    from lemon.spec.mutations import PAPER_KINDS, MutationKind, mutations

    parsed = _single(args)
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


def cmd_fmt(args: argparse.Namespace) -> int:
    from lemon.spec.formatting import format_resource, format_spec

    options = _options(args)
    status = EXIT_OK
    for path in args.paths:
        try:
            parsed = _parse(path, options)
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
            target = Path(path)
            temp = target.with_name(f".{target.name}.lemon-fmt.tmp")
            temp.write_text(text, encoding="utf-8", newline="")
            os.replace(temp, target)  # atomic: the file is never half-written
            print(f"formatted {path}", file=sys.stderr)
    return status


def cmd_schema(args: argparse.Namespace) -> int:
    from lemon.spec.roles import default_roles
    from lemon.spec.schema import json_schema

    print(json.dumps(json_schema(args.form, roles=default_roles(args.roles)), indent=2))
    return EXIT_OK


def cmd_roles(args: argparse.Namespace) -> int:
    from lemon.spec.roles import default_roles

    roles = default_roles(args.roles)
    if args.json:
        print(json.dumps([role.model_dump() for role in roles.values()], indent=2))
        return EXIT_OK
    width = max(map(len, roles))
    for role in roles.values():
        print(f"{role.name:<{width}}  {role.description}")
    return EXIT_OK


def _benchmarks_dir() -> Path | None:
    env = os.environ.get("LEMON_BENCHMARKS_DIR")
    if env:
        return Path(env)
    candidates = [Path.cwd(), *Path.cwd().parents, Path(__file__).resolve().parents[2]]
    for base in candidates:
        if (base / "benchmarks").is_dir() and (base / "pyproject.toml").is_file():
            return base / "benchmarks"
    return None


def cmd_bench(args: argparse.Namespace) -> int:
    directory = _benchmarks_dir()
    if directory is None:
        raise UsageError(
            "no benchmarks/ folder found (run from the repository or set LEMON_BENCHMARKS_DIR)"
        )
    path = directory / f"bench_{args.name.replace('-', '_')}.py"
    if not path.is_file():
        known = sorted(
            p.stem.removeprefix("bench_").replace("_", "-") for p in directory.glob("bench_*.py")
        )
        raise UsageError(f"unknown benchmark {args.name!r} (known: {', '.join(known)})")
    spec = importlib.util.spec_from_file_location(f"lemon_bench_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run: Callable[[list[str]], int] = module.main
    argv = [*(["--json"] if args.json else []), *args.bench_args]
    return run(argv)


def _add_spec_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--roles",
        action="append",
        default=[],
        metavar="FILE",
        help="extra role file (repeatable; also $LEMON_ROLES)",
    )
    parser.add_argument(
        "--max-agents",
        type=int,
        default=DEFAULT_MAX_AGENTS,
        metavar="N",
        help=f"largest team allowed (default {DEFAULT_MAX_AGENTS})",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lemon", description="LEMON: learned orchestration of LLM agent teams."
    )
    parser.add_argument("--version", action="version", version=f"lemon {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, handler: Callable[[argparse.Namespace], int], help_: str) -> Any:
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(handler=handler)
        return p

    p = command("validate", cmd_validate, "check spec files; errors as PATH:LINE:COL: message")
    p.add_argument("paths", nargs="+", metavar="PATH", help="spec files ('-' for stdin)")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary line")
    _add_spec_options(p)

    p = command("compile", cmd_compile, "compile a spec to its DAG (levels, order, edges)")
    p.add_argument("path", metavar="PATH")
    group = p.add_mutually_exclusive_group()
    for fmt in ("json", "mermaid", "dot"):
        group.add_argument(f"--{fmt}", dest="format", action="store_const", const=fmt)
    _add_spec_options(p)

    from lemon.spec.mutations import MutationKind

    p = command("mutate", cmd_mutate, "list single-field counterfactual mutations of a spec")
    p.add_argument("path", metavar="PATH")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument(
        "--kind",
        action="append",
        choices=[kind.value for kind in MutationKind],
        help="only these kinds (repeatable; default: the paper's three, drop_dependency, "
        "rollback_role and downgrade_capacity; upgrade_capacity and remove_agent on request)",
    )
    _add_spec_options(p)

    p = command("fmt", cmd_fmt, "rewrite specs in the canonical layout (comments are dropped)")
    p.add_argument("paths", nargs="+", metavar="PATH")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if a file would change")
    mode.add_argument("--stdout", action="store_true", help="print instead of rewriting")
    _add_spec_options(p)

    p = command("schema", cmd_schema, "print the spec's JSON Schema (for editors)")
    p.add_argument("--form", choices=["any", "bare", "resource"], default="any")
    p.add_argument("--roles", action="append", default=[], metavar="FILE")

    p = command("roles", cmd_roles, "list the role library")
    p.add_argument("--json", action="store_true")
    p.add_argument("--roles", action="append", default=[], metavar="FILE")

    p = command("bench", cmd_bench, "run a benchmark from benchmarks/ (bench_NAME.py)")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("bench_args", nargs=argparse.REMAINDER, help="passed to the benchmark")

    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(sub)
    parser.set_defaults(missing_plugins=_register_plugins(sub))
    return parser


def _register_plugins(sub: Any) -> dict[str, str]:
    """Add the edge packages' commands; return ``{command: why it is unavailable}``."""
    from importlib.metadata import entry_points

    missing: dict[str, str] = {}
    for entry in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
        if entry.name in sub.choices:
            continue
        try:
            register = entry.load()
        except ImportError as exc:  # the extra is not installed: the command explains itself
            missing[entry.name] = f"{exc}"
            continue
        register(sub)
    for name, extra in PLUGIN_EXTRAS.items():
        if name not in sub.choices and name not in missing:
            missing[name] = f"its package is not installed (pip install '.[{extra}]')"
    for name, why in missing.items():
        sub.add_parser(name, help=f"(unavailable: {why})")
    return missing


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    missing: dict[str, str] = parser.get_default("missing_plugins")
    if argv and argv[0] in missing:
        print(f"lemon: 'lemon {argv[0]}' is unavailable: {missing[argv[0]]}", file=sys.stderr)
        return EXIT_USAGE
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except UsageError as exc:
        print(f"lemon: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SpecError as exc:  # e.g. an invalid role file
        print(exc.render(), file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    return code


if __name__ == "__main__":
    raise SystemExit(main())
