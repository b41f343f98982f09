"""Run budgets (issue 47): parsing, the estimate before the run, the accounting during it, and
``lemon run --budget``; every figure is computed here by hand from the scripted double's rules
(it counts whitespace-separated words as tokens) and a table summary written by the test."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from lemon.backends.base import Decoding, Generation, GenerationRequest, Message
from lemon.backends.scripted import ScriptedBackend, ScriptedConfig, ScriptedRule
from lemon.budget import (
    PROMPT_ALLOWANCE,
    Budget,
    BudgetError,
    BudgetRefused,
    parse_budget,
)
from lemon.engine import AgentStatus, ExecutionOptions, RunStatus, execute
from lemon.engine.executor import build_request
from lemon.engine.metering import Meter
from lemon.engine.results import FailureKind
from lemon.events import TraceWriter
from lemon.policy import estimates
from lemon.policy.columns import column
from lemon.pricing import DEFAULT_TIER_PRICES, TierPrices
from lemon.spec import Capacity, default_roles, format_spec, parse_spec
from lemon.tasks import TaskKind
from tests.conftest import run_lemon

TASK = "What is 6 * 7?"
PRICES = TierPrices(small=0.5, medium=1.0, large=3.0)


# -- parsing ---------------------------------------------------------------------------------


def test_parse_budget_reads_every_field_and_unit() -> None:
    budget = parse_budget("tokens=2k,cost=800,wall=2m")
    assert (budget.tokens, budget.cost, budget.wall_s) == (2000, 800.0, 120.0)
    assert parse_budget("wall=90").wall_s == 90.0
    assert parse_budget(" cost = 1.5k ").cost == 1500.0
    assert budget.text() == "tokens=2000,cost=800,wall=120s"
    assert parse_budget(budget.text()) == budget
    assert budget.describe() == "2000 worker tokens, 800 tier-priced tokens, 120 s wall time"
    assert Budget.from_mapping({"tokens": 50, "wall": "1h"}).wall_s == 3600.0


@pytest.mark.parametrize(
    ("text", "field", "says"),
    [
        ("tokens=0", "tokens", "must be a positive number, got 0"),
        ("cost=-5", "cost", "must be a positive number, got -5"),
        ("wall=0s", "wall", "must be a positive number"),
        ("cost=abc", "cost", "'abc' is not a number"),
        ("wall=5 parsecs", "wall", "units: 's', 'm', 'min', 'h'"),
        ("tokens=1.5", "tokens", "not a whole number"),
        ("dollars=3", "dollars", "unknown field"),
        ("tokens=5,tokens=6", "tokens", "given twice"),
    ],
)
def test_bad_budgets_name_their_field(text: str, field: str, says: str) -> None:
    with pytest.raises(BudgetError) as caught:
        parse_budget(text)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"--budget {field}: ")
    assert says in str(caught.value)


@pytest.mark.parametrize("text", ["", "tokens", "tokens=5,", "cost=5,,wall=3"])
def test_malformed_budgets_say_the_form(text: str) -> None:
    with pytest.raises(BudgetError, match=r"^--budget: "):
        parse_budget(text)


def test_a_budget_needs_a_limit_and_the_mapping_form_checks_too() -> None:
    with pytest.raises(BudgetError, match="at least one of tokens, cost, wall"):
        Budget()
    with pytest.raises(BudgetError, match=r"^spec\.budget tokens: must be a positive"):
        Budget.from_mapping({"tokens": -1}, source="spec.budget")
    with pytest.raises(BudgetError, match=r"^budget cost: True is not a number"):
        Budget.from_mapping({"cost": True})


# -- the estimate before the run -------------------------------------------------------------

TEAMS = {
    # name: (complete, accuracy, mean worker tokens, mean priced)
    "single-small": (True, 0.02, 300.0, 82.0),
    "pot-medium": (True, 0.50, 140.0, 140.0),
    "single-medium": (True, 0.40, 320.0, 320.0),
    "pot-large": (True, 0.73, 140.0, 437.0),
    "single-large": (True, 0.69, 320.0, 1000.0),
    "plan-medium-medium": (False, 0.90, 600.0, 600.0),  # not complete: never chosen
}


def write_table(
    root: Path, *, prices: TierPrices = DEFAULT_TIER_PRICES, max_tokens: int = 300
) -> Path:
    table = root / "tables" / "svamp-train"
    table.mkdir(parents=True)
    teams = {
        name: {
            "complete": complete,
            "n": 222 if complete else 20,
            "accuracy": accuracy,
            "mean_worker_tokens": tokens,
            "mean_priced": priced,
        }
        for name, (complete, accuracy, tokens, priced) in TEAMS.items()
    }
    summary = {
        "benchmark": "svamp",
        "profile": "embedded-tables",
        "tier_prices": prices.to_json(),
        "worker_max_tokens": max_tokens,
        "teams": teams,
    }
    (table / "summary.json").write_text(json.dumps(summary))
    return root


def test_measured_teams_read_complete_greedy_teams_cheapest_first(tmp_path: Path) -> None:
    root = write_table(tmp_path)
    teams = estimates.measured_teams(TaskKind.MATH, prices=DEFAULT_TIER_PRICES, root=root)
    assert [t.team for t in teams] == [
        "single-small",
        "pot-medium",
        "single-medium",
        "pot-large",
        "single-large",
    ]
    # another kind's table, other prices, no tables: nothing measured
    assert estimates.measured_teams(TaskKind.CODE, prices=DEFAULT_TIER_PRICES, root=root) == []
    assert estimates.measured_teams(TaskKind.MATH, prices=PRICES, root=root) == []
    assert (
        estimates.measured_teams(TaskKind.MATH, prices=DEFAULT_TIER_PRICES, root=tmp_path / "x")
        == []
    )


def test_a_measured_team_is_estimated_from_its_table(tmp_path: Path) -> None:
    root = write_table(tmp_path)
    teams = estimates.measured_teams(TaskKind.MATH, prices=DEFAULT_TIER_PRICES, root=root)
    spec = column("pot-large").spec(TaskKind.MATH)
    found = estimates.estimate_spec(
        spec,
        kind=TaskKind.MATH,
        task=TASK,
        roles=default_roles(),
        prices=DEFAULT_TIER_PRICES,
        max_tokens=300,
        teams=teams,
    )
    assert (found.source, found.tokens, found.cost) == ("table", 140.0, 437.0)
    assert "pot-large" in found.basis
    assert "tables/svamp-train/summary.json" in found.basis
    # the same team asked with another max_tokens than the table's: the upper bound
    other = estimates.estimate_spec(
        spec,
        kind=TaskKind.MATH,
        task=TASK,
        roles=default_roles(),
        prices=DEFAULT_TIER_PRICES,
        max_tokens=100,
        teams=teams,
    )
    assert other.source == "upper_bound"


def test_the_upper_bound_by_hand() -> None:
    spec = parse_spec(
        "agents:\n"
        "  - {name: plan, role: planner, capacity: small}\n"
        "  - {name: solve, role: math_solver, capacity: large, depends_on: [plan]}\n"
        "  - {name: run, role: python_executor, capacity: small, depends_on: [solve]}\n"
    ).spec
    roles = default_roles()
    plan_prompt = len(roles["planner"].render(task=TASK).encode()) + PROMPT_ALLOWANCE
    header = len(b"--- plan (planner) ---\n")
    solve_prompt = len(roles["math_solver"].render(task=TASK).encode()) + PROMPT_ALLOWANCE
    solve_prompt += 100 + header  # its input: the planner's answer, at most max_tokens
    bound = estimates.upper_bound(spec, task=TASK, roles=roles, prices=PRICES, max_tokens=100)
    assert bound.source == "upper_bound"
    # the python_executor is a tool: no tokens
    assert bound.tokens == plan_prompt + 100 + solve_prompt + 100
    assert bound.cost == pytest.approx(0.5 * (plan_prompt + 100) + 3.0 * (solve_prompt + 100))


def fit(root: Path, team: str, budget: str, *, fallback: bool) -> estimates.BudgetFit:
    spec = column(team).spec(TaskKind.MATH)
    return estimates.fit_budget(
        spec,
        output=spec.output,
        kind=TaskKind.MATH,
        task=TASK,
        budget=parse_budget(budget),
        fallback=fallback,
        roles=default_roles(),
        prices=DEFAULT_TIER_PRICES,
        max_tokens=300,
        root=root,
    )


def test_a_spec_that_fits_is_kept(tmp_path: Path) -> None:
    kept = fit(write_table(tmp_path), "pot-large", "cost=437,tokens=140", fallback=False)
    assert kept.origin is None
    assert kept.replaced is None
    assert kept.estimate.cost == 437.0


def test_a_spec_that_does_not_fit_is_refused_naming_the_budget(tmp_path: Path) -> None:
    with pytest.raises(BudgetRefused) as caught:
        fit(write_table(tmp_path), "pot-large", "cost=436", fallback=False)
    reason = caught.value.reason
    assert reason.startswith("the spec's estimate exceeds --budget cost=436: cost: estimated 437")
    assert "it would run pot-medium" in reason  # the best team within 436
    assert caught.value.to_json()["failure"] == "budget_exceeded"


def test_the_fallback_runs_the_best_team_within_the_budget(tmp_path: Path) -> None:
    root = write_table(tmp_path)
    # within 436: single-small (R 0.02), pot-medium (0.50) and single-medium (0.40) fit; the
    # reward's token term (0.05 per 1000) and agent term leave pot-medium the best
    chosen = fit(root, "pot-large", "cost=436", fallback=True)
    assert format_spec(chosen.spec) == format_spec(column("pot-medium").spec(TaskKind.MATH))
    assert chosen.origin is not None
    assert chosen.origin.startswith(
        "best fixed team within --budget cost=436 for math tasks: pot-medium"
    )
    assert chosen.estimate.source == "table"
    assert chosen.estimate.cost == 140.0
    assert chosen.replaced is not None
    assert "estimated 437" in chosen.replaced
    # 200 worker tokens: the single solvers' 300 and more do not fit, both pot teams' 140 do,
    # and pot-large's reward is the better
    assert "pot-large" in (fit(root, "single-large", "tokens=200", fallback=True).origin or "")
    # under 140 tier-priced tokens only single-small fits
    assert "single-small" in (fit(root, "pot-large", "cost=100", fallback=True).origin or "")


def test_a_budget_below_the_cheapest_team_is_refused(tmp_path: Path) -> None:
    root = write_table(tmp_path)
    with pytest.raises(BudgetRefused) as caught:
        fit(root, "pot-large", "cost=81", fallback=True)
    assert caught.value.reason.startswith(
        "--budget cost=81 fits no team: cost 81 is below the cheapest team"
    )
    assert "single-small, 82 tier-priced tokens" in caught.value.reason
    with pytest.raises(BudgetRefused, match=r"tokens 139 is below the fewest .* \(pot-medium, 140"):
        fit(root, "pot-large", "tokens=139", fallback=True)
    with pytest.raises(BudgetRefused, match="no team fits it either: cost 81 is below"):
        fit(root, "pot-large", "cost=81", fallback=False)


# -- the accounting during the run -----------------------------------------------------------

CHAIN = """\
agents:
  - {name: plan, role: planner, capacity: small}
  - {name: solve, role: math_solver, capacity: medium, depends_on: [plan]}
  - {name: check, role: verifier, capacity: large, depends_on: [solve]}
"""
LONG = " ".join(f"w{i}" for i in range(500))


def tiers(*rules: ScriptedRule, latency: float = 0.0) -> dict[Capacity, ScriptedBackend]:
    config = ScriptedConfig(latency_s=latency, rules=(*rules, ScriptedRule()))
    return {tier: ScriptedBackend(config, tier=tier.value) for tier in Capacity}


def run(text: str, backends: dict[Capacity, Any], budget: Budget, *, max_tokens: int = 100) -> Any:
    parsed = parse_spec(text)
    options = ExecutionOptions(decoding=Decoding(max_tokens=max_tokens), budget=budget)
    return asyncio.run(
        execute(
            parsed.spec,
            task=TASK,
            backends=backends,
            output=parsed.output,
            options=options,
            tier_prices=PRICES,
            trace=TraceWriter(),
        )
    )


def prompt_words(text: str, agent: str, outputs: dict[str, str]) -> int:
    """The scripted double's count of ``agent``'s prompt, its inputs being ``outputs``."""
    from lemon.engine.results import AgentResult

    parsed = parse_spec(text)
    spec = parsed.spec
    results = {}
    for a in spec.agents:
        results[a.name] = AgentResult(
            a.name, a.role, a.capacity.value, output=outputs.get(a.name, "")
        )
    (target,) = [a for a in spec.agents if a.name == agent]
    request = build_request(
        target,
        spec=spec,
        task=TASK,
        roles=default_roles(),
        results=results,
        options=ExecutionOptions(),
    )
    return len("\n".join(m.content for m in request.messages).split())


ANSWER = "The answer is 42."  # 4 words


def test_a_run_that_fits_spends_what_its_calls_spent() -> None:
    p1 = prompt_words(CHAIN, "plan", {})
    p2 = prompt_words(CHAIN, "solve", {"plan": ANSWER})
    p3 = prompt_words(CHAIN, "check", {"solve": ANSWER})
    spent = p1 + p2 + p3 + 3 * 4
    cost = 0.5 * (p1 + 4) + 1.0 * (p2 + 4) + 3.0 * (p3 + 4)
    # each call must have its 100 tokens' room when it starts: the last needs p3 + 100
    budget = Budget(tokens=p1 + p2 + 8 + p3 + 100, cost=cost + 300)
    result = run(CHAIN, tiers(), budget)
    assert result.status is RunStatus.SUCCEEDED
    assert result.answer == ANSWER
    assert result.budget.tokens == spent == result.tokens()["total"]
    assert result.budget.cost == pytest.approx(cost)
    assert result.budget.reason is None
    payload = result.to_json()["budget"]
    assert payload["limits"] == {"tokens": budget.tokens, "cost": budget.cost, "wall_s": None}
    assert payload["spent"]["tokens"] == spent


def test_no_agent_starts_once_the_budget_is_spent() -> None:
    p1 = prompt_words(CHAIN, "plan", {})
    p2 = prompt_words(CHAIN, "solve", {"plan": ANSWER})
    backends = tiers()
    # the planner's call fits; then p2 tokens are left for the solver's prompt and not one more
    result = run(CHAIN, backends, Budget(tokens=p1 + 4 + p2))
    assert result.status is RunStatus.FAILED
    assert result.failure is FailureKind.BUDGET_EXCEEDED
    plan, solve, check = result.agents
    assert plan.status is AgentStatus.SUCCEEDED
    assert solve.status is AgentStatus.SKIPPED
    assert solve.failure is FailureKind.BUDGET_EXCEEDED
    assert solve.started_s is None
    assert solve.attempts == 0
    assert (solve.error or "").startswith(f"budget tokens={p1 + 4 + p2} spent before the agent")
    assert check.failure is FailureKind.DEPENDENCY
    assert backends[Capacity.MEDIUM].calls == 0
    assert backends[Capacity.LARGE].calls == 0
    assert result.budget.tokens == p1 + 4
    assert "agent 'solve' not started" in (result.budget.reason or "")
    assert result.answer is None


def test_an_answer_cut_by_the_budget_fails_with_its_partial_output() -> None:
    """A tier that answers long: the solver's max_tokens is cut to what is left, the double
    stops there, and the run fails for its budget with the partial answer in the trace."""
    p1 = prompt_words(CHAIN, "plan", {})
    p2 = prompt_words(CHAIN, "solve", {"plan": ANSWER})
    backends = tiers(ScriptedRule(match="careful mathematician", output=LONG))
    budget = Budget(tokens=p1 + 4 + p2 + 30)
    trace = TraceWriter()
    parsed = parse_spec(CHAIN)
    result = asyncio.run(
        execute(
            parsed.spec,
            task=TASK,
            backends=backends,
            options=ExecutionOptions(decoding=Decoding(max_tokens=100), budget=budget),
            tier_prices=PRICES,
            trace=trace,
        )
    )
    assert backends[Capacity.MEDIUM].requests[-1].decoding.max_tokens == 30
    _, solve, check = result.agents
    assert solve.status is AgentStatus.FAILED
    assert solve.failure is FailureKind.BUDGET_EXCEEDED
    assert solve.output == " ".join(LONG.split()[:30])
    assert solve.finish_reason == "length"
    assert "answer cut at 30 completion tokens by the budget" in (solve.error or "")
    assert check.status is AgentStatus.SKIPPED
    assert backends[Capacity.LARGE].calls == 0
    assert result.status is RunStatus.FAILED
    assert result.answer is None
    assert result.failure is FailureKind.BUDGET_EXCEEDED
    assert result.budget.tokens == budget.tokens == result.tokens()["total"]  # exactly spent
    finished = [e for e in trace.events if getattr(e, "agent", None) == "solve"]
    assert any(getattr(e, "output", "") == solve.output for e in finished)  # in the trace


def test_a_cost_budget_cuts_by_the_tier_price() -> None:
    """On the large tier (price 3) a cost left of 3 * (prompt + 10) + 2 allows 10 tokens."""
    spec = "agents:\n  - {name: solo, role: math_solver, capacity: large}\n"
    p = prompt_words(spec, "solo", {})
    backends = tiers(ScriptedRule(match="", output=LONG))
    result = run(spec, backends, Budget(cost=3.0 * (p + 10) + 2))
    assert backends[Capacity.LARGE].requests[-1].decoding.max_tokens == 10
    assert result.failure is FailureKind.BUDGET_EXCEEDED
    assert result.budget.cost == pytest.approx(3.0 * (p + 10))


def test_concurrent_agents_never_hold_more_than_the_budget() -> None:
    """Six agents ready at once, each answering long (the double stops at max_tokens 40): the
    tier is never asked for more than the budget, summed over every call it received."""
    solvers = [f"s{i}" for i in range(6)]
    text = "agents:\n" + "".join(
        f"  - {{name: {s}, role: math_solver, capacity: medium}}\n" for s in solvers
    )
    text += (
        f"  - {{name: vote, role: voter, capacity: small, depends_on: [{', '.join(solvers)}]}}\n"
    )
    p = prompt_words(text, "s0", {})
    backends = tiers(ScriptedRule(match="", output=LONG, latency_s=0.02))
    budget = Budget(tokens=3 * (p + 40) + p + 15)  # three whole calls, a fourth cut to 15
    result = run(text, backends, budget, max_tokens=40)
    asked = sum(
        len("\n".join(m.content for m in r.messages).split()) + r.decoding.max_tokens
        for r in backends[Capacity.MEDIUM].requests
    )
    assert asked <= budget.tokens
    assert result.budget.tokens == result.tokens()["total"] <= budget.tokens
    assert sorted(r.decoding.max_tokens for r in backends[Capacity.MEDIUM].requests) == [
        15,
        40,
        40,
        40,
    ]
    statuses = [a.failure for a in result.agents[:6]]
    assert statuses.count(None) == 3
    assert statuses.count(FailureKind.BUDGET_EXCEEDED) == 3  # one cut, two never started
    assert result.failure is FailureKind.BUDGET_EXCEEDED


def test_the_meter_waits_for_calls_in_flight_before_cutting() -> None:
    """A hold that does not fit while another call is in flight waits for it to settle: the
    first call spends 10 of its 60, so the second gets its whole 60."""

    async def scenario() -> tuple[int, int]:
        meter = Meter(Budget(tokens=100), PRICES)
        first = await meter.reserve("medium", prompt_tokens=0, wanted=60)
        assert first is not None
        waiting = asyncio.ensure_future(meter.reserve("medium", prompt_tokens=0, wanted=60))
        await asyncio.sleep(0)
        assert not waiting.done()  # 40 left: it waits rather than take a cut
        meter.settle(first, completion_tokens=10)
        second = await waiting
        assert second is not None
        return second.max_tokens, meter.held_tokens

    assert asyncio.run(scenario()) == (60, 60)


class IgnoresMaxTokens(ScriptedBackend):
    """A tier that answers 500 tokens whatever it is asked (a server that ignores max_tokens)."""

    async def generate(self, request: GenerationRequest) -> Generation:
        self.calls += 1
        return Generation(LONG, len(request.messages[0].content.split()), 500)


def test_a_tier_that_overspends_fails_the_run_and_is_charged_what_it_reported() -> None:
    spec = "agents:\n  - {name: solo, role: math_solver, capacity: medium}\n"
    p = prompt_words(spec, "solo", {})
    backends = {tier: IgnoresMaxTokens(tier=tier.value) for tier in Capacity}
    result = run(spec, backends, Budget(tokens=p + 100))
    assert result.status is RunStatus.FAILED
    assert result.answer is None
    assert result.failure is FailureKind.BUDGET_EXCEEDED
    assert result.budget.tokens == p + 500  # honest: what the tier reported
    assert "the medium tier spent" in (result.error or "")


def test_a_wall_budget_ends_the_run_as_budget_exceeded() -> None:
    backends = tiers(ScriptedRule(match="", latency_s=5.0))
    spec = "agents:\n  - {name: solo, role: math_solver, capacity: medium}\n"
    result = run(spec, backends, Budget(wall_s=0.2))
    assert result.failure is FailureKind.BUDGET_EXCEEDED
    assert result.error == "wall budget of 0.2 s reached"
    assert result.agents[0].failure is FailureKind.BUDGET_EXCEEDED
    assert result.wall_s < 2.0


def test_prompt_counts_are_the_backends_own_where_they_have_one() -> None:
    request = GenerationRequest((Message("user", "one two three"),), Decoding(max_tokens=5))
    assert asyncio.run(ScriptedBackend().count_prompt_tokens(request)) == 3
    long = ScriptedBackend(ScriptedConfig(rules=(ScriptedRule(output=LONG),)))
    generation = asyncio.run(long.generate(request))
    assert (generation.completion_tokens, generation.finish_reason) == (5, "length")
    assert generation.text == "w0 w1 w2 w3 w4"


# -- the run as a task, and the command --------------------------------------------------------


def test_run_task_refuses_before_building_any_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lemon import orchestration
    from lemon.capacity import BUILTIN_PROFILES

    monkeypatch.setattr(estimates, "tables_root", lambda: write_table(tmp_path))
    built: list[object] = []
    monkeypatch.setattr(orchestration, "build_backends", lambda profile: built.append(profile))
    parsed = parse_spec(format_spec(column("pot-large").spec(TaskKind.MATH)))
    options = ExecutionOptions(budget=parse_budget("cost=300"), decoding=Decoding(max_tokens=300))
    with pytest.raises(BudgetRefused, match="exceeds --budget cost=300"):
        asyncio.run(
            orchestration.run_task(
                TASK, profile=BUILTIN_PROFILES["scripted"], parsed=parsed, options=options
            )
        )
    assert built == []


def test_lemon_run_budget_no_team_fits_exits_non_zero_naming_the_budget() -> None:
    for extra in ([], ["--budget-fallback"]):
        refused = run_lemon("run", "--profile", "scripted", "--budget", "cost=1", *extra)
        assert refused.returncode == 1, refused.stderr
        assert "--budget cost=1" in refused.stderr
        assert refused.stdout == ""  # nothing ran, no answer
    as_json = run_lemon("run", "--profile", "scripted", "--budget", "cost=1", "--json")
    assert as_json.returncode == 1
    data = json.loads(as_json.stdout)
    assert data["status"] == "refused"
    assert data["failure"] == "budget_exceeded"
    assert "--budget cost=1" in data["error"]
    assert data["budget"]["cost"] == 1.0


def test_lemon_run_budget_usage_errors_exit_2() -> None:
    bad = run_lemon("run", "--profile", "scripted", "--budget", "tokens=-3")
    assert bad.returncode == 2
    assert "--budget tokens:" in bad.stderr
    alone = run_lemon("run", "--profile", "scripted", "--budget-fallback")
    assert alone.returncode == 2
    assert "--budget-fallback needs --budget" in alone.stderr


def test_lemon_run_json_shows_the_budget_and_what_was_spent() -> None:
    ok = run_lemon("run", "--profile", "scripted", "--budget", "tokens=5000,wall=60s", "--json")
    assert ok.returncode == 0, ok.stderr
    data = json.loads(ok.stdout)
    assert data["budget"]["limits"] == {"tokens": 5000, "cost": None, "wall_s": 60.0}
    assert data["budget"]["spent"]["tokens"] == data["tokens"]["total"]
    assert data["budget"]["reason"] is None
    assert data["budget"]["estimate"]["source"] in ("table", "upper_bound")
