"""`lemon run --budget` on the embedded tiers (issue 47): a budget below the default team's
measured cost (no more than one large agent's) gives a cheaper team that says so, or a clear
refusal; the run never spends past the budget."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_lemon

pytestmark = pytest.mark.model


@pytest.mark.timeout(1500)  # a model load and a team's calls; minutes on a busy machine
def test_a_budget_below_the_default_team_runs_a_cheaper_team_on_the_embedded_tiers() -> None:
    from lemon.policy.fixed import best_teams

    choice = best_teams()["math"]
    assert choice["cost"] <= choice["large_cost"]  # the default is no dearer than one large agent
    limit = int(choice["cost"]) - 1  # below the default team's mean: it does not fit
    budget = f"cost={limit}"
    refused = run_lemon("run", "--json", "--budget", budget, timeout=300)
    assert refused.returncode == 1
    assert f"--budget {budget}" in json.loads(refused.stdout)["error"]

    result = run_lemon("run", "--json", "--budget", budget, "--budget-fallback", timeout=1200)
    data = json.loads(result.stdout)
    assert data["spec_origin"].startswith(f"best fixed team within --budget {budget} for math")
    assert choice["team"] not in data["spec_origin"].split(":")[1]  # another team than the default
    assert data["budget"]["estimate"]["source"] == "table"
    assert data["budget"]["estimate"]["cost"] <= limit
    assert data["budget"]["spent"]["cost"] <= limit  # held to it, whatever the item asked
    assert data["budget"]["spent"]["tokens"] == data["tokens"]["total"]
    if data["status"] == "succeeded":
        assert result.returncode == 0
        assert data["answer"]
    else:  # an item dearer than the team's mean: stopped by the budget, and saying so
        assert data["failure"] == "budget_exceeded", data["error"]
        assert data["budget"]["reason"]
