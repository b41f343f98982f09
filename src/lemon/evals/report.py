"""``lemon report``: compare eval runs: a markdown table and accuracy against cost (PNG).

Cost is tier-priced worker tokens per item (``mean_priced_tokens``: each tier's tokens times
its price, :mod:`lemon.pricing`) or raw worker tokens (``mean_tokens``); a summary written
before tier prices has no priced figure and counts its raw tokens (every price 1.0).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

__all__ = ["Cost", "cost_of", "load_summaries", "markdown_table", "pareto_front", "plot"]

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
    """Each path is a run directory (with summary.json) or a summary JSON file."""
    summaries = []
    for raw in paths:
        path = Path(raw)
        file = path / "summary.json" if path.is_dir() else path
        data = json.loads(file.read_text(encoding="utf-8"))
        data.setdefault("run", path.name if path.is_dir() else path.stem)
        summaries.append(data)
    return summaries


def pareto_front(summaries: Sequence[dict[str, Any]], cost: Cost = "priced") -> list[int]:
    """Indices of runs that no run on the same benchmark beats on both accuracy (higher) and
    cost (lower)."""
    front = []
    for i, a in enumerate(summaries):
        dominated = any(
            b.get("benchmark") == a.get("benchmark")
            and b["accuracy"] >= a["accuracy"]
            and cost_of(b, cost) <= cost_of(a, cost)
            and (b["accuracy"] > a["accuracy"] or cost_of(b, cost) < cost_of(a, cost))
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
        lines.append(
            f"| {s['run']} | {s.get('benchmark', '')} | {s.get('method', '')} | {s['n']} | "
            f"{s['accuracy']:.3f} | [{lo:.3f}, {hi:.3f}] | {s['mean_tokens']:.0f} | "
            f"{cost_of(s, 'priced'):.0f} | {'yes' if i in front else ''} |"
        )
    return "\n".join(lines)


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
                fmt="o",
                mfc=colour if i in front else "white",
                color=colour,
                capsize=3,
            )
            ax.annotate(
                str(s.get("method", s["run"])).removeprefix("baseline:"),
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
