"""``lemon report RUN...``: compare eval runs as a markdown table (Pareto front marked) and an
accuracy-vs-cost plot (``--png``, needs the ``report`` extra); cost is tier-priced worker tokens
(``--cost priced``, the default) or raw tokens (``--cost tokens``).

``lemon report TABLE`` (an outcome table's directory, :mod:`lemon.tables`): every routing
baseline on the table's items (:mod:`lemon.evals.table_report`), with routers trained on
``--train`` (default: the sibling table of the same benchmark's train split) and any
``--policy-run`` eval directories compared at their full cost; ``--json`` prints one object.

``lemon report --mix DIR`` (a directory of outcome tables, e.g. ``tables/``): the mixed
workload's report over every ``<benchmark>-test`` table with a ``-train`` beside it
(:mod:`lemon.evals.mixed`): per benchmark and for the mix, the fixed teams, the max expert, the
kind router, the text routers, the cascade, the self- and replicated oracles, beta and the
headroom with its paired interval. ``--out DIR`` writes ``report.json``, ``report.md`` and
``report.png`` there, with the tables it read and their hashes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from lemon.cli.options import EXIT_INVALID, EXIT_OK, EXIT_USAGE

__all__ = ["register", "run"]


def _train_table(test: Path, given: str | None) -> Path | None:
    if given:
        return Path(given)
    if not test.name.endswith("-test"):
        return None
    sibling = test.with_name(test.name.removesuffix("-test") + "-train")
    return sibling if (sibling / "table.json").is_file() else None


def _table(args: argparse.Namespace) -> int:
    import json

    from lemon.evals.table_report import markdown, plot, table_report
    from lemon.tables.store import Table, TableError

    test_path = Path(args.runs[0])
    try:
        test = Table.open(test_path)
        train_path = _train_table(test_path, args.train)
        train = Table.open(train_path) if train_path is not None else None
        report = table_report(
            test,
            train=train,
            teams=[t for t in (args.teams or "").split(",") if t] or None,
            policies=[Path(p) for p in args.policy_run or []],
            cheap_team=args.cheap_team,
        )
    except (OSError, ValueError, KeyError, TableError) as exc:
        print(f"lemon report: {exc}", file=sys.stderr)
        return EXIT_INVALID
    text = markdown(report)
    if args.json:
        print(json.dumps(report))
    else:
        print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n", encoding="utf-8")
    if args.png:
        plot(report, args.png)
        print(f"wrote {args.png}", file=sys.stderr)
    return EXIT_OK


def _policy_evals(
    given: list[str], benchmarks: list[str]
) -> tuple[dict[str, dict[str, list[dict[str, Any]]]], list[Path]]:
    """``NAME=DIR`` options: DIR holds one ``lemon eval`` run per benchmark
    (``DIR/<benchmark>/items.jsonl``, as ``lemon eval --out DIR --name <benchmark>`` writes)."""
    import json

    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    files: list[Path] = []
    for option in given:
        name, sep, directory = option.partition("=")
        if not sep or not name or not directory:
            raise ValueError(f"--policy {option!r}: expected NAME=DIR")
        if name in out:
            raise ValueError(f"--policy {name} is given twice")
        found: dict[str, list[dict[str, Any]]] = {}
        for bench in benchmarks:
            path = Path(directory) / bench / "items.jsonl"
            if not path.is_file():
                continue
            lines = path.read_text(encoding="utf-8").splitlines()
            found[bench] = []
            for number, line in enumerate(lines, 1):
                try:
                    found[bench].append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{number}: not JSON ({exc.msg})") from exc
            files.append(path)
        if not found:
            raise ValueError(
                f"--policy {option}: no <benchmark>/items.jsonl under {directory} for "
                f"{', '.join(benchmarks)}"
            )
        out[name] = found
    return out, files


def _mix(args: argparse.Namespace) -> int:
    import hashlib
    import json

    from lemon.evals import mixed
    from lemon.tables.store import Table, TableError

    if args.runs:
        print("lemon report: --mix takes no RUN arguments", file=sys.stderr)
        return EXIT_USAGE
    named = [b for b in (args.benchmarks or "").split(",") if b]
    skipped: dict[str, str] = {}
    try:
        pairs = mixed.discover(args.mix, named)
        benches = []
        for train, test in pairs:
            try:
                bench = mixed.load_bench(
                    Table.open(train), Table.open(test), validation=args.validation
                )
                why = None if named else mixed.ready(bench)
            except ValueError as exc:  # a table with no complete team yet
                if named:
                    raise
                why = str(exc)
            if why is None:
                benches.append(bench)
            else:
                skipped[Path(test).name.removesuffix("-test")] = why
        if not benches:
            raise ValueError(f"{args.mix}: no benchmark is complete yet ({skipped})")
        policies, policy_files = _policy_evals(args.policy or [], [b.name for b in benches])
        report = mixed.mixed_report(benches, policies=policies)
        pairs = [(str(b.train.table.path), str(b.test.table.path)) for b in benches]
    except (OSError, ValueError, KeyError, TableError) as exc:
        print(f"lemon report: {exc}", file=sys.stderr)
        return EXIT_INVALID
    report["skipped"] = skipped
    if args.validation:
        report["part"] = "validation"
    report["inputs"] = {
        str(Path(d) / name): hashlib.sha256((Path(d) / name).read_bytes()).hexdigest()
        for pair in pairs
        for d in pair
        for name in ("table.json", "cells.jsonl")
    } | {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in policy_files}
    report["command"] = (
        "lemon report --mix "
        + args.mix
        + (f" --benchmarks {args.benchmarks}" if args.benchmarks else "")
        + (" --validation" if args.validation else "")
        + "".join(f" --policy {p}" for p in args.policy or [])
    )
    text = mixed.markdown(report)
    print(json.dumps(report) if args.json else text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        (out / "report.md").write_text(text + "\n", encoding="utf-8")
        mixed.plot(report, str(out / "report.png"))
        print(f"wrote {out}/report.json, report.md, report.png", file=sys.stderr)
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    from lemon.evals.report import load_summaries, markdown_table, oracle_summary, plot

    if args.mix:
        return _mix(args)
    if args.validation:
        print("lemon report: --validation needs --mix DIR", file=sys.stderr)
        return EXIT_USAGE
    if not args.runs:
        print("lemon report: give RUN directories, a TABLE, or --mix DIR", file=sys.stderr)
        return EXIT_USAGE
    if len(args.runs) == 1 and (Path(args.runs[0]) / "table.json").is_file():
        return _table(args)

    try:
        summaries = load_summaries(args.runs)
        for group in args.oracle or []:
            summaries.append(oracle_summary([p for p in group.split(",") if p]))
    except (OSError, ValueError, KeyError) as exc:
        print(f"lemon report: {exc}", file=sys.stderr)
        return EXIT_INVALID
    table = markdown_table(summaries, args.cost)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table + "\n", encoding="utf-8")
    if args.png:
        plot(summaries, args.png, args.cost)
        print(f"wrote {args.png}", file=sys.stderr)
    return EXIT_OK


def register(sub: Any) -> None:
    p = sub.add_parser(
        "report", help="compare eval runs: markdown table and accuracy against cost PNG"
    )
    p.add_argument("runs", nargs="*", metavar="RUN", help="run directories or summary files")
    p.add_argument(
        "--mix",
        metavar="DIR",
        help="the mixed workload's report over the outcome tables in DIR (<benchmark>-train/-test)",
    )
    p.add_argument("--benchmarks", metavar="B,B,...", help="--mix: only these benchmarks, in order")
    p.add_argument(
        "--validation",
        action="store_true",
        help="--mix: on the train tables' validation parts (by template or sibling), every "
        "choice made on their fit parts: where policy versions are compared and chosen",
    )
    p.add_argument("--out", metavar="DIR", help="--mix: write report.json, report.md, report.png")
    p.add_argument(
        "--policy",
        action="append",
        metavar="NAME=DIR",
        help="--mix: add a policy's lemon eval runs, DIR/<benchmark>/items.jsonl (repeatable)",
    )
    p.add_argument(
        "--oracle",
        action="append",
        metavar="RUN,RUN[,...]",
        help="add the per-item best of these runs (same items) as an upper bound, kept off the "
        "Pareto front (repeatable)",
    )
    p.add_argument("--png", metavar="PATH")
    p.add_argument("--markdown", metavar="PATH")
    p.add_argument("--json", action="store_true", help="TABLE: print the report as one JSON object")
    p.add_argument("--train", metavar="TABLE", help="TABLE: the train table the routers learn from")
    p.add_argument("--teams", metavar="T,T,...", help="TABLE: the fixed teams compared")
    p.add_argument(
        "--policy-run",
        action="append",
        metavar="RUN",
        help="TABLE: a lemon eval run over the table's items, compared at its full cost",
    )
    p.add_argument(
        "--cheap-team",
        default=None,
        help="TABLE: the routing tests' cheap team (default single-medium)",
    )
    p.add_argument(
        "--cost",
        choices=["priced", "tokens"],
        default="priced",
        help="x axis and Pareto fronts: tier-priced worker tokens (default) or raw tokens",
    )
    p.set_defaults(handler=run)
