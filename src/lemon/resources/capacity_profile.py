"""``LemonCapacityProfile``: where each capacity tier's model comes from and how it is served."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.alias_generators import to_camel

from lemon.pricing import DEFAULT_TIER_PRICES, TierPrices
from lemon.spec.models import ApiVersion, Capacity, ObjectMeta

__all__ = [
    "PROFILE_KIND",
    "CapacityProfileSpec",
    "LemonCapacityProfile",
    "Quantity",
    "Resources",
    "TierSpec",
]

PROFILE_KIND = "LemonCapacityProfile"

Quantity = Annotated[
    int | Annotated[str, StringConstraints(min_length=1, max_length=64)],
    Field(description="A Kubernetes quantity, e.g. 2, 500m, 16Gi."),
]

_MODEL_SOURCE = r"^([A-Za-z0-9][\w.-]*/[\w.-]+|(hf|s3|gs|pvc|oci|https)://\S+)$"


class _Camel(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


class Resources(_Camel):
    """Compute resources of one model server (as in a container's ``resources``)."""

    requests: dict[str, Quantity] | None = Field(
        default=None, max_length=16, description="Guaranteed resources, e.g. cpu, memory."
    )
    limits: dict[str, Quantity] | None = Field(
        default=None,
        max_length=16,
        description="Resource ceilings, e.g. nvidia.com/gpu: 1.",
    )


class TierSpec(_Camel):
    """How one tier is served: a KServe InferenceService on the huggingface (vLLM) runtime."""

    model: Annotated[
        str, StringConstraints(min_length=3, max_length=512, pattern=_MODEL_SOURCE)
    ] = Field(
        description="A Hugging Face model id (org/name) or a storage URI (hf://, s3://, "
        "gs://, pvc://, oci://, https://)."
    )
    runtime_args: list[Annotated[str, StringConstraints(min_length=1, max_length=256)]] = Field(
        default_factory=list,
        max_length=64,
        description="Extra vLLM server arguments, e.g. --max-model-len=4096.",
    )
    resources: Resources | None = Field(
        default=None, description="Compute resources of the model server."
    )
    min_replicas: int = Field(default=1, ge=0, le=100, description="Replicas kept running.")
    max_replicas: int | None = Field(
        default=None, ge=1, le=100, description="Autoscaling ceiling; absent = minReplicas."
    )
    cost_per_token: float = Field(
        default=0.0, ge=0, description="Cost of one generated or read token, in dollars."
    )

    @model_validator(mode="after")
    def _replica_range(self) -> TierSpec:
        if self.max_replicas is not None and self.max_replicas < self.min_replicas:
            raise ValueError("maxReplicas must be at least minReplicas")
        return self


class CapacityProfileSpec(_Camel):
    """The ``spec`` of a ``LemonCapacityProfile``: one serving setup per capacity tier."""

    small: TierSpec | None = Field(default=None, description="The small tier.")
    medium: TierSpec | None = Field(default=None, description="The medium tier.")
    large: TierSpec | None = Field(default=None, description="The large tier.")

    @model_validator(mode="after")
    def _some_tier(self) -> CapacityProfileSpec:
        if not self.tiers():
            raise ValueError("a capacity profile needs at least one tier (small, medium, large)")
        return self

    def tiers(self) -> dict[Capacity, TierSpec]:
        """The tiers present, smallest first."""
        found = {tier: getattr(self, tier.value) for tier in Capacity}
        return {tier: spec for tier, spec in found.items() if spec is not None}

    def prices(self) -> TierPrices:
        """Each tier's ``costPerToken``, in dollars (a tier the profile lacks costs nothing:
        nothing runs on it)."""
        return TierPrices.as_given({t: spec.cost_per_token for t, spec in self.tiers().items()})

    def tier_prices(self) -> TierPrices:
        """Each tier's ``costPerToken`` relative to the medium tier's: what a run's cost is in,
        tier-priced tokens (:data:`lemon.pricing.COST_UNIT`, a medium token counts 1). A
        profile with no priced medium tier is priced at the defaults
        (:data:`lemon.pricing.DEFAULT_TIER_PRICES`, the embedded models' sizes)."""
        medium = self.medium.cost_per_token if self.medium is not None else 0.0
        if medium <= 0:
            return DEFAULT_TIER_PRICES
        return TierPrices.as_given(
            {t: spec.cost_per_token / medium for t, spec in self.tiers().items()}
        )


class LemonCapacityProfile(BaseModel):
    """The full Kubernetes resource form of a capacity profile."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    apiVersion: ApiVersion
    kind: Literal["LemonCapacityProfile"]
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CapacityProfileSpec
