"""Cost–accuracy curves of an outcome table: the random hull, the oracle, normalised scores.

Every method of a routing comparison is, per item, a success in [0, 1] and a cost (tier-priced
tokens, the full cost). On one set of items:

- the **random hull** is the upper concave envelope of the fixed teams' (mean cost, accuracy)
  points: mixing two fixed teams at random reaches any point on the segment between them
  (RouteLLM's random router); :func:`hull_at` reads it at a cost, and below the cheapest team
  it is that team's accuracy (nothing cheaper exists), above the dearest the best accuracy;
- the **oracle** picks, per item, among the fixed teams, the cheapest that succeeds; its curve
  (:func:`oracle_curve`) sweeps a price λ on cost (per item the team maximising
  success − λ · cost) and is the upper bound any router over these teams can reach at a cost;
- a method's **normalised score** at its cost c is ``(accuracy − hull(c)) / (oracle(c) −
  hull(c))``: 0 on the hull, 1 on the oracle (RouterBench's AIQ and RouteLLM's APGR normalise
  the same way); a curve's **curve score** is the area between it and the hull over the fixed
  teams' cost range, divided by the oracle's.

Pure functions on numpy arrays; no I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = [
    "Curve",
    "curve_at",
    "curve_score",
    "hull_at",
    "normalised_score",
    "oracle_choice",
    "oracle_curve",
    "upper_envelope",
]

Curve = list[tuple[float, float]]
"""(cost, accuracy) points in increasing cost."""
Array = npt.NDArray[np.float64]


def upper_envelope(points: Sequence[tuple[float, float]]) -> Curve:
    """The upper concave, non-decreasing envelope of ``points`` (cost, accuracy): the Pareto
    front joined by the segments a random mix of two of them reaches."""
    ordered = sorted(set(points), key=lambda p: (p[0], -p[1]))
    front: Curve = []
    for cost, acc in ordered:  # drop points beaten by a cheaper one
        if front and acc <= front[-1][1]:
            continue
        front.append((cost, acc))
    hull: Curve = []
    for point in front:  # keep the concave chain (Andrew's monotone chain, upper part)
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (x2 - x1) * (point[1] - y1) - (y2 - y1) * (point[0] - x1) >= 0:
                hull.pop()
            else:
                break
        hull.append(point)
    return hull


def curve_at(curve: Curve, cost: float) -> float:
    """A non-decreasing curve read at ``cost``: linear between its points, its first value
    below them, its last above."""
    if not curve:
        raise ValueError("an empty curve has no value")
    if cost <= curve[0][0]:
        return curve[0][1]
    for (x1, y1), (x2, y2) in itertools.pairwise(curve):
        if cost <= x2:
            return y1 + (y2 - y1) * (cost - x1) / (x2 - x1) if x2 > x1 else max(y1, y2)
    return curve[-1][1]


def hull_at(success: Array, cost: Array, at: float) -> float:
    """The random hull of the fixed teams (columns of ``success``/``cost``, items × teams) at
    mean cost ``at``."""
    points = list(zip(cost.mean(axis=0).tolist(), success.mean(axis=0).tolist(), strict=True))
    return curve_at(upper_envelope(points), at)


def oracle_choice(success: Array, cost: Array, price: float) -> npt.NDArray[np.int64]:
    """Per item, the team maximising success − price · cost (ties: the cheaper)."""
    utility = success - price * cost
    best = utility.max(axis=1, keepdims=True)
    ties = np.where(np.isclose(utility, best), cost, np.inf)
    return np.asarray(ties.argmin(axis=1), dtype=np.int64)


def oracle_curve(success: Array, cost: Array, *, prices: int = 200) -> Curve:
    """The oracle's cost–accuracy curve: per-item choices for prices from 0 (the cheapest of
    the successful teams, every solvable item solved) to one that makes every item take its
    cheapest team, enveloped."""
    rows = np.arange(success.shape[0])
    spread = float(cost.max() - cost.min()) or 1.0
    points = []
    for price in [0.0, *np.geomspace(1e-6, 2.0 / spread * 1e3, prices)]:
        pick = oracle_choice(success, cost, float(price))
        points.append((float(cost[rows, pick].mean()), float(success[rows, pick].mean())))
    return upper_envelope(points)


def normalised_score(accuracy: float, at: float, hull: Curve, oracle: Curve) -> float | None:
    """(accuracy − hull(at)) / (oracle(at) − hull(at)); None where the oracle is no better
    than the hull (nothing to win there)."""
    low, high = curve_at(hull, at), curve_at(oracle, at)
    if high - low <= 1e-12:
        return None
    return (accuracy - low) / (high - low)


def _area(curve: Curve, baseline: Curve, lo: float, hi: float, steps: int = 400) -> float:
    grid = np.linspace(lo, hi, steps)
    gap = [curve_at(curve, float(x)) - curve_at(baseline, float(x)) for x in grid]
    return float(np.trapezoid(gap, grid))


def curve_score(curve: Curve, hull: Curve, oracle: Curve) -> float | None:
    """The area between ``curve`` (enveloped) and the hull over the hull's cost range, over
    the oracle's: 0 for the random mix, 1 for the oracle."""
    lo, hi = hull[0][0], hull[-1][0]
    if hi <= lo:
        return None
    best = _area(oracle, hull, lo, hi)
    if best <= 1e-12:
        return None
    return _area(upper_envelope(curve), hull, lo, hi) / best
