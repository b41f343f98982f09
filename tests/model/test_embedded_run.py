"""The main job end to end on the packaged model: `lemon run` with the embedded profile."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_lemon

pytestmark = pytest.mark.model


def test_lemon_run_on_the_embedded_model() -> None:
    result = run_lemon("run", "--json", "--max-tokens", "24")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "succeeded"
    assert data["answer"]
    assert (
        "all tiers (small, medium, large) run in-process SmolLM2-135M-Instruct"
        in data["profile_note"]
    )
    assert [a["name"] for a in data["agents"]] == ["planner", "solver", "verifier"]
    for agent in data["agents"]:
        assert agent["status"] == "succeeded"
        assert 0 < agent["completion_tokens"] <= 24
        assert agent["prompt_tokens"] > 50
    # the verifier reads both the planner's and the solver's work, so its prompt is the longest
    assert data["agents"][2]["prompt_tokens"] > data["agents"][0]["prompt_tokens"]
