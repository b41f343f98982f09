"""``lemon table build|show|verify|teams``: outcome tables (:mod:`lemon.tables`).

``build DIR --benchmark B --split S --limit N --teams T,T,...`` creates the table or extends
it (more items: a larger ``--limit``; more teams: new names) and runs every missing cell;
``show`` prints per team coverage, accuracy and cost; ``verify`` checks the files agree;
``teams`` lists the candidate teams.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lemon.budget import WORKER_MAX_TOKENS
from lemon.cli.options import (
    EXIT_INVALID,
    EXIT_OK,
    UsageError,
    add_call_cache_option,
    add_json_option,
    add_profile_options,
    open_call_cache,
    resolve_profile_option,
)

__all__ = ["register", "run"]


def _commit() -> str:
    try:
        here = Path(__file__).resolve().parent
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=here,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", "src"],
            cwd=here,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        return head + ("+changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _open_or_create(args: argparse.Namespace, identities: dict[str, Any]) -> Any:
    from lemon.pricing import resolve_prices
    from lemon.tables.build import selection_note, table_items
    from lemon.tables.store import Table, TableError, TableMeta, TableMismatch

    path = Path(args.dir)
    items = table_items(args.benchmark, args.split, limit=args.limit or None, seed=args.seed)
    if not items:
        raise UsageError("no items selected")
    profile = resolve_profile_option(args)
    if (path / "table.json").exists():
        try:
            table = Table.open(path)
        except TableError as exc:
            raise UsageError(str(exc)) from None
        meta = table.meta
        if (meta.benchmark, meta.split) != (args.benchmark, args.split):
            raise TableMismatch(
                f"{path}: the table is {meta.benchmark}/{meta.split}, not "
                f"{args.benchmark}/{args.split}"
            )
        if meta.worker_max_tokens != args.max_tokens:
            raise TableMismatch(
                f"{path}: built with --max-tokens {meta.worker_max_tokens}, not {args.max_tokens}"
            )
        for tier, model in meta.models.items():
            now = identities.get(tier)
            if now is not None and now["identity"] != model.identity:
                raise TableMismatch(
                    f"{path}: tier {tier} was built on {model.identity}, this machine runs "
                    f"{now['identity']}: a table holds one set of models"
                )
        ids = [i.id for i in items]
        if ids[: len(meta.items)] != meta.items[: len(ids)]:
            raise TableMismatch(f"{path}: --seed/--split select other items than the table's")
        if len(ids) > len(meta.items):
            meta.items = ids
        return table, items
    from lemon.tables.store import TierModel

    meta = TableMeta(
        benchmark=args.benchmark,
        split=args.split,
        items=[i.id for i in items],
        worker_max_tokens=args.max_tokens,
        deadline_s=args.deadline,
        tier_prices=resolve_prices(profile=profile).to_json(),
        models={tier: TierModel(**value) for tier, value in identities.items()},
        profile=profile.name,
        selection=selection_note(args.seed),
    )
    return Table.create(path, meta), items


def _identities(backends: Any) -> dict[str, Any]:
    """Per tier: the model id, its label and the identity that keys its calls."""
    from lemon.backends.callcache import CachedBackend

    identities: dict[str, Any] = {}
    for tier, backend in backends.items():
        assert isinstance(backend, CachedBackend)
        identities[tier.value] = {
            "model": backend.model_id,
            "label": backend.label,
            "identity": backend.identity(),
        }
    return identities


def _record_build(
    table: Any, args: argparse.Namespace, stats: Any, *, teams: list[Any], items: int,
    started: float, cpu: float,
) -> None:  # fmt: skip
    """Append this build to ``table.json``'s ``builds``: the command, commit, times, counts."""
    table.meta.builds.append(
        {
            "command": " ".join(["lemon", "table", *sys.argv[2:]])
            if os.path.basename(sys.argv[0]) == "lemon"
            else " ".join(sys.argv),
            "commit": _commit(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "wall_s": round(time.time() - started, 1),
            "cpu_s": round(time.process_time() - cpu, 1),
            "teams": [t.name for t in teams],
            "items": items,
            "added": stats.added,
            "skipped": stats.skipped,
            "new_calls": stats.new_calls,
            "loadavg": [round(x, 2) for x in os.getloadavg()],
        }
    )
    table.save_meta()


def _build(args: argparse.Namespace) -> int:
    from lemon.backends.callcache import PersistentCallCache, wrap_backends
    from lemon.capacity import build_backends, close_backends
    from lemon.orchestration import ItemSettings
    from lemon.policy.columns import columns
    from lemon.pricing import TierPrices
    from lemon.tables.build import build_table
    from lemon.tables.digest import write_summary

    try:
        teams = columns(t for t in args.teams.split(",") if t)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from None
    if not teams:
        raise UsageError("--teams names no team")
    cache = open_call_cache(args)
    if cache is None:  # the identities still need a fingerprint store
        cache = PersistentCallCache(Path(args.dir) / ".fingerprints.sqlite")
    backends = wrap_backends(build_backends(resolve_profile_option(args)), cache)
    identities = _identities(backends)
    table, items = _open_or_create(args, identities)
    for team in teams:
        table.meta.teams.setdefault(team.name, team.to_json())
    table.save_meta()
    started, cpu = time.time(), time.process_time()

    def progress(done: int, total: int) -> None:
        if not args.quiet:
            sys.stderr.write(f"\r{done}/{total} runs")
            sys.stderr.flush()

    async def go() -> Any:
        try:
            return await build_table(
                table, items, teams, backends=backends,
                settings=ItemSettings(worker_max_tokens=args.max_tokens, deadline_s=args.deadline),
                prices=TierPrices(**table.meta.tier_prices), concurrency=args.concurrency,
                chunk=args.chunk, progress=progress, stop_after_s=args.stop_after,
            )  # fmt: skip
        finally:
            await close_backends(backends)

    stats = asyncio.run(go())
    if not args.quiet:
        sys.stderr.write("\n")
    if stats.added or stats.skipped:  # a build that found nothing to do leaves no record
        _record_build(table, args, stats, teams=teams, items=len(items), started=started, cpu=cpu)
    summary = write_summary(table)
    for line in (stats.errors or [])[:20]:
        print(f"not recorded (run again next build): {line}", file=sys.stderr)
    out = {"added": stats.added, "skipped": stats.skipped, "new_calls": stats.new_calls}
    if args.json:
        print(json.dumps({**out, "summary": summary}))
    else:
        print(f"{args.dir}: {stats.added} cells added, {stats.skipped} not recorded")
        _print_teams(summary)
    return EXIT_OK


def _print_teams(summary: dict[str, Any]) -> None:
    n = summary["n_items"]
    print(f"{summary['benchmark']}/{summary['split']}: {n} items, {summary['calls']} calls")
    for name, team in summary["teams"].items():
        if not team["n"]:
            print(f"  {name:<22} no cells yet")
            continue
        lo, hi = team["ci95"]
        print(
            f"  {name:<22} {team['n']:>4}/{n}  accuracy {team['accuracy']:.3f} "
            f"[{lo:.3f}, {hi:.3f}]  priced {team['mean_priced']:.0f}"
        )


def _show(args: argparse.Namespace) -> int:
    from lemon.tables.digest import summarize
    from lemon.tables.store import Table, TableError

    try:
        table = Table.open(args.dir)
    except TableError as exc:
        raise UsageError(str(exc)) from None
    summary = summarize(table)
    if args.json:
        print(json.dumps(summary))
    else:
        _print_teams(summary)
    return EXIT_OK


def _verify(args: argparse.Namespace) -> int:
    from lemon.tables.digest import summarize, verify
    from lemon.tables.store import Table, TableError

    try:
        table = Table.open(args.dir)
    except TableError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_INVALID
    problems = verify(table)
    shipped = Path(args.dir) / "summary.json"
    if shipped.is_file():
        stored = json.loads(shipped.read_text(encoding="utf-8"))
        fresh = json.loads(json.dumps(summarize(table)))
        if stored != fresh:
            problems.append(f"{shipped}: stale (lemon table show --json differs); rebuild it")
    for problem in problems:
        print(problem)
    if not args.quiet:
        print(
            f"{args.dir}: {len(table.cells)} cells, {len(table.calls)} calls, "
            f"{len(problems)} problem(s)",
            file=sys.stderr,
        )
    return EXIT_INVALID if problems else EXIT_OK


def _teams(args: argparse.Namespace) -> int:
    from lemon.policy.columns import COLUMNS

    if args.json:
        print(json.dumps({n: c.to_json() for n, c in COLUMNS.items()}))
    else:
        for name, col in COLUMNS.items():
            kinds = ",".join(k.value for k in col.kinds)
            print(f"{name:<22} {col.description} [{kinds}]")
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    from lemon.tables.store import TableMismatch

    if args.action in ("build", "show", "verify") and not args.dir:
        raise UsageError(f"table {args.action} needs DIR")
    try:
        if args.action == "build":
            if not args.benchmark or not args.teams:
                raise UsageError("table build needs --benchmark and --teams")
            return _build(args)
    except TableMismatch as exc:
        raise UsageError(str(exc)) from None
    if args.action == "show":
        return _show(args)
    if args.action == "verify":
        return _verify(args)
    return _teams(args)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "table",
        help="build, extend, inspect and verify outcome tables",
        description="An outcome table holds every candidate team's outcome on every item of a "
        "benchmark split, and every worker call behind them (lemon.tables).",
    )
    p.add_argument("action", choices=["build", "show", "verify", "teams"])
    p.add_argument("dir", nargs="?", default=None, metavar="DIR")
    p.add_argument("--benchmark", default=None)
    p.add_argument("--split", choices=["train", "test"], default="test")
    p.add_argument("--limit", type=int, default=0, help="first N items of the split (0: all)")
    p.add_argument("--seed", type=int, default=0, help="item order (default 0)")
    p.add_argument("--teams", default="", help="comma-separated team names (lemon table teams)")
    p.add_argument(
        "--max-tokens",
        type=int,
        default=WORKER_MAX_TOKENS,
        help=f"tokens per agent (default {WORKER_MAX_TOKENS})",
    )
    p.add_argument("--deadline", type=float, default=3600.0, help="seconds per run")
    p.add_argument("--concurrency", type=int, default=16, help="runs in flight (default 16)")
    p.add_argument("--chunk", type=int, default=50, help="items per piece (default 50)")
    p.add_argument(
        "--stop-after", type=float, default=None, help="start no new run after S seconds"
    )
    add_profile_options(p)
    add_call_cache_option(p)
    add_json_option(p)
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(handler=run)
