"""``lemon bench learning``'s statistics, against values computed by hand."""

from __future__ import annotations

import argparse
from types import ModuleType
from typing import Any

import pytest


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    import bench_learning

    return bench_learning


def test_first_passage_interpolates_between_evaluations(bench: ModuleType) -> None:
    curve = [0.2, 0.5, 0.9, 1.0]
    calls = [0, 100, 300, 400]
    # 0.8 lies 3/4 of the way from 0.5 (step 5) to 0.9 (step 10): step 8.75, calls 250
    assert bench.first_passage(curve, calls, 0.8, 5) == (pytest.approx(8.75), pytest.approx(250))
    assert bench.first_passage(curve, calls, 0.2, 5) == (0.0, 0.0)  # there from the start
    assert bench.first_passage(curve, calls, 1.5, 5) == (None, None)  # never


def test_area_is_the_mean_level_by_trapezoids(bench: ModuleType) -> None:
    assert bench.area([0.0, 1.0, 1.0]) == pytest.approx(0.75)  # (0.5 + 1.0) / 2
    assert bench.area([0.4]) == 0.4
    assert bench.area([]) == 0.0


def test_bootstrap_ratio_of_means_and_paired_difference(bench: ModuleType) -> None:
    pairs = [(2.0, 4.0), (4.0, 4.0)]
    out = bench._bootstrap(pairs, 2000)
    assert out["ratio"] == pytest.approx(0.75)  # mean 3 over mean 4
    assert out["difference"] == pytest.approx(-1.0)
    lo, hi = out["ratio_ci95"]
    # resampling two pairs gives means of a in {2, 3, 4} over 4: ratios 0.5, 0.75, 1
    assert lo == pytest.approx(0.5)
    assert hi == pytest.approx(1.0)
    assert out["difference_ci95"] == [pytest.approx(-2.0), pytest.approx(0.0)]
    assert bench._bootstrap([(1.0, 0.0)], 10)["ratio"] == float("inf")


def _run(
    seed: int, arm: str, *, steps: float | None, calls: float | None, total: int
) -> dict[str, Any]:
    return {
        "seed": seed, "arm": arm, "group_size": 8, "reached": steps is not None,
        "steps_to_target": steps, "steps_to_90": None, "calls_to_target": calls,
        "worker_calls": [0, total // 2, total], "auc": 0.5, "final": 0.8,
        "entropy_first": 1.0, "entropy_last": 0.5, "zero_spread": 0.1, "zero_spread_last": 0.2,
        "span_share": 0.0, "wall_s": 1.0,
    }  # fmt: skip


def test_runs_that_never_get_there_are_censored_at_the_budget(bench: ModuleType) -> None:
    args = argparse.Namespace(steps=50, eval_every=5, bootstrap=200)
    runs = []
    for seed in (0, 1):
        runs += [
            _run(seed, "global", steps=40.0, calls=800.0, total=1000),
            _run(seed, "paper", steps=None, calls=None, total=1000),
            _run(seed, "two_way", steps=20.0, calls=600.0, total=900),
            _run(seed, "global_cost", steps=None, calls=None, total=1200),
        ]
    headline, arms = bench.summarise(args, runs)
    assert headline["ratio"]["ratio"] == pytest.approx(0.5)  # 20 / 40
    # paper never reached it: censored at steps + eval_every = 55
    assert headline["paper_kinds_ratio"]["ratio"] == pytest.approx(55 / 40, abs=1e-4)
    # global_cost never reached it: its calls over the budget plus one interval, 1200 + 600
    assert headline["cost_ratio"]["ratio"] == pytest.approx(600 / 1800, abs=1e-4)  # rounded
    assert arms["paper"]["reached"] == 0
    assert arms["two_way"]["mean_steps_to_target"] == 20.0
