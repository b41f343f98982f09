"""Budgets on the real server (issue 47): a run's own budget on the request, and a namespace's
budget shared by runs submitted at once. The tiers are a small real OpenAI-compatible HTTP server
(tests/service/openai_server.py: whitespace words as tokens, ``max_tokens`` honoured), whose log
records every call it received and the tokens it reported: what was spent is counted at the tier.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest

from lemon.budget import PROMPT_ALLOWANCE
from lemon_api.client import ClientConfig, LemonClient
from lemon_api.v1 import orchestrator_pb2 as pb
from tests.conftest import ROOT
from tests.service.conftest import OpenAIServer, ServeProcess
from tests.service.test_rpcs import call, status_of

TASK = "Natalia sold 48 clips in April and half as many in May. How many clips in total?"
SPEC = (ROOT / "examples" / "specs" / "02-plan-solve-verify.yaml").read_text()
"""A chain: planner -> solver -> checker (checker the output)."""
ANSWER = " ".join(f"w{i}" for i in range(40))
MAX_TOKENS = 64


@pytest.fixture(scope="module")
def tier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenAIServer]:
    server = OpenAIServer(tmp_path_factory.mktemp("budget-tier"), latency=0.0, answer=ANSWER)
    yield server
    server.kill()


@pytest.fixture(scope="module")
def service(tier: OpenAIServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    logs = tmp_path_factory.mktemp("budget-service")
    profiles = tier.profile_file(logs / "tiers.yaml")
    server = ServeProcess("--profile", "httptiers", "--profiles", str(profiles), log_dir=logs)
    yield server
    server.stop()


def usage(tier: OpenAIServer) -> list[tuple[int, int]]:
    """(call number, tokens reported) of every call the tier answered, in order."""
    found = []
    for line in tier.events():
        kind, *rest = line.split()
        if kind == "usage":
            prompt, completion, number = map(int, rest)
            found.append((number, prompt + completion))
    return found


def submit(target: str, request: pb.SubmitRunRequest) -> pb.RunState:
    return call(target, lambda c: c.submit_run(request, timeout=60))


@dataclass(frozen=True)
class Chain:
    """The unbudgeted chain's figures: each agent's tokens as the tier counted them, and the
    upper bound of its prompt the meter reserves (the OpenAI tier has no tokenizer here)."""

    spent: dict[str, int]
    bound: dict[str, int]


@pytest.fixture(scope="module")
def chain(service: ServeProcess) -> Chain:
    request = pb.SubmitRunRequest(
        run_id="unbudgeted",
        task=TASK,
        spec=SPEC,
        options=pb.RunOptions(max_tokens=MAX_TOKENS),
        wait_s=30,
        include_trace=True,
    )
    state = submit(service.target, request)
    assert state.phase == pb.RunState.SUCCEEDED, state.error
    bound = {}
    for line in state.trace:
        event = json.loads(line)
        if event["event"] == "agent_start":
            # the trace joins the messages with a blank line, the bound with a newline: a few
            # bytes over the meter's own bound, which the margins below absorb
            bound[event["agent"]] = len(event["prompt"].encode()) + PROMPT_ALLOWANCE
    spent = {a.name: a.prompt_tokens + a.completion_tokens for a in state.result.agents}
    assert set(bound) == set(spent) == {"planner", "solver", "checker"}
    return Chain(spent, bound)


GREEDY_ANSWER = " ".join(f"g{i}" for i in range(3000))


@pytest.fixture(scope="module")
def greedy_service(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServeProcess, OpenAIServer]]:
    """A service whose tiers ignore ``max_tokens`` and answer 3,000 tokens."""
    logs = tmp_path_factory.mktemp("budget-greedy")
    tier = OpenAIServer(logs, latency=0.0, answer=GREEDY_ANSWER, ignore_max_tokens=True)
    server = ServeProcess(
        "--profile", "httptiers", "--profiles", str(tier.profile_file(logs / "tiers.yaml")),
        log_dir=logs,
    )  # fmt: skip
    yield server, tier
    server.stop()
    tier.kill()


def spec_estimate() -> float:
    """The estimate the service checks the chain's budget against (the upper bound: a given
    spec no table measured), computed here the same way."""
    from lemon.policy.estimates import estimate_spec
    from lemon.pricing import DEFAULT_TIER_PRICES
    from lemon.spec import parse_spec
    from lemon.spec.roles import default_roles
    from lemon.tasks import classify_task

    parsed = parse_spec(SPEC, source="chain")
    estimate = estimate_spec(
        parsed.spec,
        output=parsed.output,
        kind=classify_task(TASK),
        task=TASK,
        roles=default_roles(),
        prices=DEFAULT_TIER_PRICES,
        max_tokens=MAX_TOKENS,
    )
    assert estimate.source == "upper_bound"
    return estimate.tokens


def test_a_run_that_overruns_ends_budget_exceeded_and_the_tier_gets_no_call_after(
    greedy_service: tuple[ServeProcess, OpenAIServer],
) -> None:
    """The chain's estimate fits its budget, but the tier answers past ``max_tokens``: the
    planner's one call spends the whole budget; the solver and checker are never called."""
    service, tier = greedy_service
    limit = math.ceil(spec_estimate()) + 10
    options = pb.RunOptions(max_tokens=MAX_TOKENS, budget=pb.Budget(tokens=limit))
    request = pb.SubmitRunRequest(
        run_id="overrun", task=TASK, spec=SPEC, options=options, wait_s=30, include_trace=True
    )
    state = submit(service.target, request)

    assert state.phase == pb.RunState.FAILED, state.error
    assert state.failure == pb.FAILURE_KIND_BUDGET_EXCEEDED
    result = state.result
    assert result.failure == pb.FAILURE_KIND_BUDGET_EXCEEDED
    report = result.budget
    assert state.budget == report
    assert report.stop == pb.BUDGET_STOP_RUN
    assert report.limits.tokens == limit
    assert f"options.budget tokens={limit} spent before the agent started" in report.reason
    assert "agent 'solver' not started" in report.reason
    assert report.spent_tokens > limit  # what the tier reported, honestly
    # the partial trace: the planner's whole answer; the solver skipped for the budget, never
    # started; the checker skipped after it
    agents = {a.name: a for a in result.agents}
    assert agents["planner"].status == "succeeded"
    assert agents["planner"].output == GREEDY_ANSWER
    assert agents["solver"].status == "skipped"
    assert agents["solver"].failure == pb.FAILURE_KIND_BUDGET_EXCEEDED
    assert agents["checker"].status == "skipped"
    assert result.answer == ""
    events = [json.loads(line) for line in state.trace]
    assert [e["agent"] for e in events if e["event"] == "agent_start"] == ["planner"]
    finished = {e["agent"]: e for e in events if e["event"] == "agent_finish"}
    assert finished["planner"]["output"].startswith("g0 g1 g2")
    assert finished["solver"]["status"] == "skipped"
    # at the tier: one call, the planner's; none once the budget was spent
    assert tier.count("start") == 1
    assert sum(tokens for _, tokens in usage(tier)) == report.spent_tokens == result.tokens.total


def test_a_budget_no_team_fits_is_failed_precondition_naming_it(service: ServeProcess) -> None:
    options = pb.RunOptions(budget=pb.Budget(tokens=50))
    error = status_of(service.target, lambda c: c.execute(TASK, SPEC, options=options))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "refused" in (error.details() or "")
    assert "options.budget tokens=50" in (error.details() or "")


@pytest.mark.parametrize(
    ("budget", "field"),
    [
        (pb.Budget(tokens=0), "options.budget tokens: must be a positive number"),
        (pb.Budget(cost=-5), "options.budget cost: must be a positive number"),
        (pb.Budget(), "options.budget: give at least one of tokens, cost, wall"),
    ],
)
def test_an_invalid_budget_is_invalid_argument_naming_the_field(
    service: ServeProcess, budget: pb.Budget, field: str
) -> None:
    options = pb.RunOptions(budget=budget)
    error = status_of(service.target, lambda c: c.orchestrate(TASK, options=options))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in (error.details() or "")


def test_budget_fallback_without_a_budget_is_invalid_argument(service: ServeProcess) -> None:
    options = pb.RunOptions(budget_fallback=True)
    error = status_of(service.target, lambda c: c.orchestrate(TASK, options=options))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "options.budget_fallback" in (error.details() or "")


def test_a_namespace_budget_is_never_exceeded_by_runs_at_once(
    service: ServeProcess, tier: OpenAIServer, chain: Chain
) -> None:
    """Four chains submitted at once on one namespace budget worth about two: together they
    never spend past it, counted at the tier; the budget's state says what was spent."""
    whole = sum(chain.spent.values())
    limit = 2 * whole + chain.bound["checker"]
    shared = pb.NamespaceBudget(name="LemonBudget test/tenant", tokens=limit, window_s=3600)
    before = len(usage(tier))

    async def go() -> tuple[list[pb.RunState], pb.NamespaceBudgetState]:
        async with LemonClient(ClientConfig(target=service.target)) as client:
            await client.sync_namespace_budget(shared, timeout=10)
            requests = []
            for n in range(4):
                request = pb.SubmitRunRequest(
                    run_id=f"shared-{n}",
                    task=TASK,
                    spec=SPEC,
                    options=pb.RunOptions(max_tokens=MAX_TOKENS),
                    namespace_budget=shared,
                    wait_s=30,
                )
                requests.append(client.submit_run(request, timeout=60))
            states = await asyncio.gather(*requests)
            return list(states), await client.sync_namespace_budget(shared, timeout=10)

    states, after = asyncio.run(go())
    spent_at_tier = sum(tokens for _, tokens in usage(tier)[before:])
    assert spent_at_tier <= limit
    assert after.spent_tokens == spent_at_tier
    assert after.remaining_tokens == limit - spent_at_tier
    assert after.runs == 4
    stopped = [s for s in states if s.failure == pb.FAILURE_KIND_BUDGET_EXCEEDED]
    assert stopped, "a budget worth about two runs stopped none of four"
    assert after.stopped == len(stopped)
    for state in stopped:
        assert state.budget.stop == pb.BUDGET_STOP_NAMESPACE
        assert "namespace budget LemonBudget test/tenant" in state.budget.reason
        assert state.budget.namespace_budget.startswith("LemonBudget test/tenant")
    assert sum(s.phase == pb.RunState.SUCCEEDED for s in states) >= 1


def test_an_invalid_namespace_budget_is_invalid_argument(service: ServeProcess) -> None:
    bad = pb.NamespaceBudget(name="LemonBudget test/x", window_s=60)
    error = status_of(service.target, lambda c: c.sync_namespace_budget(bad))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "namespace_budget: give tokens, cost or both" in (error.details() or "")
