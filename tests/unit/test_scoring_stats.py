"""The Wilson interval, against hand-computed values."""

from __future__ import annotations

import pytest

from lemon.scoring import wilson_interval


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
