"""R_orch, the orchestration reward: task success minus token cost minus structural cost.

For a valid spec::

    R = success_weight * success
        - token_cost * priced_tokens / 1000
        - agent_cost * agents
        - edge_cost * edges

``success`` is 1 for a correct answer and 0 otherwise (a fraction in between is allowed, e.g.
tests passed), ``priced_tokens`` all prompt and completion tokens of the worker LLMs, each
weighed by its tier's price (:mod:`lemon.pricing`: Σ price(tier) · tokens, a medium token
counting 1; without per-tier counts, the raw ``worker_tokens``), plus, when a policy wrote the
spec, the policy's own prompt and completion tokens priced at its model's tier price (the full
cost), ``agents``
and ``edges`` the spec's agent count and ``depends_on`` entries. A spec that does not validate
(or cannot run) gets ``invalid_reward`` whatever else is passed: with the defaults it is below
the reward of every valid spec that spends at most 15,000 worker tokens on 16 agents and
32 edges, so writing a valid spec always pays.

Pure functions, no I/O: the trainer calls :func:`orchestration_rewards` on a batch.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from lemon.pricing import TierPrices

__all__ = ["Outcome", "RewardConfig", "orchestration_reward", "orchestration_rewards"]


class RewardConfig(BaseModel):
    """The weights of R_orch (all costs are subtracted; set one to 0 to ignore that term)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    success_weight: float = Field(default=1.0, ge=0, description="reward for a fully correct task")
    token_cost: float = Field(
        default=0.02,
        ge=0,
        description="cost per 1,000 tier-priced worker tokens (prompt + completion)",
    )
    tier_prices: TierPrices | None = Field(
        default=None,
        description="relative price of a token per tier; null: the capacity profile's prices "
        "when it has them, else lemon.pricing.DEFAULT_TIER_PRICES (parameter counts, medium = "
        "1); every tier 1.0: raw token counts, the reward before tier prices",
    )
    agent_cost: float = Field(default=0.01, ge=0, description="cost per agent in the spec")
    edge_cost: float = Field(default=0.005, ge=0, description="cost per depends_on edge")
    invalid_reward: float = Field(
        default=-1.0, description="the reward of a spec that fails validation or cannot run"
    )


class Outcome(BaseModel):
    """What one executed spec produced (``valid=False``: the spec never ran)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    valid: bool = True
    success: float = Field(default=0.0, ge=0.0, le=1.0)
    worker_tokens: int = Field(default=0, ge=0)
    priced_tokens: float | None = Field(
        default=None, ge=0, description="tier-priced worker tokens (None: worker_tokens)"
    )
    policy_priced_tokens: float = Field(
        default=0.0,
        ge=0,
        description="the orchestration policy's own tokens (its prompt and the spec it wrote), "
        "priced at its model's tier price; 0 for a spec no policy wrote",
    )
    agents: int = Field(default=0, ge=0)
    edges: int = Field(default=0, ge=0)

    @property
    def full_cost(self) -> float:
        """Everything the answer cost, in medium-tier tokens: workers and policy."""
        workers = self.worker_tokens if self.priced_tokens is None else self.priced_tokens
        return workers + self.policy_priced_tokens


DEFAULT_CONFIG = RewardConfig()


def orchestration_reward(
    success: float | bool,
    *,
    worker_tokens: int,
    agents: int,
    edges: int,
    valid: bool = True,
    config: RewardConfig = DEFAULT_CONFIG,
    priced_tokens: float | None = None,
    policy_priced_tokens: float = 0.0,
) -> float:
    """R_orch for one spec (see the module docstring); ``ValueError`` on impossible inputs.
    ``priced_tokens`` (Σ price · tokens per tier) replaces ``worker_tokens`` in the token term
    when given; ``policy_priced_tokens`` (the policy's own tokens, priced) join it, so the
    reward is charged the full cost."""
    if not valid:
        return config.invalid_reward
    if not 0.0 <= float(success) <= 1.0:
        raise ValueError(f"success must lie in [0, 1], got {success}")
    if worker_tokens < 0 or edges < 0 or (priced_tokens is not None and priced_tokens < 0):
        raise ValueError("worker_tokens, priced_tokens and edges must not be negative")
    if policy_priced_tokens < 0:
        raise ValueError("policy_priced_tokens must not be negative")
    if agents < 1:
        raise ValueError(f"a valid spec has at least one agent, got {agents}")
    return (
        config.success_weight * float(success)
        - config.token_cost
        * ((worker_tokens if priced_tokens is None else priced_tokens) + policy_priced_tokens)
        / 1000
        - config.agent_cost * agents
        - config.edge_cost * edges
    )


def orchestration_rewards(
    outcomes: Sequence[Outcome], *, config: RewardConfig = DEFAULT_CONFIG
) -> list[float]:
    """R_orch for a batch, in order (the shape a GRPO trainer wants)."""
    return [
        orchestration_reward(
            o.success,
            worker_tokens=o.worker_tokens,
            agents=o.agents,
            edges=o.edges,
            valid=o.valid,
            config=config,
            priced_tokens=o.priced_tokens,
            policy_priced_tokens=o.policy_priced_tokens,
        )
        for o in outcomes
    ]
