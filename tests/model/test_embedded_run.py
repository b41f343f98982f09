"""The main job end to end on the packaged model: `lemon run` with the embedded profile."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_lemon

pytestmark = pytest.mark.model


MODELS = {
    "small": "llamacpp:smollm2-135m-instruct",
    "medium": "llamacpp:qwen2.5-coder-0.5b-instruct",
    "large": "llamacpp:qwen2.5-coder-1.5b-instruct",
}


def _default_team() -> list[tuple[str, str]]:
    """The team `lemon run` writes by default for a maths task: the shipped table choice."""
    from lemon.policy.fixed import BestTeamPolicy
    from lemon.tasks import TaskKind

    return [(a.name, a.capacity.value) for a in BestTeamPolicy().spec(TaskKind.MATH).agents]


@pytest.mark.timeout(1200)  # model loads; minutes on a busy machine
def test_lemon_run_on_the_embedded_default_runs_the_best_fixed_team() -> None:
    """The README's first command: the table's best maths team on the real tiers, scored."""
    result = run_lemon("run", "--json", "--max-tokens", "160", timeout=900)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "succeeded"
    assert data["answer"]
    assert [(a["name"], a["capacity"]) for a in data["agents"]] == _default_team()
    for tier, title in (
        ("small", "SmolLM2-135M-Instruct"),
        ("medium", "Qwen2.5-Coder-0.5B-Instruct"),
        ("large", "Qwen2.5-Coder-1.5B-Instruct"),
    ):
        assert f"{tier}: {title}" in data["profile_note"]
    models = [a for a in data["agents"] if not a["model"].startswith("tool:")]
    assert models, data["agents"]  # the team has at least one model agent
    for agent in models:
        assert agent["status"] == "succeeded"
        assert agent["model"] == MODELS[agent["capacity"]]
        assert 0 < agent["completion_tokens"] <= 160
        assert agent["prompt_tokens"] > 50
    assert data["sample"]["id"] == "gsm8k-train:0"
    assert data["spec_origin"].startswith("best fixed team for math tasks")


@pytest.mark.timeout(1200)  # three model loads; minutes on a busy machine
def test_lemon_run_template_baseline_runs_three_models() -> None:
    """`--baseline template`: planner, solver and verifier, one on each real capacity tier."""
    result = run_lemon(
        *("run", "--baseline", "template", "--json", "--max-tokens", "24"), timeout=900
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "succeeded"
    agents = {a["name"]: a for a in data["agents"]}
    assert [(a["name"], a["capacity"]) for a in data["agents"]] == [
        ("planner", "small"),
        ("solver", "medium"),
        ("verifier", "large"),
    ]
    assert [agents[n]["model"] for n in ("planner", "solver", "verifier")] == [
        MODELS["small"],
        MODELS["medium"],
        MODELS["large"],
    ]
    for agent in data["agents"]:
        assert agent["status"] == "succeeded"
        assert 0 < agent["completion_tokens"] <= 24
    # the verifier reads both the planner's and the solver's work, so its prompt is the longest
    assert agents["verifier"]["prompt_tokens"] > agents["planner"]["prompt_tokens"]


def test_lemon_run_on_the_tiny_profile_is_one_model() -> None:
    result = run_lemon("run", "--profile", "tiny", "--json", "--max-tokens", "16", timeout=600)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "succeeded"
    assert "all tiers (small, medium, large) run SmolLM2-135M-Instruct" in data["profile_note"]
    models = {a["model"] for a in data["agents"] if not a["model"].startswith("tool:")}
    assert models == {"llamacpp:smollm2-135m-instruct"}


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
    first = data["agents"][0]  # the default team's first agent, on its tier's hub model
    assert first["status"] == "failed"
    assert first["model"].startswith("local:HuggingFaceTB/"), first["model"]
    hub_id = first["model"].removeprefix("local:").split("@")[0]
    assert f"cannot load model {hub_id}" in first["error"]
    # whatever the default team is, nothing after the failed agent ran
    assert all(a["status"] == "skipped" for a in data["agents"][1:]), data["agents"]
    assert "Traceback" not in result.stderr
