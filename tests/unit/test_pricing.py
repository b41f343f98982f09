"""Tier prices and the tier-priced R_orch, against hand-computed values."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from lemon.capacity import Capacity, resolve_profile
from lemon.engine.results import AgentResult, RunResult, RunStatus
from lemon.learning.training_config import TrainingConfig
from lemon.pricing import (
    DEFAULT_TIER_PRICES,
    UNIT_PRICES,
    TierPrices,
    policy_price,
    profile_prices,
    resolve_prices,
)
from lemon.resources.capacity_profile import CapacityProfileSpec
from lemon.reward import Outcome, RewardConfig, orchestration_reward, orchestration_rewards


def test_default_prices_follow_parameter_counts() -> None:
    assert DEFAULT_TIER_PRICES.medium == 1.0
    assert DEFAULT_TIER_PRICES.small == pytest.approx(134.515008 / 494.032768)
    assert DEFAULT_TIER_PRICES.large == pytest.approx(1543.714304 / 494.032768)
    assert DEFAULT_TIER_PRICES.to_json() == {"small": 0.27228, "medium": 1.0, "large": 3.12472}


def test_priced_tokens_by_hand() -> None:
    prices = TierPrices(small=0.5, medium=1.0, large=3.0)
    # 0.5 * 100 + 1 * 200 + 3 * 10 = 280
    assert prices.priced({"small": 100, "medium": 200, "large": 10}) == pytest.approx(280.0)
    assert UNIT_PRICES.priced({"small": 100, "large": 10}) == 110


def test_profile_prices_are_relative_to_medium() -> None:
    spec = CapacityProfileSpec.model_validate(
        {
            "small": {"model": "a/small", "costPerToken": 2e-8},
            "medium": {"model": "a/medium", "costPerToken": 2e-7},
            "large": {"model": "a/large", "costPerToken": 9e-7},
        }
    )
    prices = profile_prices(spec)
    assert prices is not None
    assert prices.to_json() == {"small": 0.1, "medium": 1.0, "large": 4.5}
    # a local profile without prices is priced by its models' parameter counts: the embedded
    # one's are the defaults, one model on every tier (tiny) prices every tier alike
    assert profile_prices(resolve_profile("embedded")) == DEFAULT_TIER_PRICES
    assert resolve_prices(profile=resolve_profile("tiny")) == UNIT_PRICES
    # a profile that says nothing of sizes or prices (the scripted double) gets the defaults
    assert profile_prices(resolve_profile("scripted")) is None
    assert resolve_prices(profile=resolve_profile("scripted")) == DEFAULT_TIER_PRICES
    assert resolve_prices(UNIT_PRICES, profile=spec) == UNIT_PRICES
    # all-zero prices (the CRD's default) say nothing: defaults again
    free = CapacityProfileSpec.model_validate(
        {t: {"model": f"a/{t}"} for t in ("small", "medium", "large")}
    )
    assert profile_prices(free) is None


def test_bad_prices_are_refused() -> None:
    with pytest.raises(ValidationError):
        TierPrices(small=-1.0, medium=1.0, large=1.0)
    with pytest.raises(ValueError, match="lack"):
        TierPrices.from_mapping({"small": 1.0, "medium": 1.0})
    with pytest.raises(ValueError, match="medium"):
        TierPrices.from_mapping({"small": 1.0, "medium": 0.0, "large": 1.0})


def test_priced_reward_by_hand() -> None:
    # 1 - 0.02 * 280/1000 - 0.01 * 2 - 0.005 = 1 - 0.0056 - 0.02 - 0.005 = 0.9694
    value = orchestration_reward(1, worker_tokens=310, priced_tokens=280.0, agents=2, edges=1)
    assert value == pytest.approx(0.9694)
    # without priced tokens the raw count applies: the reward before tier prices
    old = orchestration_reward(1, worker_tokens=310, agents=2, edges=1)
    assert old == pytest.approx(1 - 0.02 * 0.31 - 0.02 - 0.005)
    outcomes = [Outcome(success=1, worker_tokens=310, priced_tokens=280.0, agents=2, edges=1)]
    assert orchestration_rewards(outcomes) == [pytest.approx(0.9694)]
    with pytest.raises(ValueError, match="negative"):
        orchestration_reward(1, worker_tokens=1, priced_tokens=-1.0, agents=1, edges=0)


def test_unit_prices_reproduce_the_unweighted_reward() -> None:
    run = RunResult(
        RunStatus.SUCCEEDED,
        "42",
        "",
        [
            AgentResult("a", "planner", "small", prompt_tokens=300, completion_tokens=50),
            AgentResult("b", "math_solver", "large", prompt_tokens=400, completion_tokens=100),
            AgentResult("c", "python_executor", "small", model="tool:python"),
        ],
        1.0,
        ("a", "b"),
    )
    assert run.tokens_by_tier() == {"small": 350, "large": 500}
    raw = run.tokens()["total"]
    unit = UNIT_PRICES.priced(run.tokens_by_tier())
    same = orchestration_reward(1, worker_tokens=raw, priced_tokens=unit, agents=3, edges=1)
    assert same == orchestration_reward(1, worker_tokens=raw, agents=3, edges=1)
    # default prices make the small tier cheaper and the large dearer than raw tokens
    priced = DEFAULT_TIER_PRICES.priced(run.tokens_by_tier())
    assert priced == pytest.approx((350 * 134_515_008 + 500 * 1_543_714_304) / 494_032_768)
    assert run.to_json()["tokens_by_tier"] == {"small": 350, "large": 500}


def test_reward_config_prices_in_a_training_config() -> None:
    config = TrainingConfig.model_validate(
        {
            "stage": "grpo",
            "data": "synthetic:4",
            "output_dir": "out",
            "rewards": {"tier_prices": {"small": 1, "medium": 1, "large": 1}},
        }
    )
    assert config.rewards.tier_prices == UNIT_PRICES
    assert RewardConfig().tier_prices is None


def test_policy_price_reads_the_base_model_through_a_backend_scheme() -> None:
    # a policy fine-tuned from the GGUF medium model is priced as the medium tier (1.0),
    # not as the small-tier default: its base model id carries the backend's scheme
    assert policy_price("gguf:qwen2.5-coder-0.5b-instruct") == pytest.approx(1.0)
    assert policy_price("/cache/models/qwen2.5-coder-1.5b-instruct") == pytest.approx(
        1_543_714_304 / 494_032_768
    )
    assert policy_price("gguf:unknown-model") == DEFAULT_TIER_PRICES.price(Capacity.SMALL)
    assert policy_price(None) == DEFAULT_TIER_PRICES.price(Capacity.SMALL)
