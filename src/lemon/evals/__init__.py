"""Evaluation: baselines, the eval loop and reports."""

from lemon.evals.baselines import BASELINES, Baseline, baseline_spec
from lemon.evals.loop import EvalSettings, evaluate, summarize

__all__ = [
    "BASELINES",
    "Baseline",
    "EvalSettings",
    "baseline_spec",
    "evaluate",
    "summarize",
]
