"""``lemon report``: compare eval runs: a markdown table and accuracy against cost (PNG).

Cost is tier-priced worker tokens per item (``mean_priced_tokens``: each tier's tokens times
its price, :mod:`lemon.pricing`) or raw worker tokens (``mean_tokens``); a summary written
before tier prices has no priced figure and counts its raw tokens (every price 1.0).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "Cost",
    "cost_of",
    "load_summaries",
    "markdown_table",
    "oracle_summary",
    "pareto_front",
    "plot",
    "policy_comparison",
]

Cost = Literal["priced", "tokens"]

_AXIS = {
    "priced": "mean tier-priced worker tokens per item",
    "tokens": "mean worker tokens per item",
}


def cost_of(summary: dict[str, Any], cost: Cost) -> float:
    if cost == "priced":
        return float(summary.get("mean_priced_tokens", summary["mean_tokens"]))
    return float(summary["mean_tokens"])


def load_summaries(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Each path is a run directory (with summary.json) or a summary JSON file. A run directory
    that has items but no summary yet (still running) is summarized from its items and marked
    ``"partial": true``."""
    summaries = []
    for raw in paths:
        path = Path(raw)
        file = path / "summary.json" if path.is_dir() else path
        if path.is_dir() and not file.is_file() and (path / "items.jsonl").is_file():
            data = _partial(path)
        else:
            data = json.loads(file.read_text(encoding="utf-8"))
        data.setdefault("run", path.name if path.is_dir() else path.stem)
        summaries.append(data)
    return summaries


def _partial(path: Path) -> dict[str, Any]:
    from lemon.evals.loop import summarize
    from lemon.jsonl import read_records

    records = list(read_records(path / "items.jsonl").values())
    first = records[0] if records else {}
    tiers = {t for r in records for t in re.findall(r"capacity: (\w+)", r.get("spec", ""))}
    return summarize(
        records,
        settings={
            "run": path.name,
            "benchmark": str(first.get("id", "")).split(":", 1)[0],
            "method": first.get("method", ""),
            "partial": True,
            **({"tier": tiers.pop()} if len(tiers) == 1 else {}),
        },
    )


def oracle_summary(runs: Sequence[str | Path]) -> dict[str, Any]:
    """The per-item best of several runs over the same items: an item counts as solved when any
    run solved it, at the cost of the cheapest run that did (of the cheapest run when none did).
    An upper bound for a policy choosing among those runs' teams, not a team anyone could run;
    marked ``"bound": true`` and kept off the Pareto front. Only items every run holds count."""
    from lemon.evals.loop import summarize
    from lemon.jsonl import read_records

    if len(runs) < 2:
        raise ValueError("an oracle needs at least two runs")
    tables = []
    for raw in runs:
        path = Path(raw)
        if not (path / "items.jsonl").is_file():
            raise ValueError(f"{path}: not a run directory (no items.jsonl)")
        tables.append(read_records(path / "items.jsonl"))
    common = [key for key in tables[0] if all(key in table for table in tables[1:])]
    if not common:
        raise ValueError(f"the runs {', '.join(map(str, runs))} share no item")

    def price(record: dict[str, Any]) -> float:
        return float(record.get("priced_tokens", record["tokens"]))

    records = []
    for key in common:
        candidates = [table[key] for table in tables]
        solved = [r for r in candidates if r["correct"]]
        records.append(min(solved or candidates, key=price))
    names = [Path(r).name for r in runs]
    first = records[0]
    return summarize(
        records,
        settings={
            "run": f"oracle({' + '.join(names)})",
            "benchmark": str(first.get("id", "")).split(":", 1)[0],
            "method": "oracle:per-item best of " + ", ".join(names),
            "bound": True,
        },
    )


def _dominates(b: dict[str, Any], a: dict[str, Any], cost: Cost) -> bool:
    """``b`` is at least as accurate and as cheap as ``a``, and strictly better on one."""
    return (
        b["accuracy"] >= a["accuracy"]
        and cost_of(b, cost) <= cost_of(a, cost)
        and (b["accuracy"] > a["accuracy"] or cost_of(b, cost) < cost_of(a, cost))
    )


def policy_comparison(summaries: Sequence[dict[str, Any]], cost: Cost = "priced") -> list[str]:
    """For each learned-policy run (method ``policy:...``): the most accurate fixed team on its
    benchmark (not a policy, not a bound), the accuracy difference in points, the cost ratio,
    and whether any fixed team dominates it."""
    lines = []
    for s in summaries:
        if not str(s.get("method", "")).startswith("policy:"):
            continue
        fixed = [
            f
            for f in summaries
            if f.get("benchmark") == s.get("benchmark")
            and not str(f.get("method", "")).startswith("policy:")
            and not f.get("bound")
        ]
        if not fixed:
            continue
        best = max(fixed, key=lambda f: (f["accuracy"], -cost_of(f, cost)))
        dominators = [f["run"] for f in fixed if _dominates(f, s, cost)]
        ratio = cost_of(s, cost) / cost_of(best, cost) if cost_of(best, cost) else float("inf")
        if dominators:
            verdict = f"dominated by {', '.join(dominators)}"
        elif s["accuracy"] == 0:
            verdict = "on the fixed teams' front only by being cheapest: it solves nothing"
        else:
            verdict = "on the fixed teams' front"
        lines.append(
            f"- {s['run']} ({s.get('benchmark', '')}): {s['accuracy']:.3f} vs the most accurate "
            f"fixed team {best['run']} {best['accuracy']:.3f} "
            f"({100 * (s['accuracy'] - best['accuracy']):+.1f} points) at {ratio:.2f}x its "
            f"{cost} cost; {verdict}"
        )
    return lines


def pareto_front(summaries: Sequence[dict[str, Any]], cost: Cost = "priced") -> list[int]:
    """Indices of runs that no run on the same benchmark beats on both accuracy (higher) and
    cost (lower). Bounds (``"bound": true``, e.g. an oracle) neither join nor shape it."""
    front = []
    for i, a in enumerate(summaries):
        if a.get("bound"):
            continue
        dominated = any(
            not b.get("bound")
            and b.get("benchmark") == a.get("benchmark")
            and _dominates(b, a, cost)
            for j, b in enumerate(summaries)
            if j != i
        )
        if not dominated:
            front.append(i)
    return front


def markdown_table(summaries: Sequence[dict[str, Any]], cost: Cost = "priced") -> str:
    front = set(pareto_front(summaries, cost))
    lines = [
        "| run | benchmark | method | n | accuracy | 95% CI | mean worker tokens "
        f"| mean tier-priced tokens | Pareto ({cost}) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for i, s in enumerate(summaries):
        lo, hi = s["ci95"]
        run = f"{s['run']} (partial)" if s.get("partial") else s["run"]
        run = f"{run} (bound)" if s.get("bound") else run
        lines.append(
            f"| {run} | {s.get('benchmark', '')} | {s.get('method', '')} | {s['n']} | "
            f"{s['accuracy']:.3f} | [{lo:.3f}, {hi:.3f}] | {s['mean_tokens']:.0f} | "
            f"{cost_of(s, 'priced'):.0f} | {'yes' if i in front else ''} |"
        )
    comparison = policy_comparison(summaries, cost)
    if comparison:
        lines += ["", "Learned policies against the fixed teams:", "", *comparison]
    return "\n".join(lines)


def _label(summary: dict[str, Any]) -> str:
    """A point's label: the run's name without its benchmark prefix (``gsm8k-single-large`` ->
    ``single-large``); a bound is labelled as one."""
    if summary.get("bound"):
        return "per-item best (bound)"
    return str(summary["run"]).removeprefix(f"{summary.get('benchmark', '')}-")


def plot(summaries: Sequence[dict[str, Any]], path: str | Path, cost: Cost = "priced") -> None:
    """Accuracy (with its 95% CI) against cost, one colour per benchmark; each benchmark's
    Pareto front is joined by a dashed line and drawn with filled markers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    front = set(pareto_front(summaries, cost))
    benchmarks = sorted({str(s.get("benchmark")) for s in summaries})
    colours = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for b, bench in enumerate(benchmarks):
        colour = colours(b % 10)
        runs = [(i, s) for i, s in enumerate(summaries) if str(s.get("benchmark")) == bench]
        for i, s in runs:
            lo, hi = s["ci95"]
            ax.errorbar(
                cost_of(s, cost),
                s["accuracy"],
                yerr=[[s["accuracy"] - lo], [hi - s["accuracy"]]],
                fmt="*" if s.get("bound") else "o",
                mfc=colour if i in front or s.get("bound") else "white",
                color=colour,
                capsize=3,
            )
            ax.annotate(
                _label(s),
                (cost_of(s, cost), s["accuracy"]),
                textcoords="offset points",
                xytext=(5, 5),
                fontsize=8,
                color=colour,
            )
        points = sorted((cost_of(s, cost), s["accuracy"]) for i, s in runs if i in front)
        ax.plot([p[0] for p in points], [p[1] for p in points], "--", color=colour, label=bench)
    ax.legend(title="benchmark (dashed: Pareto front)")
    ax.set_xlabel(_AXIS[cost])
    ax.set_ylabel("accuracy (95% CI)")
    ax.set_title(
        "Accuracy vs tier-priced cost" if cost == "priced" else "Accuracy vs worker tokens"
    )
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
