"""The main job end to end on the packaged model: `lemon run` with the embedded profile."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_lemon

pytestmark = pytest.mark.model


@pytest.mark.timeout(1200)  # three model loads; minutes on a busy machine
def test_lemon_run_on_the_embedded_default_runs_three_models() -> None:
    """The README's first command: a maths team on three real capacity tiers."""
    result = run_lemon("run", "--json", "--max-tokens", "24", timeout=900)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "succeeded"
    assert data["answer"]
    agents = {a["name"]: a for a in data["agents"]}
    assert [(a["name"], a["capacity"]) for a in data["agents"]] == [
        ("planner", "small"),
        ("solver", "medium"),
        ("verifier", "large"),
    ]
    assert [agents[n]["model"] for n in ("planner", "solver", "verifier")] == [
        "llamacpp:smollm2-135m-instruct",
        "llamacpp:qwen2.5-coder-0.5b-instruct",
        "llamacpp:qwen2.5-coder-1.5b-instruct",
    ]
    for tier, title in (
        ("small", "SmolLM2-135M-Instruct"),
        ("medium", "Qwen2.5-Coder-0.5B-Instruct"),
        ("large", "Qwen2.5-Coder-1.5B-Instruct"),
    ):
        assert f"{tier}: {title}" in data["profile_note"]
    for agent in data["agents"]:
        assert agent["status"] == "succeeded"
        assert 0 < agent["completion_tokens"] <= 24
        assert agent["prompt_tokens"] > 50
    # the verifier reads both the planner's and the solver's work, so its prompt is the longest
    assert agents["verifier"]["prompt_tokens"] > agents["planner"]["prompt_tokens"]
    assert data["sample"]["id"] == "gsm8k-train:0"


def test_lemon_run_on_the_tiny_profile_is_one_model() -> None:
    result = run_lemon("run", "--profile", "tiny", "--json", "--max-tokens", "16", timeout=600)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "succeeded"
    assert "all tiers (small, medium, large) run SmolLM2-135M-Instruct" in data["profile_note"]
    assert {a["model"] for a in data["agents"]} == {"llamacpp:smollm2-135m-instruct"}


def test_hub_profile_without_a_hub_fails_clearly() -> None:
    """No hub here: the run ends failed with the loader's reason, never a hang or traceback."""
    result = run_lemon(
        *("run", "--profile", "hub", "--json", "--max-tokens", "4"),
        env={"HF_HUB_OFFLINE": "1"},
        timeout=300,
    )
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert data["status"] == "failed"
    planner = data["agents"][0]
    assert planner["status"] == "failed"
    assert "cannot load model HuggingFaceTB/SmolLM2-135M-Instruct" in planner["error"]
    assert [a["status"] for a in data["agents"][1:]] == ["skipped", "skipped"]
    assert "Traceback" not in result.stderr
