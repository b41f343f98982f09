"""Tier prices: what one worker token costs on each capacity tier, relative to ``medium``.

R_orch's token term (:mod:`lemon.reward`) and the reports weigh each agent's tokens by its
tier's price, so a smaller tier is cheaper in reward as it is in a cluster. Prices are relative
(a medium token counts 1), so the reward's ``token_cost`` keeps its scale whatever the currency:

- a capacity profile that carries per-tier prices (the ``costPerToken`` a
  ``LemonCapacityProfile`` declares, as ``cost_per_token`` on a profile's tiers) gives them,
  divided by its medium tier's price;
- else a profile whose every tier runs a model of :data:`MODEL_PARAMETERS` (the built-in
  llama.cpp and in-process profiles) is priced in proportion to those models' parameter counts:
  ``embedded`` (SmolLM2-135M, Qwen2.5-Coder-0.5B, Qwen2.5-Coder-1.5B) about 0.272 / 1 / 3.125,
  ``tiny`` (SmolLM2 on every tier) 1 / 1 / 1;
- otherwise :data:`DEFAULT_TIER_PRICES`: the ``embedded`` profile's prices (its tiers' models
  are :data:`DEFAULT_TIER_MODELS`), for profiles that say nothing of their models' size
  (OpenAI-compatible endpoints, the scripted test double);
- :data:`UNIT_PRICES` (every tier 1.0) is the reward before tier prices: raw token counts,
  which keeps earlier results reproducible.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lemon.spec.models import Capacity

__all__ = [
    "COST_UNIT",
    "DEFAULT_TIER_MODELS",
    "DEFAULT_TIER_PRICES",
    "MODEL_PARAMETERS",
    "PARAMETER_COUNTS",
    "UNIT_PRICES",
    "TierPrices",
    "policy_price",
    "profile_prices",
    "resolve_prices",
]

COST_UNIT = "tier-priced tokens"
"""The unit of every cost LEMON shows a user (``lemon run``, the RPC's ``cost``, a LemonRun's
``status.cost``, the web view): worker tokens weighed by their tier's price, a medium-tier token
counting 1."""

MODEL_PARAMETERS: dict[str, int] = {
    "smollm2-135m-instruct": 134_515_008,
    "qwen2.5-coder-0.5b-instruct": 494_032_768,
    "qwen2.5-coder-1.5b-instruct": 1_543_714_304,
}
"""Parameters of the models the built-in profiles run, by the name profiles give them
(:mod:`lemon.backends.ggufs` pins their files): what their tiers' prices are in proportion to."""

DEFAULT_TIER_MODELS: dict[Capacity, str] = {
    Capacity.SMALL: "smollm2-135m-instruct",
    Capacity.MEDIUM: "qwen2.5-coder-0.5b-instruct",
    Capacity.LARGE: "qwen2.5-coder-1.5b-instruct",
}
"""The model of each tier of the default (``embedded``) profile."""

PARAMETER_COUNTS: dict[Capacity, int] = {
    tier: MODEL_PARAMETERS[model] for tier, model in DEFAULT_TIER_MODELS.items()
}
"""Parameters of each tier's model in the default profile (the default prices' basis)."""


class TierPrices(BaseModel):
    """Price of one worker token (prompt or completion) on each tier: relative to the medium
    tier's (:meth:`from_mapping`: what R_orch and the reports weigh tokens with), or in a
    profile's own currency (:meth:`as_given`: a ``LemonRun``'s ``status.cost``, in dollars)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    small: float = Field(ge=0, description="price of a small-tier token")
    medium: float = Field(ge=0, description="price of a medium-tier token")
    large: float = Field(ge=0, description="price of a large-tier token")

    @classmethod
    def from_mapping(cls, prices: Mapping[Capacity, float] | Mapping[str, float]) -> TierPrices:
        """From ``{tier: price}`` (every tier), divided by the medium tier's price."""
        values = {Capacity(t).value: float(p) for t, p in prices.items()}
        missing = [t.value for t in Capacity if t.value not in values]
        if missing:
            raise ValueError(f"tier prices lack {missing}")
        scale = values[Capacity.MEDIUM.value]
        if scale <= 0:
            raise ValueError("the medium tier's price must be positive to scale the others")
        return cls(**{t: v / scale for t, v in values.items()})

    @classmethod
    def as_given(cls, prices: Mapping[Capacity, float] | Mapping[str, float]) -> TierPrices:
        """``{tier: price}`` unscaled; a tier the mapping lacks costs 0 (a profile that does not
        serve a tier spends no tokens on it: the agents that need it fail before any call)."""
        values = {Capacity(t).value: float(p) for t, p in prices.items()}
        return cls(**{t.value: values.get(t.value, 0.0) for t in Capacity})

    def price(self, tier: Capacity | str) -> float:
        value: float = getattr(self, Capacity(tier).value)
        return value

    def priced(self, tokens_by_tier: Mapping[str, int]) -> float:
        """Σ price(tier) · tokens: the tier-priced token count."""
        return sum(self.price(tier) * tokens for tier, tokens in tokens_by_tier.items())

    def to_json(self) -> dict[str, float]:
        return {t.value: round(self.price(t), 6) for t in Capacity}


DEFAULT_TIER_PRICES = TierPrices.from_mapping(PARAMETER_COUNTS)
UNIT_PRICES = TierPrices(small=1.0, medium=1.0, large=1.0)


def profile_prices(profile: Any) -> TierPrices | None:
    """A capacity profile's own prices, or None when it has none: each tier's
    ``cost_per_token`` where every tier has one, else each tier's model's ``parameters`` where
    every tier knows it (None too when the medium tier's figure is 0). Takes a local profile
    (``tiers`` a mapping), a ``LemonCapacityProfile`` or its spec (``tiers()``)."""
    profile = getattr(profile, "spec", profile)
    tiers = getattr(profile, "tiers", None)
    if callable(tiers):
        tiers = tiers()
    if not isinstance(tiers, Mapping):
        return None
    for field in ("cost_per_token", "parameters"):
        found: dict[str, float] = {}
        for tier, backend in tiers.items():
            value = getattr(backend, field, None)
            if value is None:
                break
            found[Capacity(tier).value] = float(value)
        else:
            try:
                return TierPrices.from_mapping(found)
            except ValueError:
                return None
    return None


def resolve_prices(explicit: TierPrices | None = None, *, profile: Any = None) -> TierPrices:
    """The prices in force: ``explicit`` (e.g. ``RewardConfig.tier_prices``), else the
    profile's, else :data:`DEFAULT_TIER_PRICES`."""
    if explicit is not None:
        return explicit
    return profile_prices(profile) or DEFAULT_TIER_PRICES


def policy_price(model: str | None = None, *, prices: TierPrices = DEFAULT_TIER_PRICES) -> float:
    """What one token of the orchestration policy costs, in medium-tier tokens.

    A policy on a model of :data:`MODEL_PARAMETERS` (its name, or a path or id that ends in
    one, with or without a backend scheme such as ``gguf:``) is priced like a worker of that
    size: its parameters over the default medium model's.
    Any other policy is priced as a ``small`` worker of ``prices`` (the packaged policy is
    SmolLM2-135M, the small tier's model)."""
    if model:
        name = model.rstrip("/").rsplit("/", 1)[-1].lower()
        name = name.rsplit(":", 1)[-1]  # a backend's scheme: gguf:qwen2.5-coder-0.5b-instruct
        for known, parameters in MODEL_PARAMETERS.items():
            if name.startswith(known):
                return parameters / PARAMETER_COUNTS[Capacity.MEDIUM]
    return prices.price(Capacity.SMALL)
