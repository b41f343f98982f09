"""The Wilson interval, against hand-computed values."""

from __future__ import annotations

import pytest

from lemon.scoring import mean_difference_ci, paired_bootstrap, wilson_interval


def test_known_values() -> None:
    # 8/10: centre (0.8 + 1.92/10) / 1.384 = 0.7168, half 0.2465 (z = 1.96)
    lo, hi = wilson_interval(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4)
    assert hi == pytest.approx(0.9433, abs=1e-4)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0
    assert hi == pytest.approx(0.2775, abs=1e-4)
    assert wilson_interval(10, 10)[1] == 1.0
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError, match="correct"):
        wilson_interval(11, 10)


def test_paired_bootstrap_of_a_constant_difference_is_that_difference() -> None:
    # b varies widely, a = b + 0.1 on every item: an unpaired interval would be wide, the
    # paired one is exactly [0.1, 0.1] (every resample's mean difference is 0.1)
    b = [0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.5, 0.25]
    a = [x + 0.1 for x in b]
    lo, hi = mean_difference_ci(a, b)
    assert lo == pytest.approx(0.1)
    assert hi == pytest.approx(0.1)


def test_paired_bootstrap_by_hand_on_two_items() -> None:
    # differences [1, 0]: a resample's mean is 0 (p 1/4), 0.5 (p 1/2) or 1 (p 1/4); the
    # 2.5th percentile is 0 and the 97.5th is 1, and the middle of the draws is 0.5
    lo, hi = mean_difference_ci([1.0, 0.0], [0.0, 0.0], rounds=4000)
    assert (lo, hi) == (0.0, 1.0)
    assert paired_bootstrap(lambda d: float(d.mean()), [1.0, 0.0], level=0.4) == (0.5, 0.5)


def test_paired_bootstrap_resamples_items_not_columns() -> None:
    # rows are items: statistic sees the same rows of both samples
    seen = []

    def statistic(x, y):  # type: ignore[no-untyped-def]
        seen.append(bool((x == y + 10).all()))
        return 0.0

    paired_bootstrap(statistic, [10.0, 11.0, 12.0], [0.0, 1.0, 2.0], rounds=50)
    assert all(seen)


def test_paired_bootstrap_rejects_bad_samples() -> None:
    with pytest.raises(ValueError, match="one length"):
        mean_difference_ci([1.0, 0.0], [1.0])
    with pytest.raises(ValueError, match="level"):
        paired_bootstrap(lambda x: 0.0, [1.0], level=1.5)
