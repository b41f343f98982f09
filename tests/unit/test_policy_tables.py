"""experiments/policy-tables/policy_tables.py's paired difference, by hand on small evaluations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import policy_tables


def _run(directory: Path, correct: dict[str, bool]) -> Path:
    directory.mkdir()
    lines = [json.dumps({"id": item, "correct": ok}) for item, ok in correct.items()]
    (directory / "items.jsonl").write_text("\n".join(lines) + "\n")
    return directory


def test_paired_difference_on_shared_items_only(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", {"x": True, "y": True, "z": False, "only-a": True})
    b = _run(tmp_path / "b", {"x": False, "y": True, "z": False, "only-b": False})
    got = policy_tables.paired(a, b)
    assert got["n"] == 3
    assert got["diff"] == pytest.approx(1 / 3, abs=1e-4)
    lo, hi = got["ci95"]
    # resamples of the differences (1, 0, 0): a mean of 0 has chance 8/27 and of 1 has 1/27,
    # both above 2.5%, so the percentile interval spans them
    assert (lo, hi) == (0.0, 1.0)


def test_identical_differences_have_a_point_interval(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", {str(i): True for i in range(5)})
    b = _run(tmp_path / "b", {str(i): False for i in range(5)})
    assert policy_tables.paired(a, b) == {"n": 5, "diff": 1.0, "ci95": [1.0, 1.0]}
    assert policy_tables.paired(b, a)["ci95"] == [-1.0, -1.0]


def test_evaluations_with_no_shared_item_are_refused(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", {"x": True})
    b = _run(tmp_path / "b", {"y": True})
    with pytest.raises(ValueError, match="share no item"):
        policy_tables.paired(a, b)
