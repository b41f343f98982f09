"""The ``lemon`` command line.

Every command, the core's and the edge packages', is an entry point in the ``lemon.commands``
group naming a ``register(subparsers)`` function (one module per command under
:mod:`lemon.cli`, named after it; the shared options live in :mod:`lemon.cli.options`). A
command's handler takes the parsed ``argparse.Namespace`` and returns an exit code; it may raise
:class:`~lemon.cli.options.UsageError`. An entry point may name the extra its command needs
(``train = "lemon_train.cli:register [train]"``): when that extra is not installed, or the
command's module cannot be imported, only that command is unavailable and says why.

Exit codes: 0 success; 1 a spec was invalid (errors printed as ``PATH:LINE:COL: message``);
2 usage errors and unreadable files.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, PackageNotFoundError, distribution, entry_points
from typing import Any

from lemon import __version__
from lemon.cli.options import EXIT_INVALID, EXIT_OK, EXIT_USAGE, UsageError

__all__ = [
    "COMMAND_GROUP",
    "DISTRIBUTION",
    "Command",
    "build_parser",
    "main",
    "missing_requirements",
]

COMMAND_GROUP = "lemon.commands"
DISTRIBUTION = "lemon-orchestration"


def missing_requirements(entry: EntryPoint) -> list[str]:
    """The requirements of the extras ``entry`` names (in the distribution that declares it)
    that are not installed."""
    if not entry.extras or entry.dist is None:
        return []
    wanted = "|".join(re.escape(extra) for extra in entry.extras)
    missing = []
    for requirement in entry.dist.requires or []:
        name, _, marker = requirement.partition(";")
        if not re.search(rf"extra\s*==\s*[\"']({wanted})[\"']", marker):
            continue
        found = re.match(r"[A-Za-z0-9._-]+", name.strip())
        if found is None:
            continue
        try:
            distribution(found.group(0))
        except PackageNotFoundError:
            missing.append(found.group(0))
    return missing


def _install_hint(entry: EntryPoint) -> str:
    extras = ",".join(entry.extras)
    return f"pip install '{DISTRIBUTION}[{extras}]'"


@dataclass(frozen=True, slots=True)
class Command:
    """A registered command: its entry point, and why its module could not be imported."""

    entry: EntryPoint
    broken: str | None = None

    def unavailable(self) -> str | None:
        """Why the command cannot run here (a failed import, a missing extra), or None."""
        if self.broken is not None:
            return self.broken
        missing = missing_requirements(self.entry)
        if missing:
            return f"{', '.join(missing)} not installed ({_install_hint(self.entry)})"
        return None


def _register_commands(sub: Any) -> dict[str, Command]:
    """Add every command of the entry-point group; a command whose module cannot be imported
    gets a stub parser, and its :class:`Command` says why."""
    commands: dict[str, Command] = {}
    for entry in sorted(entry_points(group=COMMAND_GROUP), key=lambda e: e.name):
        if entry.name in commands:  # a second distribution naming the same command
            continue
        try:  # a module may import its extra's packages when it registers, not only when loaded
            entry.load()(sub)
        except ImportError as exc:
            why = f"{exc}" + (f" ({_install_hint(entry)})" if entry.extras else "")
            if entry.name not in sub.choices:  # it failed before adding its parser
                sub.add_parser(entry.name, help=f"(unavailable: {why})")
            commands[entry.name] = Command(entry, why)
            continue
        commands[entry.name] = Command(entry)
    return commands


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Command]]:
    """The ``lemon`` parser and the commands it knows, by name."""
    parser = argparse.ArgumentParser(
        prog="lemon", description="LEMON: learned orchestration of LLM agent teams."
    )
    parser.add_argument("--version", action="version", version=f"lemon {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    return parser, _register_commands(sub)


def main(argv: Sequence[str] | None = None) -> int:
    from lemon.spec.issues import SpecError

    parser, commands = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not commands:
        print(
            f"lemon: no commands: {DISTRIBUTION} is not installed (pip install -e .)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    why = commands[argv[0]].unavailable() if argv and argv[0] in commands else None
    if why is not None:
        print(f"lemon: 'lemon {argv[0]}' is unavailable: {why}", file=sys.stderr)
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
