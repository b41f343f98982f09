"""``lemon teacher search|llm``: write SFT rows for the policy (see :mod:`lemon.teaching`);
``lemon teacher summary``: what a search's rows say about the teams it tried."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from lemon.cli.options import (
    EXIT_OK,
    UsageError,
    add_call_cache_option,
    add_item_options,
    add_json_option,
    add_part_option,
    add_profile_options,
    open_call_cache,
    resolve_profile_option,
    select_items,
)

__all__ = ["register"]


def _progress(quiet: bool) -> Callable[[int, int], None] | None:
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


def run_search(args: argparse.Namespace) -> int:
    from lemon.backends.callcache import wrap_backends
    from lemon.capacity import build_backends, close_backends
    from lemon.pricing import profile_prices
    from lemon.teaching import SearchSettings, search_teacher

    if args.candidates < 1 or args.max_tokens < 1 or args.concurrency < 1:
        raise UsageError("--candidates, --max-tokens and --concurrency must be at least 1")
    profile = resolve_profile_option(args)
    items = select_items(args)
    settings = SearchSettings(
        candidates=args.candidates,
        max_tokens=args.max_tokens,
        concurrency=args.concurrency,
        prices=profile_prices(profile),
    )
    cache = open_call_cache(args)

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


def run_llm(args: argparse.Namespace) -> int:
    from lemon.backends.openai import OpenAIBackend
    from lemon.teaching import llm_teacher

    items = select_items(args)
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
    add_item_options(p, splits=("train", "test", "all"))
    p.add_argument("--out", required=True, help="SFT rows (JSONL), appended; resumable")
    add_json_option(p, help_text="print one JSON summary")
    p.add_argument("-q", "--quiet", action="store_true")


def run_summary(args: argparse.Namespace) -> int:
    from lemon.jsonl import read_records
    from lemon.teaching.summary import summarize_search

    if not args.rows.is_file():
        raise UsageError(f"{args.rows}: no such file")
    try:
        summary = summarize_search(read_records(args.rows).values())
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{args.rows}: {exc}") from None
    if args.json:
        print(json.dumps(summary.to_json()))
        return EXIT_OK
    print(f"{summary.items} items; best candidate succeeds on {summary.best_accuracy:.0%}, "
          f"the chosen one on {summary.chosen_accuracy:.0%}; template chosen "
          f"{summary.template_chosen} times")  # fmt: skip
    if summary.chosen_over_template is not None:
        print(f"chosen reward - template reward: {summary.chosen_over_template:+.4f} (mean)")
    print(f"{'candidate':<40} {'items':>5} {'acc':>6} {'reward':>8} {'tokens':>8} "
          f"{'priced':>8} {'chosen':>6}")  # fmt: skip
    for c in summary.candidates:
        print(f"{c.origin:<40} {c.items:>5} {c.accuracy:>6.2f} {c.mean_reward:>8.4f} "
              f"{c.mean_tokens:>8.1f} {c.mean_priced_tokens:>8.1f} {c.chosen:>6}")  # fmt: skip
    return EXIT_OK


def run_select(args: argparse.Namespace) -> int:
    """Keep the rows whose chosen team reached ``--min-success`` (default 1: solved). On an item
    where every team failed the teacher picks the cheapest team, which says nothing about which
    team pays; such rows outvote the informative ones in SFT."""
    from lemon.atomic import write_text
    from lemon.jsonl import JsonLineError, json_lines

    if not args.rows.is_file():
        raise UsageError(f"{args.rows}: no such file")
    if args.out.resolve() == args.rows.resolve():
        raise UsageError(f"--out {args.out} would overwrite the rows it reads")
    if args.max_repeat < 1:
        raise UsageError("--max-repeat must be at least 1")
    kept: list[tuple[str, str]] = []
    total = 0

    def torn(where: str) -> None:  # the search stopped mid-row; a rerun finishes it
        print(f"{where}: skipped a half-written last row", file=sys.stderr)

    try:
        for where, line, row in json_lines(args.rows, on_torn_tail=torn):
            try:
                success = float(row["provenance"]["success"])
            except (KeyError, TypeError, ValueError):
                raise UsageError(
                    f"{where}: no provenance.success (not a search teacher's row)"
                ) from None
            total += 1
            if success >= args.min_success:
                kept.append((str(row["provenance"].get("chosen", "")), line + "\n"))
    except JsonLineError as exc:
        raise UsageError(str(exc)) from None
    written = [line for _, line in kept]
    if args.balance:
        written = balanced(kept, max_repeat=args.max_repeat)
    write_text(args.out, "".join(written))
    print(f"kept {len(kept)} of {total} rows (chosen team's success >= {args.min_success:g})"
          + (f", {len(written)} after balancing" if args.balance else "")
          + f" -> {args.out}")  # fmt: skip
    return EXIT_OK


def balanced(rows: list[tuple[str, str]], *, max_repeat: int) -> list[str]:
    """Repeat each row ``round(most / count)`` times (at most ``max_repeat``), ``count`` being
    how many rows chose its team and ``most`` the most frequent team's count, so a minority
    choice (one large agent where only it succeeds) is not outvoted in SFT by the majority
    (one medium agent); order kept, each row's copies together."""
    counts: dict[str, int] = {}
    for team, _ in rows:
        counts[team] = counts.get(team, 0) + 1
    most = max(counts.values(), default=0)
    return [
        line
        for team, line in rows
        for _ in range(min(max_repeat, max(1, round(most / counts[team]))))
    ]


def _token_counter() -> tuple[Any, str]:
    """The packaged policy's own token count of a prompt and completion (transformers), else
    an estimate; and which it is."""
    from lemon.teaching.from_tables import estimate_tokens

    try:
        from transformers import AutoTokenizer

        from lemon.backends.converting import converted_packaged_model

        tokenizer = AutoTokenizer.from_pretrained(str(converted_packaged_model("bfloat16")))
    except (ImportError, OSError):
        return estimate_tokens, "estimated (about 4 characters a token: transformers missing)"

    def count(messages: list[dict[str, str]], completion: str) -> int:
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(prompt, Mapping):  # transformers >= 5 returns a BatchEncoding (a UserDict)
            prompt = prompt["input_ids"]
        return len(prompt) + len(tokenizer(completion, add_special_tokens=False)["input_ids"]) + 1

    return count, "the packaged SmolLM2-135M-Instruct tokenizer and chat template"


def run_tables(args: argparse.Namespace) -> int:
    """Rows from outcome tables: per item the best team by R_orch at full cost."""
    import json

    from lemon.atomic import write_text
    from lemon.pricing import policy_price
    from lemon.reward import RewardConfig
    from lemon.tables.store import Table, TableError
    from lemon.teaching.from_tables import (
        TableTeacher,
        router_teacher_rows,
        table_teacher_rows,
        weighted_copies,
    )

    if args.max_repeat < 1:
        raise UsageError("--max-repeat must be at least 1")
    weights = _cost_weights(args.cost_weights)
    if weights and args.prompt_format != "lemon-policy-prompt/v3":
        raise UsageError("--cost-weights needs --prompt-format lemon-policy-prompt/v3")
    count, how = _token_counter()
    rewards = RewardConfig(
        token_cost=args.token_cost, agent_cost=args.agent_cost, edge_cost=args.edge_cost
    )
    result, n_items = TableTeacher(), 0
    parts: list[tuple[Table, list[str]]] = []
    for path in args.table:
        try:
            table = Table.open(path)
        except TableError as exc:
            raise UsageError(str(exc)) from None
        try:
            part = table.part(args.part)
        except TableError as exc:
            raise UsageError(f"--part: {exc}") from None
        items = part[args.offset : args.offset + args.limit if args.limit else None]
        n_items += len(items)
        if args.router:
            parts.append((table, items))
            continue
        table_teacher_rows(
            table,
            teams=[t for t in (args.teams or "").split(",") if t] or None,
            rewards=rewards,
            prompt_format=args.prompt_format,
            count_tokens=count,
            policy_price=policy_price(None),
            min_success=args.min_success,
            items=items,
            cost_sensitive=args.cost_sensitive,
            cost_weights=weights,
            out=result,
        )
    if args.router:
        if args.folds < 2:
            raise UsageError("--folds must be at least 2")
        result = router_teacher_rows(
            parts,
            router=args.router,
            teams=[t for t in (args.teams or "").split(",") if t] or None,
            rewards=rewards,
            prompt_format=args.prompt_format,
            count_tokens=count,
            policy_price=policy_price(None),
            cost_weights=weights,
            folds=args.folds,
        )
    if args.shuffle is not None and args.cost_sensitive:  # each item taught another's weights
        import random

        ids = list(dict.fromkeys(str(r["id"]) for r in result.rows))
        prompts = {str(r["id"]): r["prompt"] for r in result.rows}
        donors_of = dict(zip(ids, random.Random(args.shuffle).sample(ids, len(ids)), strict=True))
        # item A's weighted rows are written under item B's prompt (and id, so the rows of one
        # prompt stay one item's)
        result.rows = [
            {**row, "id": donors_of[str(row["id"])], "prompt": prompts[donors_of[str(row["id"])]],
             "provenance": {**row["provenance"], "shuffled": True}}
            for row in result.rows
        ]  # fmt: skip
    elif args.shuffle is not None:  # the control: each item taught another item's team
        import random

        order = list(range(len(result.rows)))
        random.Random(args.shuffle).shuffle(order)
        donors = [result.rows[i] for i in order]
        result.rows = [
            {**row, "completion": donor["completion"],
             "provenance": {**row["provenance"], "chosen": donor["provenance"]["chosen"],
                            "shuffled": True}}
            for row, donor in zip(result.rows, donors, strict=True)
        ]  # fmt: skip
    lines = [(str(r["provenance"]["chosen"]), json.dumps(r, ensure_ascii=False) + "\n")
             for r in result.rows]  # fmt: skip
    if args.cost_sensitive:
        weights = [float(r["provenance"]["weight"]) for r in result.rows]
        copies = weighted_copies(weights, max_repeat=args.max_repeat)
        written = [line for (_, line), n in zip(lines, copies, strict=True) for _ in range(n)]
    elif args.balance:
        written = balanced(lines, max_repeat=args.max_repeat)
    else:
        written = [x for _, x in lines]
    write_text(args.out, "".join(written))
    chosen = ", ".join(f"{t} {n}" for t, n in sorted(result.chosen.items(), key=lambda x: -x[1]))
    print(
        f"{len(result.rows)} rows from {n_items} items ({result.dropped} "
        + ("without a cell for every team" if args.router else "where no team succeeded")
        + f" dropped); chosen: {chosen}"
        + (f"; {len(written)} after balancing" if args.balance else "")
        + (f"; {len(written)} rows of every team weighted by reward" if args.cost_sensitive else "")
        + f"; policy tokens: {how} -> {args.out}"
    )
    return EXIT_OK


def _cost_weights(text: str | None) -> list[float]:
    if not text:
        return []
    try:
        weights = [float(w) for w in text.split(",") if w.strip()]
    except ValueError:
        raise UsageError(f"--cost-weights: not a list of numbers: {text!r}") from None
    if any(w < 0 for w in weights):
        raise UsageError(f"--cost-weights: weights must be >= 0, got {text!r}")
    return weights


def _reward_defaults() -> dict[str, float]:
    from lemon.reward import RewardConfig

    config = RewardConfig()
    return {
        "token_cost": config.token_cost,
        "agent_cost": config.agent_cost,
        "edge_cost": config.edge_cost,
    }


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
    add_profile_options(s)
    add_call_cache_option(s)
    s.set_defaults(handler=run_search)
    _register_llm(teachers)
    _register_rows(teachers)
    _register_tables(teachers)


def _register_llm(teachers: Any) -> None:
    llm = teachers.add_parser("llm", help="few-shot an LLM behind an OpenAI-compatible URL")
    _common(llm)
    llm.add_argument("--endpoint", required=True, help="base URL, e.g. http://host:8000/v1")
    llm.add_argument("--model", required=True, help="served model name")
    llm.add_argument("--max-tokens", type=int, default=384)
    llm.add_argument("--concurrency", type=int, default=4)
    llm.set_defaults(handler=run_llm)


def _register_rows(teachers: Any) -> None:
    summary = teachers.add_parser(
        "summary", help="per candidate team: accuracy, cost, how often chosen; the upper bound"
    )
    summary.add_argument("rows", type=Path, help="a search teacher's SFT rows (JSONL)")
    add_json_option(summary)
    summary.set_defaults(handler=run_summary)
    select = teachers.add_parser(
        "select", help="keep the rows whose chosen team succeeded (SFT data with signal)"
    )
    select.add_argument("rows", type=Path, help="a search teacher's SFT rows (JSONL)")
    select.add_argument("--out", type=Path, required=True, help="the kept rows (JSONL), replaced")
    select.add_argument(
        "--min-success", type=float, default=1.0, help="least success of the chosen team (1)"
    )
    select.add_argument(
        "--balance",
        action="store_true",
        help="repeat rows of less often chosen teams so each team weighs about as much as the "
        "most chosen one",
    )
    select.add_argument(
        "--max-repeat", type=int, default=4, help="most copies of one row with --balance (4)"
    )
    select.set_defaults(handler=run_select)


def _register_tables(teachers: Any) -> None:
    tables = teachers.add_parser(
        "tables",
        help="rows from an outcome table: per item the team with the best R_orch at full cost",
    )
    tables.add_argument(
        "table", type=Path, nargs="+", help="outcome tables (lemon table); rows of all of them"
    )
    tables.add_argument("--out", type=Path, required=True, help="the rows (JSONL), replaced")
    tables.add_argument("--teams", default=None, help="candidate teams (default: the table's)")
    tables.add_argument(
        "--prompt-format",
        default="lemon-policy-prompt/v1",
        choices=["lemon-policy-prompt/v1", "lemon-policy-prompt/v2", "lemon-policy-prompt/v3"],
        help="the policy prompt the rows are written in (lemon.policy.prompt; v3 states the "
        "cost weight)",
    )
    tables.add_argument(
        "--cost-weights",
        metavar="W,W,...",
        help="v3: teach every item once per cost weight (R_orch's token_cost), the weight in "
        "the prompt",
    )
    add_part_option(tables, "")
    tables.add_argument(
        "--min-success", type=float, default=1.0, help="drop items whose best team scores less"
    )
    weigh = tables.add_mutually_exclusive_group()
    weigh.add_argument("--balance", action="store_true", help="repeat rows of rarer teams")
    weigh.add_argument(
        "--router",
        choices=["knn", "logistic"],
        help="distil a text router fitted on the tables (one per task kind, cross-fitted over "
        "--folds): per item and weight, the team it picks for the item",
    )
    weigh.add_argument(
        "--cost-sensitive",
        action="store_true",
        help="cost-sensitive SFT: a row per team of each item, repeated in proportion to its "
        "reward above the item's worst team's (at most --max-repeat copies)",
    )
    tables.add_argument(
        "--folds", type=int, default=5, help="with --router: cross-fitting folds (default 5)"
    )
    tables.add_argument(
        "--max-repeat", type=int, default=4, help="with --balance or --cost-sensitive (default 4)"
    )
    defaults = _reward_defaults()
    for name, help_text in (
        ("token-cost", "R_orch's cost per 1,000 tier-priced tokens"),
        ("agent-cost", "R_orch's cost per agent"),
        ("edge-cost", "R_orch's cost per depends_on edge"),
    ):
        key = name.replace("-", "_")
        tables.add_argument(
            f"--{name}", type=float, default=defaults[key], help=f"{help_text} ({defaults[key]})"
        )
    tables.add_argument(
        "--shuffle",
        type=int,
        default=None,
        metavar="SEED",
        help="the control: pair each item with another item's chosen team (a seeded shuffle)",
    )
    tables.add_argument("--limit", type=int, default=0, help="first N items of each table")
    tables.add_argument("--offset", type=int, default=0)
    tables.set_defaults(handler=run_tables)
