"""An evaluation as the web view shows it: one ``lemon eval`` run folder's items and summary,
and where the run sits among its siblings on cost and accuracy.

The **comparison** is every eval run folder beside it (same parent folder) on the same
benchmark: accuracy with its 95% Wilson interval against mean tier-priced worker tokens per
item (``lemon report``'s axes, :mod:`lemon.evals.report`), each point named by its run and
kind (fixed team, learned policy, router, oracle). The per-item best of the fixed teams that
share items (``lemon report --oracle``) is drawn as a bound, off the Pareto front.

Items are filtered and paged on the server, so a run of 1,000 items sends one page.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lemon.evals.report import cost_of, load_summaries, oracle_summary, pareto_front
from lemon.jsonl import read_records

__all__ = ["ITEM_FILTERS", "evaluation_view", "method_kind"]

ITEM_FILTERS = ("all", "correct", "wrong", "failed")
PAGE = 50


def method_kind(method: str, *, bound: bool = False) -> str:
    """The kind of method a run used, in words (the plot's legend)."""
    if bound or method.startswith("oracle"):
        return "oracle (bound)"
    if method.startswith("policy:"):
        return "learned policy"
    if "router" in method or method.startswith(("knn", "logistic", "cascade")):
        return "router"
    if method.startswith(("baseline:", "spec:")):
        return "fixed team"
    return "other"


def _summary(folder: Path) -> dict[str, Any]:
    (summary,) = load_summaries([folder])
    return summary


def _item_matches(record: dict[str, Any], flt: str, query: str) -> bool:
    failed = record.get("status") not in ("succeeded", "spec_only")
    if flt == "correct" and not record.get("correct"):
        return False
    if flt == "wrong" and (record.get("correct") or failed):
        return False
    if flt == "failed" and not failed:
        return False
    if query:
        needle = query.lower()
        return (
            needle in str(record.get("id", "")).lower()
            or needle in str(record.get("answer") or "").lower()
        )
    return True


def _item(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(record.get("id", "")),
        "correct": bool(record.get("correct")),
        "status": str(record.get("status", "")),
        "answer": record.get("answer"),
        "extracted": record.get("extracted"),
        "tokens": record.get("tokens", 0),
        "priced_tokens": record.get("priced_tokens", record.get("tokens", 0)),
        "full_cost": record.get("full_cost"),
        "calls": record.get("calls", 0),
        "wall_s": record.get("wall_s", 0.0),
        "error": record.get("error"),
        "spec": record.get("spec", ""),
    }


def _point(summary: dict[str, Any], *, folder: str, current: bool) -> dict[str, Any]:
    lo, hi = summary.get("ci95", [summary["accuracy"], summary["accuracy"]])
    return {
        "run": str(summary.get("run", "")),
        "method": str(summary.get("method", "")),
        "kind": method_kind(str(summary.get("method", "")), bound=bool(summary.get("bound"))),
        "accuracy": summary["accuracy"],
        "ci95": [lo, hi],
        "cost": round(cost_of(summary, "priced"), 1),
        "n": summary.get("n", 0),
        "folder": folder,
        "current": current,
    }


def _siblings(folder: Path, benchmark: str) -> list[Path]:
    found = []
    for path in sorted(folder.parent.iterdir()):
        if (path / "items.jsonl").is_file():
            try:
                summary = _summary(path)
            except (OSError, ValueError, KeyError):
                continue
            if summary.get("benchmark") == benchmark:
                found.append(path)
    return found


def evaluation_view(
    folder: Path,
    *,
    label: str,
    ids: dict[Path, str],
    item_filter: str = "all",
    query: str = "",
    offset: int = 0,
    limit: int = PAGE,
) -> dict[str, Any]:
    """The evaluation page's data: the summary, one page of filtered items and the comparison.

    ``ids`` names the eval folders the view knows (for links from the plot's points)."""
    summary = _summary(folder)
    records = list(read_records(folder / "items.jsonl").values())
    matched = [r for r in records if _item_matches(r, item_filter, query)]
    benchmark = str(summary.get("benchmark", ""))
    siblings = _siblings(folder, benchmark) if benchmark else [folder]
    summaries = [_summary(p) for p in siblings]
    resolved = {p.resolve(): i for p, i in ids.items()}
    points = [
        _point(s, folder=resolved.get(p.resolve(), ""), current=p.resolve() == folder.resolve())
        for s, p in zip(summaries, siblings, strict=True)
    ]
    fixed = [
        p
        for s, p in zip(summaries, siblings, strict=True)
        if method_kind(str(s.get("method", ""))) == "fixed team"
    ]
    bound = _oracle(fixed)
    front_input: list[dict[str, Any]] = [*summaries, *([bound] if bound else [])]
    front = set(pareto_front(front_input))
    for index, point in enumerate(points):
        point["pareto"] = index in front
    if bound is not None:
        points.append({**_point(bound, folder="", current=False), "pareto": False})
    return {
        "label": label,
        "summary": {
            "run": summary.get("run", folder.name),
            "benchmark": benchmark,
            "split": summary.get("split"),
            "method": summary.get("method", ""),
            "kind": method_kind(str(summary.get("method", ""))),
            "profile": summary.get("profile"),
            "models": summary.get("models", {}),
            "n": summary.get("n", len(records)),
            "correct": summary.get("correct"),
            "accuracy": summary.get("accuracy"),
            "ci95": summary.get("ci95"),
            "mean_tokens": summary.get("mean_tokens"),
            "mean_priced_tokens": summary.get("mean_priced_tokens"),
            "mean_full_cost": summary.get("mean_full_cost"),
            "tier_prices": summary.get("tier_prices"),
            "failed_runs": summary.get("failed_runs"),
            "partial": bool(summary.get("partial")),
        },
        "items": {
            "total": len(records),
            "matched": len(matched),
            "offset": offset,
            "limit": limit,
            "filter": item_filter,
            "query": query,
            "page": [_item(r) for r in matched[offset : offset + limit]],
        },
        "points": points,
        "cost_axis": "mean tier-priced worker tokens per item (medium-tier token = 1)",
    }


def _oracle(folders: Sequence[Path]) -> dict[str, Any] | None:
    if len(folders) < 2:
        return None
    try:
        bound = oracle_summary(folders)
    except (ValueError, OSError):
        return None
    bound["run"] = "per-item best of the fixed teams (bound)"
    return bound


def summary_line(folder: Path) -> dict[str, Any]:
    """The evaluations list's line for one folder."""
    try:
        summary = _summary(folder)
    except (OSError, ValueError, KeyError, json.JSONDecodeError):
        return {"run": folder.name, "error": "unreadable summary"}
    return {
        "run": summary.get("run", folder.name),
        "benchmark": summary.get("benchmark", ""),
        "method": summary.get("method", ""),
        "kind": method_kind(str(summary.get("method", ""))),
        "n": summary.get("n", 0),
        "accuracy": summary.get("accuracy"),
        "ci95": summary.get("ci95"),
        "cost": round(cost_of(summary, "priced"), 1) if "mean_tokens" in summary else None,
        "partial": bool(summary.get("partial")),
    }
