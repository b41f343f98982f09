"""Evaluation: baselines, the eval loop and reports."""

from lemon.evals.baselines import BASELINES, Baseline, baseline_spec
from lemon.evals.loop import EvalSettings, evaluate, summarize, task_text

__all__ = [
    "BASELINES",
    "Baseline",
    "EvalSettings",
    "baseline_spec",
    "evaluate",
    "summarize",
    "task_text",
]
