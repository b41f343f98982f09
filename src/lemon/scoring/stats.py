"""Confidence intervals for accuracies."""

from __future__ import annotations

import math

__all__ = ["Z95", "wilson_interval"]

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
