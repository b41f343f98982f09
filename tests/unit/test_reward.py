"""R_orch against hand-computed values."""

from __future__ import annotations

import pytest

from lemon.reward import Outcome, RewardConfig, orchestration_reward, orchestration_rewards


def test_default_weights_by_hand() -> None:
    # 1 - 0.02 * 1500/1000 - 0.01 * 3 - 0.005 * 2 = 1 - 0.03 - 0.03 - 0.01 = 0.93
    assert orchestration_reward(True, worker_tokens=1500, agents=3, edges=2) == pytest.approx(0.93)
    # a wrong answer pays the same costs: 0 - 0.07 = -0.07
    assert orchestration_reward(0, worker_tokens=1500, agents=3, edges=2) == pytest.approx(-0.07)
    # single agent, no edges, 200 tokens: 1 - 0.004 - 0.01 = 0.986
    assert orchestration_reward(1.0, worker_tokens=200, agents=1, edges=0) == pytest.approx(0.986)


def test_custom_weights_by_hand() -> None:
    config = RewardConfig(success_weight=2.0, token_cost=0.1, agent_cost=0.0, edge_cost=0.5)
    # 2 * 0.5 - 0.1 * 4 - 0 - 0.5 * 1 = 1 - 0.4 - 0.5 = 0.1
    value = orchestration_reward(0.5, worker_tokens=4000, agents=7, edges=1, config=config)
    assert value == pytest.approx(0.1)


def test_invalid_spec_gets_the_invalid_reward() -> None:
    assert orchestration_reward(1.0, worker_tokens=0, agents=0, edges=0, valid=False) == -1.0
    config = RewardConfig(invalid_reward=-5.0)
    assert (
        orchestration_reward(0, worker_tokens=9, agents=1, edges=0, valid=False, config=config)
        == -5.0
    )


def test_invalid_is_worse_than_any_modest_valid_spec() -> None:
    worst_modest = orchestration_reward(0, worker_tokens=15_000, agents=16, edges=32)
    assert worst_modest == pytest.approx(-0.62)
    assert RewardConfig().invalid_reward < worst_modest


def test_costs_are_monotone() -> None:
    base = orchestration_reward(1, worker_tokens=100, agents=2, edges=1)
    assert orchestration_reward(1, worker_tokens=101, agents=2, edges=1) < base
    assert orchestration_reward(1, worker_tokens=100, agents=3, edges=1) < base
    assert orchestration_reward(1, worker_tokens=100, agents=2, edges=2) < base


def test_rejects_impossible_inputs() -> None:
    with pytest.raises(ValueError, match="success"):
        orchestration_reward(1.5, worker_tokens=0, agents=1, edges=0)
    with pytest.raises(ValueError, match="at least one agent"):
        orchestration_reward(1, worker_tokens=0, agents=0, edges=0)
    with pytest.raises(ValueError, match="negative"):
        orchestration_reward(1, worker_tokens=-1, agents=1, edges=0)


def test_batch_keeps_order() -> None:
    outcomes = [
        Outcome(success=1, worker_tokens=1000, agents=1, edges=0),
        Outcome(valid=False),
        Outcome(success=0, worker_tokens=0, agents=2, edges=1),
    ]
    assert orchestration_rewards(outcomes) == pytest.approx([0.97, -1.0, -0.025])
