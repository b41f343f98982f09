"""``lemon cache stats|clear``: the persistent call cache (:mod:`lemon.backends.callcache`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from lemon.cli.options import EXIT_OK, UsageError, add_json_option

__all__ = ["register", "run"]


def _open(args: argparse.Namespace) -> Any:
    from lemon.backends.callcache import PersistentCallCache, default_cache_path

    path = Path(args.path) if args.path else default_cache_path()
    if path is None:
        raise UsageError("the call cache is turned off (LEMON_CALL_CACHE=off); give --path")
    return PersistentCallCache(path)


def run(args: argparse.Namespace) -> int:
    cache = _open(args)
    try:
        if args.action == "clear":
            removed = cache.clear(model=args.model)
            result: dict[str, Any] = {"path": str(cache.path), "removed": removed}
        else:
            result = cache.stats().to_json()
    finally:
        cache.close()
    if args.json:
        print(json.dumps(result))
    elif args.action == "clear":
        print(f"removed {result['removed']} cached calls from {result['path']}")
    else:
        print(f"{result['path']}: {result['entries']} cached calls, {result['bytes']:,} bytes")
        for model, count in sorted(result["models"].items()):
            print(f"  {count:>8}  {model}")
    return EXIT_OK


def register(sub: Any) -> None:
    p = sub.add_parser(
        "cache",
        help="inspect or empty the persistent call cache",
        description="The persistent call cache keeps deterministic worker calls (greedy, or "
        "sampled with a seed) on disk for every process: teacher search, GRPO, eval. "
        "Location: $LEMON_CALL_CACHE, else calls.sqlite under $LEMON_CACHE_DIR "
        "(default ~/.cache/lemon).",
    )
    p.add_argument("action", choices=["stats", "clear"])
    p.add_argument("--path", default=None, help="the cache file (default: see above)")
    p.add_argument("--model", default=None, help="clear: only this model's entries")
    add_json_option(p)
    p.set_defaults(handler=run)
