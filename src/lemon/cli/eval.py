"""``lemon eval``: run a method (a baseline, a fixed spec or a learned policy) over benchmark
items, score it and write a resumable run directory (``items.jsonl``, ``summary.json``)."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lemon.budget import WORKER_MAX_TOKENS
from lemon.cli.options import (
    EXIT_OK,
    UsageError,
    add_call_cache_option,
    add_item_options,
    add_json_option,
    add_part_option,
    add_policy_options,
    add_profile_options,
    open_call_cache,
    open_policy,
    resolve_profile_option,
    select_items,
)

if TYPE_CHECKING:
    from lemon.policy.inference import PolicyEngine

__all__ = ["register", "run"]


def _method(args: argparse.Namespace) -> str:
    from lemon.evals.baselines import BASELINES

    chosen = [x for x in (args.spec, args.baseline, args.policy) if x]
    if len(chosen) > 1:
        raise UsageError("give at most one of --spec, --baseline, --policy")
    if args.specs_only and not args.policy:
        raise UsageError("--specs-only needs --policy (it checks the specs a policy writes)")
    if args.policy_constrained and not args.policy:
        raise UsageError("--policy-constrained needs --policy")
    if args.part != "all" and not args.table:
        raise UsageError("--part needs --table (a train table's fit or validation part)")
    if args.policy_columns and not (args.policy and args.table):
        raise UsageError("--policy-columns needs --policy and --table")
    if args.policy_columns and args.policy_constrained:
        raise UsageError("give one of --policy-columns and --policy-constrained")
    if args.policy:
        return f"policy:{args.policy}"
    if args.spec:
        from lemon.spec.issues import SpecError
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


def _table(args: argparse.Namespace) -> Any:
    """The outcome table ``--table`` names (None without it), checked against the options."""
    if not args.table:
        return None
    from lemon.tables.store import Table, TableError

    try:
        table = Table.open(args.table)
    except TableError as exc:
        raise UsageError(str(exc)) from None
    if args.benchmark and args.benchmark != table.meta.benchmark:
        raise UsageError(f"--table {args.table} holds {table.meta.benchmark}, not {args.benchmark}")
    if args.max_tokens != table.meta.worker_max_tokens:
        raise UsageError(
            f"--table {args.table} was built with {table.meta.worker_max_tokens} tokens per agent: "
            f"give --max-tokens {table.meta.worker_max_tokens} (other budgets ask other questions)"
        )
    return table


def _table_items(args: argparse.Namespace, table: Any) -> list[Any]:
    """The table's items in ``--part``, in its order (``--offset``/``--limit`` select a range)."""
    from lemon.data import Benchmark
    from lemon.scoring import item_index
    from lemon.tables.store import TableError

    try:
        part = table.part(args.part)
    except TableError as exc:
        raise UsageError(f"--part: {exc}") from None
    index = item_index(Benchmark(table.meta.benchmark))
    ids = part[args.offset : args.offset + args.limit if args.limit else None]
    if not ids:
        raise UsageError("no items selected")
    return [index[i] for i in ids]


def _meta(
    args: argparse.Namespace, *, name: str, benchmark: str, profile: str, policy: Any
) -> dict[str, Any]:
    """What the run's summary records about how it was made."""
    meta: dict[str, Any] = {
        "run": name,
        "benchmark": benchmark,
        "profile": profile,
        "split": args.split,
        "offset": args.offset,
        "limit": args.limit,
        **({"stratified": True} if args.stratified else {}),
    }
    if policy is not None:
        meta["policy"] = policy.label
        meta["policy_constrained"] = bool(args.policy_constrained)
        if args.policy_columns:
            meta["policy_columns"] = args.policy_columns.split(",")
    return meta


def _column_choices(names: str, table: Any) -> dict[Any, tuple[str, ...]]:
    """Per task kind, the canonical spec texts of the named teams that apply to it (each a
    column of ``table``): what ``--policy-columns`` lets the policy choose among."""
    from lemon.policy.columns import column
    from lemon.policy.prompt import spec_completion
    from lemon.tasks import TaskKind

    teams = [name for name in names.split(",") if name]
    missing = [name for name in teams if name not in table.teams]
    if missing:
        raise UsageError(f"--policy-columns: {', '.join(missing)} not in the table's teams")
    try:
        cols = [column(name) for name in teams]
    except KeyError as exc:
        raise UsageError(f"--policy-columns: {exc.args[0]}") from None
    return {
        kind: tuple(spec_completion(c.spec(kind), c.output) for c in cols if c.applies_to(kind))
        for kind in TaskKind
    }


def run(args: argparse.Namespace) -> int:
    from lemon.backends.callcache import wrap_backends
    from lemon.capacity import build_backends, close_backends
    from lemon.evals.loop import EvalSettings, RunMismatch, evaluate, print_progress
    from lemon.pricing import policy_price, resolve_prices
    from lemon.spec.models import Capacity

    table = _table(args)
    items = _table_items(args, table) if table is not None else select_items(args)
    if table is None and not args.benchmark:
        raise UsageError("give --benchmark (or --table)")
    method = _method(args)
    if args.deadline <= 0:
        raise UsageError("--deadline must be positive")
    profile = resolve_profile_option(args)
    benchmark = items[0].benchmark
    name = args.name or f"{benchmark.value}-{method.split(':', 1)[1].replace('/', '_')}"
    out_dir = Path(args.out) / name
    # choosing among columns scores completions, which the transformers backend does
    engine: PolicyEngine | None = "transformers" if args.policy_columns else None
    policy = open_policy(args, engine=engine) if args.policy else None
    if policy is not None and args.policy_columns:
        policy.choices = _column_choices(args.policy_columns, table)
    prices = resolve_prices(profile=profile)
    settings = EvalSettings(
        prices=prices,
        policy_price=policy_price(getattr(policy, "model", None), prices=prices),
        method=method,
        max_tokens=args.max_tokens,
        concurrency=args.concurrency,
        budget=args.budget,
        specs_only=args.specs_only,
        tier=Capacity(args.tier) if args.tier else None,
        deadline_s=args.deadline,
    )
    meta = _meta(args, name=name, benchmark=benchmark.value, profile=profile.name, policy=policy)
    cache = None if args.specs_only else open_call_cache(args)

    async def go() -> dict[str, Any]:
        if table is not None and not args.specs_only:
            from lemon.tables.replay import table_backends

            backends, _ = table_backends(table)
            meta["table"] = str(table.path)
            if args.part != "all":
                meta["part"] = args.part
        else:
            backends = {} if args.specs_only else wrap_backends(build_backends(profile), cache)
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

    try:
        summary = asyncio.run(go())
    except RunMismatch as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(summary))
    else:
        lo, hi = summary["ci95"]
        policy_cost = summary["mean_policy_priced_tokens"]
        print(
            f"{name}: accuracy {summary['accuracy']:.3f} [{lo:.3f}, {hi:.3f}] on {summary['n']} "
            f"items, {summary['mean_tokens']:.0f} worker tokens per item "
            f"({summary['mean_priced_tokens']:.0f} tier-priced"
            + (f", {policy_cost:.0f} more for the policy's own" if policy_cost else "")
            + f") -> {out_dir}"
        )
    return EXIT_OK


def register(sub: Any) -> None:
    p = sub.add_parser("eval", help="run a method on a benchmark, score it, write results")
    add_item_options(
        p,
        benchmark_required=False,
        splits=("test", "all", "train"),
        split_help="test (default): reported items only, never the held-in training partition; "
        "all: the whole published file, in file order",
        stratified=True,
    )
    p.add_argument(
        "--tier",
        choices=["small", "medium", "large"],
        default=None,
        help="run every agent on this capacity tier (e.g. one agent per tier)",
    )
    p.add_argument(
        "--table",
        metavar="DIR",
        help="answer every worker call from this outcome table (no model runs; a call it lacks "
        "fails its agent as not_in_table) and take its items",
    )
    add_part_option(p, "; with --table, where versions are compared before a test table is read")
    p.add_argument(
        "--policy-columns",
        metavar="TEAM,TEAM",
        default="",
        help="with --policy and --table: the policy writes the one of these table teams' specs "
        "its model scores highest (log-probability of each as its answer), not free text",
    )
    p.add_argument("--spec", metavar="PATH", help="run this spec on every item")
    p.add_argument(
        "--baseline",
        metavar="NAME",
        help="single, sc3, sc5, sc-budget, chain, star, tree, debate, template (default)",
    )
    add_policy_options(p)
    p.add_argument(
        "--specs-only",
        action="store_true",
        help="with --policy: only write and validate each item's spec (no workers run)",
    )
    add_profile_options(p)
    p.add_argument("--out", default="runs", help="runs folder (default: runs/)")
    p.add_argument("--name", default=None, help="run name (default: BENCHMARK-METHOD)")
    p.add_argument(
        "--max-tokens",
        type=int,
        default=WORKER_MAX_TOKENS,
        help=f"per agent (default {WORKER_MAX_TOKENS}, the outcome tables' budget)",
    )
    p.add_argument("--concurrency", type=int, default=4, help="items in flight")
    p.add_argument("--budget", type=int, default=2000, help="tokens per item for sc-budget")
    p.add_argument(
        "--deadline",
        type=float,
        default=900.0,
        help="seconds one item's run may take, waiting included (default 900)",
    )
    add_call_cache_option(p)
    add_json_option(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=run)
