"""``lemon report``: compare eval runs: a markdown table and accuracy vs worker tokens (PNG)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["load_summaries", "markdown_table", "pareto_front", "plot"]


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


def pareto_front(summaries: Sequence[dict[str, Any]]) -> list[int]:
    """Indices of runs no other run beats on both accuracy (higher) and tokens (lower)."""
    front = []
    for i, a in enumerate(summaries):
        dominated = any(
            b["accuracy"] >= a["accuracy"]
            and b["mean_tokens"] <= a["mean_tokens"]
            and (b["accuracy"] > a["accuracy"] or b["mean_tokens"] < a["mean_tokens"])
            for j, b in enumerate(summaries)
            if j != i
        )
        if not dominated:
            front.append(i)
    return front


def markdown_table(summaries: Sequence[dict[str, Any]]) -> str:
    front = set(pareto_front(summaries))
    lines = [
        "| run | benchmark | method | n | accuracy | 95% CI | mean worker tokens | Pareto |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for i, s in enumerate(summaries):
        lo, hi = s["ci95"]
        lines.append(
            f"| {s['run']} | {s.get('benchmark', '')} | {s.get('method', '')} | {s['n']} | "
            f"{s['accuracy']:.3f} | [{lo:.3f}, {hi:.3f}] | {s['mean_tokens']:.0f} | "
            f"{'yes' if i in front else ''} |"
        )
    return "\n".join(lines)


def plot(summaries: Sequence[dict[str, Any]], path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    front = pareto_front(summaries)
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for i, s in enumerate(summaries):
        lo, hi = s["ci95"]
        ax.errorbar(
            s["mean_tokens"],
            s["accuracy"],
            yerr=[[s["accuracy"] - lo], [hi - s["accuracy"]]],
            fmt="o",
            capsize=3,
            color="tab:red" if i in front else "tab:blue",
        )
        ax.annotate(
            s["run"],
            (s["mean_tokens"], s["accuracy"]),
            textcoords="offset points",
            xytext=(5, 5),
            fontsize=8,
        )
    if len(front) > 1:
        points = sorted((summaries[i]["mean_tokens"], summaries[i]["accuracy"]) for i in front)
        ax.plot(
            [p[0] for p in points],
            [p[1] for p in points],
            "--",
            color="tab:red",
            label="Pareto front",
        )
        ax.legend()
    ax.set_xlabel("mean worker tokens per item")
    ax.set_ylabel("accuracy (95% CI)")
    ax.set_title("Accuracy vs worker tokens")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
