"""Status of LEMON's resources, as the operator writes it (Kubernetes conventions)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from lemon.spec.models import Capacity

__all__ = [
    "CapacityProfileStatus",
    "Condition",
    "ConditionStatus",
    "LemonSpecStatus",
    "SpecRunStatus",
    "TierStatus",
]


class _Camel(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(_Camel):
    """One aspect of the object's state (``metav1.Condition``)."""

    type: str = Field(max_length=316, description="Validated, TiersReady or Ready.")
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: str = Field(max_length=1024, description="One CamelCase word saying why.")
    message: str = Field(max_length=32768, description="Human-readable details.")
    last_transition_time: str = Field(description="When status last changed (RFC 3339).")
    observed_generation: int | None = Field(
        default=None, description="The metadata.generation this condition describes."
    )


class TierStatus(_Camel):
    """One tier's InferenceService, as its status reports it."""

    tier: Capacity = Field(description="small, medium or large.")
    inference_service: str = Field(description="Name of the tier's InferenceService.")
    url: str | None = Field(
        default=None,
        description="The tier's endpoint once KServe has one: its cluster-local address, "
        "else its URL.",
    )
    ready: bool = Field(description="Whether the InferenceService reports Ready.")


class SpecRunStatus(_Camel):
    """The LemonRun of the spec's task (one per generation of the spec)."""

    name: str = Field(description="The LemonRun (`kubectl get lrun NAME`).")
    phase: str | None = Field(default=None, description="Its phase.")
    answer: str | None = Field(default=None, description="Its answer, once it succeeded.")
    tokens: int | None = Field(default=None, description="Its worker tokens, once finished.")


class LemonSpecStatus(_Camel):
    """What the operator found and did for a ``LemonSpec``."""

    observed_generation: int | None = Field(
        default=None, description="The metadata.generation last reconciled."
    )
    conditions: list[Condition] = Field(
        default_factory=list, description="Validated, TiersReady and Ready."
    )
    output: str | None = Field(default=None, description="The output agent.")
    order: list[str] | None = Field(default=None, description="Agents in execution order.")
    levels: list[list[str]] | None = Field(
        default=None, description="Agents grouped by DAG level; a level runs together."
    )
    errors: list[str] | None = Field(
        default=None,
        description="Validation errors as LINE:COL: message, positions in the canonical "
        "rendering of the resource (see the Validated condition).",
    )
    tiers: list[TierStatus] | None = Field(
        default=None, description="The tiers the agents need and their readiness."
    )
    run: SpecRunStatus | None = Field(
        default=None, description="The run of the spec's task, when it has one."
    )


class CapacityProfileStatus(_Camel):
    """What the operator found and did for a ``LemonCapacityProfile``."""

    observed_generation: int | None = Field(
        default=None, description="The metadata.generation last reconciled."
    )
    conditions: list[Condition] = Field(default_factory=list, description="Ready.")
    tiers: list[TierStatus] = Field(default_factory=list, description="Each tier's endpoint.")
