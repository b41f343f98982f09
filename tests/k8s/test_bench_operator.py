"""``lemon bench operator`` runs end to end (tiny sizes) and prints the documented keys."""

from __future__ import annotations

import json

from tests.conftest import run_lemon


def test_bench_operator_prints_its_figures() -> None:
    proc = run_lemon("bench", "operator", "--json", "--repeats", "2", "--burst", "5")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for key in ("p50_s", "p99_s", "burst_s", "ready_p50_s", "burst_validated_s"):
        assert result[key] > 0, key
    assert result["p50_s"] <= result["p99_s"]
    assert result["burst"] == 5
