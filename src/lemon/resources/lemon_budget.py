"""``LemonBudget``: a namespace's budget, worker tokens and/or tier-priced cost per time window,
shared by every LemonRun of the namespace.

A kind of its own, not a field of a run or a capacity profile, so that RBAC can tell the two
apart: whoever may create LemonRuns in a namespace need not be allowed to touch its LemonBudget
(``lemonbudgets`` is its own resource with its own verbs). A namespace has at most one; with
two, its runs wait (``NamespaceBudgetAmbiguous``). The operator hands the budget to the
orchestration service with every run of the namespace, and the service holds all those runs
to it together (:class:`lemon.engine.metering.SharedBudget`): a call that would take the
window past it is cut, or never started, and its run fails ``budget_exceeded`` with the reason
naming this budget (the LemonRun's reason: ``NamespaceBudgetExceeded``). The operator reads what
the current window spent and has left from the service into ``status`` every few seconds.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from lemon.resources.status import Condition
from lemon.spec.models import ObjectMeta

__all__ = [
    "BUDGET_KIND",
    "BudgetAmounts",
    "LemonBudget",
    "LemonBudgetSpec",
    "LemonBudgetStatus",
    "shared_budget_name",
]

BUDGET_KIND = "LemonBudget"


class _Camel(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


class LemonBudgetSpec(_Camel):
    """The ``spec`` of a ``LemonBudget``: at least one of tokens and cost."""

    tokens: int | None = Field(
        default=None,
        ge=1,
        description="Worker tokens (prompt + completion of every model call) the namespace's "
        "runs may spend together per window.",
    )
    cost: float | None = Field(
        default=None,
        gt=0,
        description="Tier-priced tokens (each worker token times its tier's price relative to "
        "the medium tier's) the namespace's runs may spend together per window.",
    )
    window_seconds: int = Field(
        default=3600,
        ge=1,
        le=2_592_000,
        description="The window's length in seconds (windows start at multiples of it since "
        "the Unix epoch; what was spent is forgotten when the next one starts). Default 3600.",
    )

    @model_validator(mode="after")
    def _a_limit(self) -> LemonBudgetSpec:
        if self.tokens is None and self.cost is None:
            raise ValueError("give tokens, cost or both")
        return self


class BudgetAmounts(_Camel):
    """Worker tokens and tier-priced tokens (a field the budget does not limit is absent)."""

    tokens: int | None = Field(default=None, ge=0, description="Worker tokens.")
    cost: float | None = Field(default=None, ge=0, description="Tier-priced tokens.")


class LemonBudgetStatus(_Camel):
    """What the orchestration service reports of the budget's current window."""

    observed_generation: int | None = Field(
        default=None, description="The metadata.generation last reconciled."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Synced: True when the service holds the budget and reported its window; "
        "False with the reason (NoService, ServiceUnavailable, Invalid).",
    )
    window_start: str | None = Field(
        default=None, description="When the current window started (RFC 3339)."
    )
    spent: BudgetAmounts | None = Field(
        default=None, description="What the namespace's runs spent in the current window."
    )
    remaining: BudgetAmounts | None = Field(
        default=None, description="What the current window has left (the limits minus spent)."
    )
    runs: int | None = Field(
        default=None, ge=0, description="Runs that drew from the budget in the window."
    )
    stopped_runs: int | None = Field(
        default=None, ge=0, description="Runs the budget stopped or cut in the window."
    )
    message: str | None = Field(default=None, description="The budget in words.")


class LemonBudget(BaseModel):
    """The full Kubernetes resource form of a namespace budget."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    apiVersion: Literal["lemon.ai/v1alpha1"]
    kind: Literal["LemonBudget"]
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: LemonBudgetSpec


def shared_budget_name(namespace: str, name: str) -> str:
    """How the service and messages name a LemonBudget: ``LemonBudget team/tenant-a``."""
    return f"{BUDGET_KIND} {namespace}/{name}"
