"""experiments/difficulty-probe/difficulty_probe.py: the probe and the bucket analysis, on
made-up features and on the shipped SVAMP tables (no model: the hidden-state probes run only
from the command)."""

from __future__ import annotations

import json

import numpy as np

import difficulty_probe as probe_module
from tests.conftest import ROOT


def test_numbers_are_counted_as_the_surface_feature_reads_them() -> None:
    assert probe_module._numbers("Jo had 3 apples and 4.5 pears, then 10 more.") == 3
    assert probe_module._numbers("no digits here") == 0


def test_the_probe_finds_a_signal_that_is_there_and_its_control_does_not() -> None:
    rng = np.random.default_rng(0)
    train_y = (rng.random(200) < 0.5).astype(np.float64)
    test_y = (rng.random(200) < 0.5).astype(np.float64)
    train_x = np.c_[train_y + rng.normal(0, 0.5, 200), rng.normal(0, 1, (200, 3))]
    test_x = np.c_[test_y + rng.normal(0, 0.5, 200), rng.normal(0, 1, (200, 3))]
    found = probe_module.probe(train_x, train_y, test_x, test_y)
    assert found["auroc"] > 0.85
    lo, hi = found["auroc_ci95"]
    assert lo <= found["auroc"] <= hi
    assert found["shuffled_auroc"] < 0.7
    # noise features only: nothing to find
    blind = probe_module.probe(train_x[:, 1:], train_y, test_x[:, 1:], test_y)
    assert blind["auroc"] < 0.65


def test_the_shipped_bucket_analysis_rebuilds_from_the_tables() -> None:
    shipped = json.loads((ROOT / "experiments/difficulty-probe/svamp.json").read_text())
    rebuilt = json.loads(json.dumps(probe_module.by_numbers("svamp")))
    assert rebuilt == shipped["by_numbers"]
    # the README's claim: fitted on the train buckets, every bucket goes to one team
    assert set(rebuilt["router_from_train"]["teams"].values()) == {"pot-large"}
    assert rebuilt["router_from_train"]["hull_diff"] == 0.0
