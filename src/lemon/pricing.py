"""Tier prices: what one worker token costs on each capacity tier, relative to ``medium``.

R_orch's token term (:mod:`lemon.reward`) and the reports weigh each agent's tokens by its
tier's price, so a smaller tier is cheaper in reward as it is in a cluster. Prices are relative
(a medium token counts 1), so the reward's ``token_cost`` keeps its scale whatever the currency:

- a capacity profile that carries per-tier prices (the ``costPerToken`` a
  ``LemonCapacityProfile`` declares, as ``cost_per_token`` on a profile's tiers) gives them,
  divided by its medium tier's price;
- otherwise :data:`DEFAULT_TIER_PRICES`: in proportion to the parameter counts of the real tier
  models (SmolLM2-135M, Qwen2.5-Coder-0.5B with 494M, Qwen2.5-Coder-1.5B with 1.54B), about
  0.27 / 1 / 3.12;
- :data:`UNIT_PRICES` (every tier 1.0) is the reward before tier prices: raw token counts,
  which keeps earlier results reproducible.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lemon.spec.models import Capacity

__all__ = [
    "DEFAULT_TIER_PRICES",
    "PARAMETER_COUNTS",
    "UNIT_PRICES",
    "TierPrices",
    "profile_prices",
    "resolve_prices",
]

PARAMETER_COUNTS: dict[Capacity, float] = {
    Capacity.SMALL: 135e6,
    Capacity.MEDIUM: 494e6,
    Capacity.LARGE: 1.54e9,
}
"""Parameters of each tier's model in the real-tier profile (the default prices' basis)."""


class TierPrices(BaseModel):
    """Relative price of one worker token (prompt or completion) on each tier."""

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
    """A capacity profile's own prices (each tier's ``cost_per_token``), or None when it has
    none (missing on some tier, or a medium price of 0). Takes a local profile (``tiers`` a
    mapping), a ``LemonCapacityProfile`` or its spec (``tiers()``)."""
    profile = getattr(profile, "spec", profile)
    tiers = getattr(profile, "tiers", None)
    if callable(tiers):
        tiers = tiers()
    if not isinstance(tiers, Mapping):
        return None
    found: dict[str, float] = {}
    for tier, backend in tiers.items():
        price = getattr(backend, "cost_per_token", None)
        if price is None:
            return None
        found[Capacity(tier).value] = float(price)
    try:
        return TierPrices.from_mapping(found)
    except ValueError:
        return None


def resolve_prices(explicit: TierPrices | None = None, *, profile: Any = None) -> TierPrices:
    """The prices in force: ``explicit`` (e.g. ``RewardConfig.tier_prices``), else the
    profile's, else :data:`DEFAULT_TIER_PRICES`."""
    if explicit is not None:
        return explicit
    return profile_prices(profile) or DEFAULT_TIER_PRICES
