"""``lemon teacher search|llm``: write SFT data (see :mod:`lemon.policy.teacher`)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from lemon.cli import EXIT_OK, UsageError

__all__ = ["register"]


def _items(args: argparse.Namespace) -> list[Any]:
    from lemon.data.errors import DataError
    from lemon.data.items import Benchmark
    from lemon.data.splits import split_items

    try:
        benchmark = Benchmark(args.benchmark)
    except ValueError:
        known = ", ".join(b.value for b in Benchmark)
        raise UsageError(f"unknown benchmark {args.benchmark!r} (known: {known})") from None
    try:
        items = split_items(benchmark, split=args.split, directory=args.data_dir)
    except DataError as exc:
        raise UsageError(str(exc)) from None
    items = items[args.offset : args.offset + args.limit if args.limit else None]
    if not items:
        raise UsageError("no items selected")
    return items


def _progress(quiet: bool) -> Any:
    if quiet:
        return None

    def show(done: int, total: int) -> None:
        sys.stderr.write(f"\rteacher: {done}/{total} items")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


def _report(args: argparse.Namespace, stats: Any) -> int:
    summary = {"out": str(args.out), **stats.to_json()}
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"{stats.written} rows written to {args.out} ({stats.rejected} rejected, "
            f"{stats.skipped_done} already there, {stats.executions} spec executions, "
            f"{stats.reused_calls} calls reused, {stats.cache_hits} from the call cache)"
        )
    return EXIT_OK


def cmd_search(args: argparse.Namespace) -> int:
    from lemon.policy.teacher import SearchSettings, search_teacher
    from lemon.profiles import build_backends, close_backends, resolve_profile

    if args.candidates < 1 or args.max_tokens < 1 or args.concurrency < 1:
        raise UsageError("--candidates, --max-tokens and --concurrency must be at least 1")
    try:
        profile = resolve_profile(args.profile, files=args.profiles)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from None
    items = _items(args)
    from lemon.pricing import profile_prices

    settings = SearchSettings(
        candidates=args.candidates,
        max_tokens=args.max_tokens,
        concurrency=args.concurrency,
        prices=profile_prices(profile),
    )

    from lemon.backends.callcache import open_default_cache, wrap_backends

    cache = None if args.no_call_cache else open_default_cache()

    async def go() -> Any:
        backends = wrap_backends(build_backends(profile), cache)
        try:
            return await search_teacher(
                items,
                backends=backends,
                out=Path(args.out),
                settings=settings,
                progress=_progress(args.quiet),
            )
        finally:
            await close_backends(backends)

    return _report(args, asyncio.run(go()))


def cmd_llm(args: argparse.Namespace) -> int:
    from lemon.backends.openai import OpenAIBackend
    from lemon.policy.teacher import llm_teacher

    items = _items(args)
    backend = OpenAIBackend(args.endpoint, model=args.model, tier="teacher")

    async def go() -> Any:
        try:
            return await llm_teacher(
                items,
                backend=backend,
                out=Path(args.out),
                max_tokens=args.max_tokens,
                concurrency=args.concurrency,
                progress=_progress(args.quiet),
            )
        finally:
            await backend.aclose()

    return _report(args, asyncio.run(go()))


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark", required=True)
    p.add_argument("--split", choices=["train", "test", "all"], default="train")
    p.add_argument("--limit", type=int, default=0, help="first N items (0: all)")
    p.add_argument("--offset", type=int, default=0)
    p.add_argument(
        "--data-dir",
        default=None,
        help="default: $LEMON_DATA_DIR if set, else the copy shipped with lemon",
    )
    p.add_argument("--out", required=True, help="SFT rows (JSONL), appended; resumable")
    p.add_argument("--json", action="store_true", help="print one JSON summary")
    p.add_argument("-q", "--quiet", action="store_true")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "teacher",
        help="write SFT data: specs chosen by a search or written by an LLM",
        description="Write SFT rows (prompt, completion = canonical spec YAML, provenance).",
    )
    teachers = p.add_subparsers(dest="teacher", required=True, metavar="TEACHER")
    s = teachers.add_parser(
        "search", help="execute candidate specs per item, keep the best by R_orch"
    )
    _common(s)
    s.add_argument("--candidates", type=int, default=6, help="specs tried per item (default 6)")
    s.add_argument("--max-tokens", type=int, default=128, help="per agent (default 128)")
    s.add_argument("--concurrency", type=int, default=2, help="items in flight")
    s.add_argument("--profile", default="embedded")
    s.add_argument("--profiles", action="append", default=[], metavar="FILE")
    s.add_argument(
        "--no-call-cache",
        action="store_true",
        help="do not read or write the persistent call cache ($LEMON_CALL_CACHE; lemon cache)",
    )
    s.set_defaults(handler=cmd_search)
    llm = teachers.add_parser("llm", help="few-shot an LLM behind an OpenAI-compatible URL")
    _common(llm)
    llm.add_argument("--endpoint", required=True, help="base URL, e.g. http://host:8000/v1")
    llm.add_argument("--model", required=True, help="served model name")
    llm.add_argument("--max-tokens", type=int, default=384)
    llm.add_argument("--concurrency", type=int, default=4)
    llm.set_defaults(handler=cmd_llm)
