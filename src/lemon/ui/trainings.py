"""A training run as the web view shows it: the logged steps and, for GRPO, where the
counterfactual credit landed on the sampled specs.

The series per step come from the metrics file (``lemon train``'s ``metrics.jsonl``): reward
(R_orch, the group mean), validity (share of sampled specs that parse and validate), span share
(``cf/span_share``: the counterfactual span terms' share of the loss gradient) and distinct
worker calls (``worker_calls``: agent executions a reuse cache could not answer; logged by the
simulator rewards), plus the mean Δc and the worker tokens. A series a run did not log is
reported as missing, not drawn as zeros.

The credit record (``credit.jsonl``, written by ``lemon_train.grpo.record_credit``) holds per
generation batch each sampled completion and its credits: kind, agent, Δc and the character
spans of the tokens Δc was added to. After a resumed run a step may appear twice; the later
lines of a step replace the earlier ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["SERIES", "read_credit", "training_view"]

SERIES = {
    "reward": "reward (R_orch, group mean)",
    "validity": "validity (share of valid specs)",
    "cf/span_share": "span share (credit's share of the gradient)",
    "worker_calls": "distinct worker calls",
    "cf/delta_mean": "mean Δc",
    "worker_tokens": "worker tokens per spec",
}


def _rows(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return rows
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("step"), int):
            rows.append(row)
    return rows


def read_credit(path: Path | None) -> dict[int, list[dict[str, Any]]]:
    """Samples by step, with the resume rule of the module's docstring."""
    by_step: dict[int, list[dict[str, Any]]] = {}
    if path is None:
        return by_step
    last_step = 0
    for row in _rows(path):
        step = int(row["step"])
        samples = [s for s in row.get("samples", []) if isinstance(s, dict)]
        if step < last_step:  # a resumed run logs these steps again
            by_step = {s: v for s, v in by_step.items() if s < step}
        if step != last_step and step in by_step:
            by_step[step] = []
        by_step.setdefault(step, []).extend(samples)
        last_step = step
    return by_step


def _sample(sample: dict[str, Any]) -> dict[str, Any]:
    text = str(sample.get("completion", ""))
    credits = []
    for credit in sample.get("credit", []):
        spans = [
            [int(s), int(e)]
            for s, e in credit.get("spans", [])
            if 0 <= int(s) < int(e) <= len(text)
        ]
        credits.append(
            {
                "kind": str(credit.get("kind", "")),
                "agent": str(credit.get("agent", "")),
                "delta": float(credit.get("delta", 0.0)),
                "spans": spans,
            }
        )
    reward = sample.get("reward")
    return {
        "completion": text,
        "reward": None if reward is None else float(reward),
        "credit": credits,
    }


def training_view(metrics: Path, *, credit: Path | None, label: str) -> dict[str, Any]:
    """The training page's data: every step's series and the credited samples per step."""
    rows = [row for row in _rows(metrics) if "loss" in row or "reward" in row]
    series: dict[str, list[list[float]]] = {}
    for key in SERIES:
        points = [
            [float(row["step"]), float(row[key])]
            for row in rows
            if isinstance(row.get(key), (int, float))
        ]
        series[key] = points
    by_step = read_credit(credit)
    steps = []
    for step in sorted(by_step):
        samples = [_sample(s) for s in by_step[step]]
        steps.append(
            {
                "step": step,
                "samples": samples,
                "credited": sum(1 for s in samples if s["credit"]),
            }
        )
    final = rows[-1] if rows else {}
    return {
        "label": label,
        "metrics_file": str(metrics),
        "credit_file": str(credit) if credit is not None else None,
        "steps": len(rows),
        "series": series,
        "series_labels": SERIES,
        "missing": [key for key, points in series.items() if not points],
        "credit": steps,
        "last": {k: v for k, v in final.items() if isinstance(v, (int, float, str))},
    }
