"""Confidence intervals: the Wilson interval of an accuracy, and the one paired bootstrap.

Every comparison of two methods in this project is paired on the same items: the paired
bootstrap resamples *items* (the same draw for every method compared), recomputes the
statistic, and reports its percentile interval. It is the only bootstrap in the tree:
``lemon report``, the mixed-workload report and every experiment call it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Z95", "mean_difference_ci", "paired_bootstrap", "wilson_interval"]

Z95 = 1.959963984540054
"""The two-sided 95% quantile of the standard normal distribution."""


def wilson_interval(correct: int, n: int, *, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for ``correct`` successes out of ``n`` (``(0, 1)`` when ``n`` is 0).

    Unlike the normal approximation it stays inside [0, 1] and is not degenerate at 0 or n.
    """
    if n < 0 or not 0 <= correct <= n:
        raise ValueError(f"need 0 <= correct <= n, got correct={correct}, n={n}")
    if n == 0:
        return (0.0, 1.0)
    p = correct / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    lo = 0.0 if correct == 0 else max(0.0, centre - half)
    hi = 1.0 if correct == n else min(1.0, centre + half)  # exact ends, no rounding residue
    return (lo, hi)


def paired_bootstrap(
    statistic: Callable[..., float],
    *samples: Sequence[float] | Any,
    rounds: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """The percentile interval of ``statistic(*resampled)`` over ``rounds`` item resamples.

    ``samples`` are per-item arrays of one length n (rows of a 2-D array are items too); each
    round draws n item indices with replacement, the same indices for every sample, so the
    interval is of a paired statistic (e.g. the mean difference of two methods on the same
    items). Deterministic for a ``seed``. Needs numpy (the ``report`` extra).
    """
    import numpy as np

    arrays = [np.asarray(s, dtype=np.float64) for s in samples]
    if not arrays:
        raise ValueError("paired_bootstrap needs at least one sample")
    n = len(arrays[0])
    if n == 0 or any(len(a) != n for a in arrays):
        raise ValueError(
            f"samples must be non-empty and of one length, got {[len(a) for a in arrays]}"
        )
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    rng = np.random.default_rng(seed)
    values = np.empty(rounds, dtype=np.float64)
    for r in range(rounds):
        index = rng.integers(0, n, n)
        values[r] = statistic(*(a[index] for a in arrays))
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return float(lo), float(hi)


def mean_difference_ci(
    a: Sequence[float] | Any, b: Sequence[float] | Any, *, rounds: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """The paired 95% interval of ``mean(a - b)`` over the same items."""
    return paired_bootstrap(lambda x, y: float((x - y).mean()), a, b, rounds=rounds, seed=seed)
