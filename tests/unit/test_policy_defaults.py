"""The one resolution order (lemon.policy.defaults): the request's spec, else its policy, else
the default of where it arrived, else LEMON's built-in default; each result says which."""

from __future__ import annotations

import asyncio

import pytest

from lemon.capacity import resolve_profile
from lemon.orchestration import plan_task, run_task
from lemon.policy.defaults import (
    BUILTIN_DEFAULT,
    ChosenPolicy,
    SpecChoice,
    UnknownPolicy,
    builtin_name,
    builtin_policy,
    resolve_policy,
    spec_choice,
)
from lemon.policy.fixed import BestTeamPolicy
from lemon.policy.inference import TemplatePolicy
from lemon.policy.template import TemplateVariant
from lemon.pricing import COST_UNIT
from lemon.spec.validation import parse_spec

TASK = "Natalia sold 48 clips in April and half as many in May. How many clips in total?"


def test_each_step_of_the_order_is_named() -> None:
    named = TemplatePolicy()
    assert resolve_policy(policy=named, default=BestTeamPolicy()) is named
    assert spec_choice(named) is SpecChoice.POLICY
    server = resolve_policy(default=TemplatePolicy(), via="the server's default policy")
    assert isinstance(server, ChosenPolicy)
    assert spec_choice(server) is SpecChoice.DEFAULT_POLICY
    builtin = resolve_policy()
    assert spec_choice(builtin) is SpecChoice.BUILTIN_DEFAULT
    assert isinstance(builtin, ChosenPolicy)
    assert isinstance(builtin.policy, BestTeamPolicy)
    assert spec_choice(None) is SpecChoice.SPEC


def test_a_default_names_itself_before_the_policys_own_origin() -> None:
    plan = asyncio.run(
        plan_task(TASK, policy=resolve_policy(default=TemplatePolicy(), via="team default"))
    )
    assert plan.origin == "team default: template policy (math)"
    assert plan.choice is SpecChoice.DEFAULT_POLICY


def test_nothing_given_is_the_builtin_default_the_best_fixed_team() -> None:
    plan = asyncio.run(plan_task(TASK))
    expected = BestTeamPolicy()
    kind = plan.kind
    assert plan.choice is SpecChoice.BUILTIN_DEFAULT
    assert plan.origin == expected.origin(kind)  # lemon run's wording, unchanged
    assert plan.spec == expected.spec(kind)


def test_a_template_variant_asked_for_is_an_explicit_policy() -> None:
    plan = asyncio.run(plan_task(TASK, template_variant=TemplateVariant.COMPUTE))
    assert plan.origin == "template policy (math, compute)"
    assert plan.choice is SpecChoice.POLICY


def test_a_given_spec_wins_and_the_run_reports_choice_and_cost_unit() -> None:
    parsed = parse_spec(
        "agents:\n- name: solver\n  role: math_solver\n  capacity: small\n", source="team.yaml"
    )
    result = asyncio.run(
        run_task(TASK, profile=resolve_profile("scripted"), parsed=parsed, policy=TemplatePolicy())
    )
    data = result.to_json()
    assert data["spec_origin"] == "team.yaml"
    assert data["spec_choice"] == "spec"
    assert data["cost_unit"] == COST_UNIT == "tier-priced tokens"


def test_builtin_policies_by_name_and_by_checkpoint() -> None:
    assert isinstance(builtin_policy(BUILTIN_DEFAULT), BestTeamPolicy)
    with pytest.raises(UnknownPolicy, match="no built-in policy 'best' \\(LEMON ships: "):
        builtin_policy("best")
    assert builtin_name("lemon://learned") == "learned"
    assert builtin_name("pvc://lemon-output/policies/p/v1") is None


def test_the_k8s_examples_take_lemon_runs_sample_and_cut_no_answer_short() -> None:
    import yaml

    from lemon.cli.options import sample_item
    from tests.conftest import ROOT

    runs = {}
    for path in sorted((ROOT / "examples/k8s").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc and doc.get("kind") == "LemonRun":
                runs[doc["metadata"]["name"]] = doc["spec"]
    assert set(runs) == {"natalia", "natalia-team"}
    assert set(runs["natalia"]) == {"task", "ttlSecondsAfterFinished"}  # the task alone
    assert "spec" in runs["natalia-team"]
    for spec in runs.values():
        assert spec["task"] == sample_item().question  # GSM8K train item 0, as lemon run's
        assert "maxTokens" not in spec


def test_one_worker_budget_everywhere_and_the_tables_measured_it() -> None:
    """A worker agent's default completion budget is one constant, the one the shipped outcome
    tables measured the default team at: every entry point that runs a team uses it."""
    from pathlib import Path

    from lemon.budget import WORKER_MAX_TOKENS
    from lemon.cli import build_parser
    from lemon.learning.training_config import HyperParameters
    from lemon.orchestration import ItemSettings
    from lemon.tables.store import Table
    from lemon_service.settings import Limits

    parser, _ = build_parser()
    for argv in (
        ["run", "--task", "a task"],
        ["eval", "--benchmark", "svamp"],
        ["table", "build", "out", "--benchmark", "svamp", "--teams", "single-small"],
    ):
        assert parser.parse_args(argv).max_tokens == WORKER_MAX_TOKENS, argv
    assert Limits().max_tokens == WORKER_MAX_TOKENS  # gRPC runs and task-only LemonRuns
    assert ItemSettings().worker_max_tokens == WORKER_MAX_TOKENS
    assert HyperParameters().worker_max_tokens == WORKER_MAX_TOKENS
    tables = sorted(Path(__file__).resolve().parents[2].glob("tables/*/table.json"))
    assert tables
    for path in tables:
        assert Table.open(path.parent).meta.worker_max_tokens == WORKER_MAX_TOKENS, path
