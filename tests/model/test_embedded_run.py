"""The main job end to end on the packaged model: `lemon run` with the embedded profile."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_lemon

pytestmark = pytest.mark.model


def test_lemon_run_on_the_embedded_model() -> None:
    result = run_lemon("run", "--json", "--max-tokens", "24", timeout=600)
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


def test_hub_profile_without_a_hub_fails_clearly() -> None:
    """No hub here: the run ends failed with the loader's reason, never a hang or traceback."""
    import os
    import subprocess

    from tests.conftest import LEMON, ROOT

    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [str(LEMON), "run", "--profile", "hub", "--json", "--max-tokens", "4"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert data["status"] == "failed"
    planner = data["agents"][0]
    assert planner["status"] == "failed"
    assert "cannot load model HuggingFaceTB/SmolLM2-135M-Instruct" in planner["error"]
    assert [a["status"] for a in data["agents"][1:]] == ["skipped", "skipped"]
    assert "Traceback" not in result.stderr
