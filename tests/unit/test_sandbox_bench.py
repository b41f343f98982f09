"""``lemon bench sandbox`` runs: every canonical HumanEval solution passes on both sides.

No timing is asserted here (the figures depend on the machine); the benchmark reports them.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_lemon


def test_bench_sandbox_reports_both_sides() -> None:
    result = run_lemon("bench", "sandbox", "--json", "--rounds", "1")
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads(result.stdout)
    assert data["benchmark"] == "sandbox"
    assert data["programs"] == 164
    assert data["sandbox_passed"] == [164]
    assert data["harness_passed"] == [164]
    assert data["all_passed"] is True
    assert data["ratio"] > 0
    assert data["ratio"] == pytest.approx(data["sandbox_s"] / data["harness_s"], abs=0.002)
