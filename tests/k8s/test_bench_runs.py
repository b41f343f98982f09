"""``lemon bench runs`` runs end to end (tiny sizes) and prints the documented keys."""

from __future__ import annotations

import json
import subprocess

from tests.conftest import LEMON, ROOT


def test_bench_runs_prints_its_figures() -> None:
    proc = subprocess.run(
        [str(LEMON), "bench", "runs", "--json", "--runs", "5", "--agents", "2", "--faults", "1"],
        capture_output=True, text=True, cwd=ROOT, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for key in ("burst_s", "p99_overhead_s", "lost", "duplicated", "grpc_burst_s", "ratio"):
        assert key in result, key
    assert result["burst_s"] > 0
    assert result["p50_overhead_s"] <= result["p99_overhead_s"]
    assert result["lost"] == result["duplicated"] == result["failed"] == 0
    assert result["tier_calls"] == result["expected_tier_calls"] == 10
    faults = result["faults"]  # one more burst, the service and the operator SIGKILLed in it
    assert faults["journal"] is True
    assert faults["runs"] == 5
    assert faults["lost"] == faults["duplicated"] == faults["repeat_calls"] == 0
    assert set(faults["failed_reasons"]) <= {"Interrupted"}
    assert faults["failed"] == sum(faults["failed_reasons"].values())
    assert 0 < faults["distinct_tier_calls"] <= faults["expected_tier_calls_at_most"] == 10
    (round_,) = faults["per_round"]
    assert set(round_["killed_at_s"]) == {"service", "operator"}
