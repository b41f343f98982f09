"""`lemon bench tiers` end to end on the three real tiers (short, without the slow reference)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_lemon

pytestmark = pytest.mark.model


@pytest.mark.timeout(1800)  # three model loads and 27 requests; minutes on a busy machine
def test_bench_tiers_reports_every_tier() -> None:
    result = run_lemon(
        *("bench", "tiers", "--json", "--max-tokens", "6", "--rounds", "1", "--threads", "1"),
        "--no-transformers",
        timeout=1800,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert list(data["tiers"]) == ["small", "medium", "large"]
    assert [t["model"].split(" ")[0] for t in data["tiers"].values()] == [
        "SmolLM2-135M-Instruct",
        "Qwen2.5-Coder-0.5B-Instruct",
        "Qwen2.5-Coder-1.5B-Instruct",
    ]
    for tier in data["tiers"].values():
        assert tier["single_tokens_per_s"] > 0
        assert tier["aggregate_tokens_per_s"] > 0
        assert tier["most_sequences_in_one_step"] == 8  # the 8 requests shared decode steps
        assert tier["completion_tokens"]["concurrent"] == [6] * 8
    assert data["concurrency_gain"] == data["tiers"]["large"]["concurrency_gain"]
    assert "ratio" not in data  # no reference measured, so no ratio claimed
