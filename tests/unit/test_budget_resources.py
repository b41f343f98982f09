"""Budgets on Kubernetes and across runs, without a cluster (issue 47, phase 2): the validation
of ``LemonRun.spec.budget`` and ``LemonBudget`` (the models and the CRDs' schemas), the run
status the operator writes from the service's report, and a shared budget held by hand."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import ValidationError

from lemon.budget import Budget
from lemon.engine.metering import Meter, SharedBudget
from lemon.engine.results import FailureKind
from lemon.pricing import DEFAULT_TIER_PRICES
from lemon.resources import crd
from lemon.resources.lemon_budget import LemonBudgetSpec
from lemon.resources.lemon_run import LemonRunSpec, RunBudget, RunPhase
from lemon_operator.run_plans import Refused, Waiting, namespace_budget, plan_run
from lemon_operator.run_results import ServiceBudget, ServiceRun, budget_status, failure_of


def _run_body(budget: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "r", "namespace": "team", "uid": "u1"},
        "spec": {"task": "2+2?", "budget": budget},
    }


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ({}, "spec.budget: Value error, give at least one of tokens, cost, wallSeconds"),
        ({"tokens": 0}, "spec.budget.tokens: Input should be greater than or equal to 1"),
        ({"cost": 0}, "spec.budget.cost: Input should be greater than 0"),
        ({"wallSeconds": -1}, "spec.budget.wallSeconds: Input should be greater than 0"),
        ({"tokens": 10, "dollars": 3}, "spec.budget.dollars: Extra inputs are not permitted"),
    ],
)
def test_an_invalid_run_budget_is_refused_with_its_field(
    budget: dict[str, Any], message: str
) -> None:
    planned = plan_run(_run_body(budget), source=None, profile_of=lambda _: None)
    assert isinstance(planned, Refused)
    assert planned.reason == "Invalid"
    assert planned.message == message


def test_a_run_budget_becomes_the_cores_budget_named_spec_budget() -> None:
    run = LemonRunSpec.model_validate({"task": "t", "budget": {"tokens": 2000, "wallSeconds": 60}})
    assert run.budget is not None
    budget = run.budget.budget()
    assert budget == Budget(tokens=2000, wall_s=60.0, source="spec.budget")
    assert budget.label() == "spec.budget tokens=2000,wall=60s"


def test_the_crds_check_the_budgets_minimums() -> None:
    run = crd("LemonRun")["spec"]["versions"][0]
    schema = run["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["budget"]
    assert schema["minProperties"] == 1
    assert schema["properties"]["tokens"]["minimum"] == 1
    assert schema["properties"]["cost"] == {
        **schema["properties"]["cost"],
        "minimum": 0,
        "exclusiveMinimum": True,
    }
    columns = [c["name"] for c in run["additionalPrinterColumns"]]
    assert columns == [
        "Phase", "Answer", "Tokens", "Cost (tier-priced tokens)", "Budget", "Spent", "Age"
    ]  # fmt: skip
    budget = crd("LemonBudget")
    assert budget["spec"]["names"]["shortNames"] == ["lbud"]
    assert budget["spec"]["names"]["plural"] == "lemonbudgets"
    spec = budget["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["x-kubernetes-validations"] == [
        {"rule": "has(self.tokens) || has(self.cost)", "message": "give tokens, cost or both"}
    ]
    assert spec["properties"]["windowSeconds"]["minimum"] == 1


def test_a_lemon_budget_needs_a_limit() -> None:
    with pytest.raises(ValidationError, match="give tokens, cost or both"):
        LemonBudgetSpec.model_validate({"windowSeconds": 60})
    assert LemonBudgetSpec.model_validate({"cost": 5}).window_seconds == 3600


def _budget_body(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team"}, "spec": spec}


def test_a_namespace_has_at_most_one_budget_and_an_invalid_one_holds_its_runs() -> None:
    assert namespace_budget([]) is None
    one = namespace_budget([_budget_body("tenant", {"tokens": 500, "windowSeconds": 60})])
    assert not isinstance(one, Waiting)
    assert one is not None
    assert (one.name, one.tokens, one.cost, one.window_s) == (
        "LemonBudget team/tenant",
        500,
        None,
        60,
    )
    two = namespace_budget([_budget_body("b", {"tokens": 1}), _budget_body("a", {"cost": 1})])
    assert isinstance(two, Waiting)
    assert two.reason == "NamespaceBudgetAmbiguous"
    assert "a, b" in two.message
    bad = namespace_budget([_budget_body("tenant", {"tokens": -3})])
    assert isinstance(bad, Waiting)
    assert bad.reason == "NamespaceBudgetInvalid"
    assert "spec.tokens: Input should be greater than or equal to 1" in bad.message


def _failed(budget: ServiceBudget) -> ServiceRun:
    return ServiceRun(
        run_id="u1",
        phase=RunPhase.FAILED,
        failure=FailureKind.BUDGET_EXCEEDED,
        error="output agent 'solver' skipped: ...",
        budget=budget,
    )


@pytest.mark.parametrize(
    ("stopped_by", "reason"),
    [
        ("Run", "BudgetExceeded"),
        ("Namespace", "NamespaceBudgetExceeded"),
        ("Refused", "BudgetRefused"),
    ],
)
def test_the_reason_says_which_budget_stopped_the_run(stopped_by: Any, reason: str) -> None:
    run = _failed(ServiceBudget(limits=RunBudget(tokens=20), reason="x", stopped_by=stopped_by))
    failure = failure_of(run)
    assert failure is not None
    assert failure.reason == reason
    if stopped_by == "Refused":
        assert failure.message.startswith("spec.budget tokens=20 refused: ")


def test_the_run_status_shows_budget_spent_remaining_and_the_namespace() -> None:
    status = budget_status(
        ServiceBudget(
            limits=RunBudget(tokens=2000, cost=800),
            spent_tokens=81,
            spent_cost=40.5,
            wall_s=0.25,
            namespace_budget="LemonBudget team/tenant (tokens=5000 per 3600 s)",
        )
    )
    assert status.text == "tokens=2000,cost=800 + LemonBudget team/tenant"
    assert status.spent_text == "81 tokens, 40.5 tier-priced tokens"
    assert status.remaining is not None
    assert (status.remaining.tokens, status.remaining.cost) == (1919, 759.5)
    assert status.reason is None
    only_shared = budget_status(ServiceBudget(spent_tokens=3, namespace_budget="LemonBudget t/x"))
    assert only_shared.text == "LemonBudget t/x"
    assert only_shared.remaining is None


def test_runs_on_one_shared_budget_never_hold_or_spend_past_it() -> None:
    """Three meters (three runs) on one shared budget of 100 tokens, each asking at once for a
    10-token prompt and 40 completion tokens and spending 10 + 20 (the third all 30 it gets).
    By hand: the first two hold 50 each (100); the third waits; after the first settles (30
    spent, 50 held) 20 are left, less than it asks and a call is in flight: it waits again;
    after the second (60 spent) 40 are left and nothing is in flight: it is cut to 30."""
    now = [1000.0]
    shared = SharedBudget("LemonBudget t/x", tokens=100, window_s=60, clock=lambda: now[0])
    meters = [Meter(None, DEFAULT_TIER_PRICES, shared=shared) for _ in range(3)]
    peak = [0]

    async def go() -> list[tuple[int, bool]]:
        async def call(meter: Meter, spends: int) -> tuple[int, bool]:
            grant = await meter.reserve("medium", prompt_tokens=10, wanted=40)
            assert grant is not None
            peak[0] = max(peak[0], shared.spent_tokens + shared.held_tokens)
            await asyncio.sleep(0)
            meter.settle(grant, prompt_tokens=10, completion_tokens=min(spends, grant.max_tokens))
            return grant.max_tokens, grant.cut

        return list(
            await asyncio.gather(*(call(m, s) for m, s in zip(meters, (20, 20, 40), strict=True)))
        )

    assert asyncio.run(go()) == [(40, False), (40, False), (30, True)]
    assert peak[0] == 100
    assert shared.spent_tokens == 100
    assert shared.remaining() == (0, None)
    assert meters[2].binding("medium") == "shared"
    assert (shared.runs, shared.held_tokens, shared.in_flight) == (3, 0, 0)
    now[0] += 60  # the next window: what was spent is forgotten
    assert shared.remaining() == (100, None)
    assert shared.runs == 0


def test_a_shared_budget_stops_a_run_with_its_own_reason() -> None:
    """The executor on the scripted double: a run drawing from a spent shared budget starts no
    agent, fails budget_exceeded, and says the namespace's budget stopped it."""
    from lemon.capacity import BUILTIN_PROFILES, build_backends
    from lemon.engine.executor import ExecutionOptions, execute
    from lemon.spec import parse_spec

    parsed = parse_spec(
        "agents:\n  - {name: solo, role: math_solver, capacity: small}\n", source="s"
    )
    shared = SharedBudget("LemonBudget t/x", tokens=5, window_s=60)

    async def go() -> Any:
        backends = build_backends(BUILTIN_PROFILES["scripted"])
        return await execute(
            parsed.spec,
            task="2+2?",
            backends=backends,
            options=ExecutionOptions(shared_budget=shared),
        )

    result = asyncio.run(go())
    assert result.failure is FailureKind.BUDGET_EXCEEDED
    assert result.agents[0].status.value == "skipped"
    assert result.budget is not None
    assert result.budget.scope == "shared"
    assert result.budget.budget is None
    assert "namespace budget LemonBudget t/x (tokens=5 per 60 s) spent" in (
        result.budget.reason or ""
    )
    assert result.budget.shared == "LemonBudget t/x (tokens=5 per 60 s)"
    assert shared.stopped == 1
