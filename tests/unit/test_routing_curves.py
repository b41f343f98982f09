"""The routing comparison's maths, against values computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from lemon.evals import curves
from lemon.tables.routers import KnnRouter, auroc, route

# three items × three teams (cheap, middle, dear)
SUCCESS = np.array([[1.0, 1.0, 1.0], [0.0, 1.0, 1.0], [0.0, 0.0, 1.0]])
COST = np.array([[10.0, 30.0, 90.0], [10.0, 30.0, 90.0], [10.0, 30.0, 90.0]])


def test_the_upper_envelope_drops_dominated_and_concave_breaking_points() -> None:
    points = [(10, 0.2), (20, 0.25), (30, 0.6), (40, 0.5), (90, 0.9)]
    # (40, 0.5) is beaten by the cheaper (30, 0.6); (20, 0.25) lies under the chord from
    # (10, 0.2) to (30, 0.6), which passes 0.4 at 20
    assert curves.upper_envelope(points) == [(10, 0.2), (30, 0.6), (90, 0.9)]


def test_a_curve_is_read_linearly_and_flat_beyond_its_ends() -> None:
    curve = [(10.0, 0.2), (30.0, 0.6), (90.0, 0.9)]
    assert curves.curve_at(curve, 5) == 0.2
    assert curves.curve_at(curve, 20) == pytest.approx(0.4)
    assert curves.curve_at(curve, 60) == pytest.approx(0.75)
    assert curves.curve_at(curve, 200) == 0.9


def test_the_hull_and_the_oracle_of_three_teams() -> None:
    # fixed points: (10, 1/3), (30, 2/3), (90, 1): collinear-or-concave? slopes 1/60, 1/180
    assert curves.hull_at(SUCCESS, COST, 20) == pytest.approx(0.5)
    # the oracle solves every item at its cheapest successful team: (10 + 30 + 90) / 3
    pick = curves.oracle_choice(SUCCESS, COST, 0.0)
    assert pick.tolist() == [0, 1, 2]
    oracle = curves.oracle_curve(SUCCESS, COST)
    assert oracle[-1] == pytest.approx((130 / 3, 1.0))
    assert oracle[0] == pytest.approx((10.0, 1 / 3))
    # at cost 20 the oracle mixes (10, 1/3) and the point that solves items 1 and 2 at 50/3
    # ... its curve is concave and above the hull everywhere in between
    assert curves.curve_at(oracle, 20) > curves.hull_at(SUCCESS, COST, 20)


def test_the_normalised_score_is_zero_on_the_hull_and_one_on_the_oracle() -> None:
    hull = [(10.0, 0.2), (90.0, 0.9)]
    oracle = [(10.0, 0.2), (30.0, 0.9)]
    at = 50.0  # hull 0.55, oracle 0.9
    assert curves.normalised_score(0.55, at, hull, oracle) == pytest.approx(0.0)
    assert curves.normalised_score(0.9, at, hull, oracle) == pytest.approx(1.0)
    assert curves.normalised_score(0.725, at, hull, oracle) == pytest.approx(0.5)
    assert curves.normalised_score(0.2, 10.0, hull, oracle) is None  # nothing to win at 10
    # a curve equal to the oracle scores 1, the hull itself 0
    assert curves.curve_score(oracle, hull, oracle) == pytest.approx(1.0, abs=1e-3)
    assert curves.curve_score(hull, hull, oracle) == pytest.approx(0.0, abs=1e-9)


def test_auroc_counts_ties_as_half() -> None:
    labels = np.array([True, True, False, False])
    assert auroc(np.array([3.0, 2.0, 1.0, 0.0]), labels) == 1.0
    assert auroc(np.array([0.0, 1.0, 2.0, 3.0]), labels) == 0.0
    assert auroc(np.array([1.0, 1.0, 1.0, 1.0]), labels) == 0.5
    # positives {2, 1} against negatives {1, 0}: pairs 2>1, 2>0, 1=1 (half), 1>0 -> 3.5 / 4
    assert auroc(np.array([2.0, 1.0, 1.0, 0.0]), labels) == 0.875
    assert auroc(np.array([1.0, 2.0]), np.array([True, True])) is None


def test_routing_trades_success_for_cost_at_a_price() -> None:
    p = np.array([[0.9, 0.95], [0.2, 0.9]])
    mean_cost = np.array([10.0, 100.0])
    assert route(p, mean_cost, 0.0).tolist() == [1, 1]
    # at 0.001 per token the dear team must win 0.09 more: item 0 gains 0.05, item 1 gains 0.7
    assert route(p, mean_cost, 0.001).tolist() == [0, 1]
    assert route(p, mean_cost, 1.0).tolist() == [0, 0]


def test_knn_reads_its_neighbours_outcomes() -> None:
    tasks = ["add apples and pears", "add apples and plums", "divide the cake", "divide the pie"]
    success = np.array([[1.0, 1.0], [1.0, 1.0], [0.0, 1.0], [0.0, 1.0]])
    cost = np.array([[1.0, 5.0]] * 4)
    router = KnnRouter(k=2, prior=0.0).fit(tasks, success, cost)
    p = router.predict(["add apples", "divide the cake into parts"])
    assert p[0].tolist() == [1.0, 1.0]
    assert p[1].tolist() == [0.0, 1.0]
