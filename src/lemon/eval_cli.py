"""``lemon eval`` and ``lemon report``."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from lemon.cli import EXIT_INVALID, EXIT_OK, UsageError

__all__ = ["register"]


def _method(args: argparse.Namespace) -> str:
    from lemon.evals.baselines import BASELINES

    chosen = [x for x in (args.spec, args.baseline, args.policy) if x]
    if len(chosen) > 1:
        raise UsageError("give at most one of --spec, --baseline, --policy")
    if args.specs_only and not args.policy:
        raise UsageError("--specs-only needs --policy (it checks the specs a policy writes)")
    if args.policy:
        return f"policy:{args.policy}"
    if args.spec:
        from lemon.spec.errors import SpecError
        from lemon.spec.validation import load_spec

        try:
            load_spec(args.spec)
        except OSError as exc:
            raise UsageError(f"cannot read {args.spec}: {exc.strerror or exc}") from None
        except SpecError as exc:
            raise UsageError(f"invalid spec:\n{exc.render()}") from None
        return f"spec:{args.spec}"
    name = args.baseline or "template"
    if name not in BASELINES:
        raise UsageError(f"unknown baseline {name!r} (known: {', '.join(BASELINES)})")
    return f"baseline:{name}"


def cmd_eval(args: argparse.Namespace) -> int:
    from lemon.data.errors import DataError
    from lemon.data.items import Benchmark
    from lemon.data.splits import split_items
    from lemon.evals.runner import EvalSettings, evaluate, print_progress
    from lemon.profiles import build_backends, close_backends, resolve_profile
    from lemon.spec.models import Capacity

    try:
        benchmark = Benchmark(args.benchmark)
    except ValueError:
        known = ", ".join(b.value for b in Benchmark)
        raise UsageError(f"unknown benchmark {args.benchmark!r} (known: {known})") from None
    method = _method(args)
    try:
        profile = resolve_profile(args.profile, files=args.profiles)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from None
    try:
        items = split_items(benchmark, split=args.split, directory=args.data_dir)
    except DataError as exc:
        raise UsageError(str(exc)) from None
    if args.stratified:
        from lemon.evals.selection import stratified

        items = stratified(items)
    items = items[args.offset : args.offset + args.limit if args.limit else None]
    if not items:
        raise UsageError("no items selected")
    if args.deadline <= 0:
        raise UsageError("--deadline must be positive")
    name = args.name or f"{benchmark.value}-{method.split(':', 1)[1].replace('/', '_')}"
    out_dir = Path(args.out) / name
    settings = EvalSettings(
        method=method,
        max_tokens=args.max_tokens,
        concurrency=args.concurrency,
        budget=args.budget,
        specs_only=args.specs_only,
        tier=Capacity(args.tier) if args.tier else None,
        deadline_s=args.deadline,
    )
    meta = {
        "run": name,
        "benchmark": benchmark.value,
        "profile": profile.name,
        "split": args.split,
        "offset": args.offset,
        "limit": args.limit,
        **({"stratified": True} if args.stratified else {}),
    }

    policy = None
    if args.policy:
        from lemon.run_cli import open_policy

        policy = open_policy(args)
        meta["policy"] = policy.label

    async def go() -> dict[str, Any]:
        backends = {} if args.specs_only else build_backends(profile)
        if backends:
            meta["models"] = {tier.value: b.model_id for tier, b in backends.items()}
        try:
            return await evaluate(
                items,
                settings=settings,
                backends=backends,
                out_dir=out_dir,
                meta=meta,
                progress=None if args.quiet else print_progress,
                policy=policy,
            )
        finally:
            await close_backends(backends)
            if policy is not None:
                await policy.aclose()

    summary = asyncio.run(go())
    if args.json:
        print(json.dumps(summary))
    else:
        lo, hi = summary["ci95"]
        print(
            f"{name}: accuracy {summary['accuracy']:.3f} [{lo:.3f}, {hi:.3f}] on {summary['n']} "
            f"items, {summary['mean_tokens']:.0f} worker tokens per item -> {out_dir}"
        )
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from lemon.evals.report import load_summaries, markdown_table, plot

    try:
        summaries = load_summaries(args.runs)
    except (OSError, ValueError, KeyError) as exc:
        print(f"lemon report: {exc}", file=sys.stderr)
        return EXIT_INVALID
    table = markdown_table(summaries)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table + "\n", encoding="utf-8")
    if args.png:
        plot(summaries, args.png)
        print(f"wrote {args.png}", file=sys.stderr)
    return EXIT_OK


def register(sub: Any) -> None:
    p = sub.add_parser("eval", help="run a method on a benchmark, score it, write results")
    p.add_argument("--benchmark", required=True)
    p.add_argument("--limit", type=int, default=0, help="first N items (0: all)")
    p.add_argument("--offset", type=int, default=0)
    p.add_argument(
        "--stratified",
        action="store_true",
        help="interleave the items across subjects (MMLU) before --offset and --limit",
    )
    p.add_argument(
        "--tier",
        choices=["small", "medium", "large"],
        default=None,
        help="run every agent on this capacity tier (e.g. one agent per tier)",
    )
    p.add_argument(
        "--split",
        choices=["test", "all", "train"],
        default="test",
        help="test (default): reported items only, never the held-in training partition; "
        "all: the whole published file, in file order",
    )
    p.add_argument("--spec", metavar="PATH", help="run this spec on every item")
    p.add_argument(
        "--baseline",
        metavar="NAME",
        help="single, sc3, sc5, sc-budget, chain, star, tree, debate, template (default)",
    )
    from lemon.run_cli import add_policy_options

    add_policy_options(p)
    p.add_argument(
        "--specs-only",
        action="store_true",
        help="with --policy: only write and validate each item's spec (no workers run)",
    )
    p.add_argument("--profile", default="embedded")
    p.add_argument("--profiles", action="append", default=[], metavar="FILE")
    p.add_argument(
        "--data-dir",
        default=None,
        help="default: $LEMON_DATA_DIR if set, else the copy shipped with lemon",
    )
    p.add_argument("--out", default="runs", help="runs folder (default: runs/)")
    p.add_argument("--name", default=None, help="run name (default: BENCHMARK-METHOD)")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--concurrency", type=int, default=4, help="items in flight")
    p.add_argument("--budget", type=int, default=2000, help="tokens per item for sc-budget")
    p.add_argument(
        "--deadline",
        type=float,
        default=900.0,
        help="seconds one item's run may take, waiting included (default 900)",
    )
    p.add_argument("--json", action="store_true")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=cmd_eval)

    p = sub.add_parser("report", help="compare eval runs: markdown table and accuracy/tokens PNG")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run directories or summary files")
    p.add_argument("--png", metavar="PATH")
    p.add_argument("--markdown", metavar="PATH")
    p.set_defaults(handler=cmd_report)
