"""A table's ``summary.json`` and its checks: per team coverage, accuracy and cost.

``summary.json`` holds ``benchmark``, ``split``, ``n_items``, ``teams`` (per team: items
covered, accuracy with its Wilson interval, mean worker tokens and tier-priced cost, the
spec), ``models`` (per tier: model, label, the identity that keys its calls), ``tier_prices``,
``calls`` (distinct worker calls stored) and ``builds`` (the commands that made it).
:func:`verify` checks that the files agree with each other: every cell's item is in the
table, every call a cell names is stored, every cell's tokens add up to its calls'.
"""

from __future__ import annotations

from typing import Any

from lemon import atomic
from lemon.tables.store import Table

__all__ = ["summarize", "verify", "write_summary"]


def summarize(table: Table) -> dict[str, Any]:
    from lemon.scoring.stats import wilson_interval

    meta = table.meta
    teams: dict[str, Any] = {}
    for team, info in meta.teams.items():
        cells = [c for i in meta.items if (c := table.cell(i, team)) is not None]
        n = len(cells)
        correct = sum(c.success >= 1.0 for c in cells)
        teams[team] = {
            **info,
            "n": n,
            "complete": n == len(meta.items),
            "correct": correct,
            "accuracy": round(correct / n, 4) if n else None,
            "ci95": [round(x, 4) for x in wilson_interval(correct, n)] if n else None,
            "mean_worker_tokens": round(sum(c.worker_tokens for c in cells) / n, 1) if n else None,
            "mean_priced": round(sum(c.priced_tokens for c in cells) / n, 2) if n else None,
            "failed_runs": sum(c.status != "succeeded" for c in cells),
        }
    return {
        "benchmark": meta.benchmark,
        "split": meta.split,
        "n_items": len(meta.items),
        "selection": meta.selection,
        "teams": teams,
        "models": {tier: m.model_dump() for tier, m in meta.models.items()},
        "profile": meta.profile,
        "tier_prices": meta.tier_prices,
        "worker_max_tokens": meta.worker_max_tokens,
        "cells": len(table.cells),
        "calls": len(table.calls),
        "builds": meta.builds,
    }


def write_summary(table: Table) -> dict[str, Any]:
    summary = summarize(table)
    atomic.write_json(table.path / "summary.json", summary, indent=1)
    return summary


def verify(table: Table) -> list[str]:
    """Every inconsistency between the table's files, one message each (empty: consistent)."""
    problems: list[str] = []
    items = set(table.meta.items)
    for (item, team), cell in table.cells.items():
        where = f"{table.path}/cells.jsonl: {item} {team}"
        if item not in items:
            problems.append(f"{where}: item not in table.json")
        if team not in table.meta.teams:
            problems.append(f"{where}: team not in table.json")
        for name, tier, key, prompt, completion in cell.agents:
            if key is None:
                continue
            call = table.calls.get(key)
            if call is None:
                problems.append(f"{where}: agent {name}'s call {key[:12]} is not in calls.jsonl")
                continue
            if call.tier != tier:
                problems.append(f"{where}: agent {name} on {tier} reads a {call.tier} call")
            if (call.prompt_tokens, call.completion_tokens) != (prompt, completion):
                problems.append(f"{where}: agent {name}'s tokens differ from its call's")
        spent = sum(a[3] + a[4] for a in cell.agents)
        if spent != cell.worker_tokens:
            problems.append(f"{where}: tokens {cell.worker_tokens} != agents' {spent}")
        if not 0.0 <= cell.success <= 1.0:
            problems.append(f"{where}: success {cell.success} outside [0, 1]")
    if table.torn:
        problems += [f"{where}: torn line (an interrupted build)" for where in table.torn]
    return problems
