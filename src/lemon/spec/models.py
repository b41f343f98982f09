"""The orchestration spec: pydantic models for the bare spec and the ``LemonSpec`` resource.

These models are the one source of truth for the spec's shape: the validator, the JSON Schema
(``lemon schema``) and the Kubernetes CRDs are all derived from them. Cross-field rules (unique
names, references, cycles, the output agent, known roles) live in :mod:`lemon.spec.validation`,
where they can be reported together and located in the YAML text.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

__all__ = [
    "API_VERSION",
    "DNS1123_LABEL",
    "HARD_MAX_AGENTS",
    "KIND",
    "Agent",
    "AgentName",
    "ApiVersion",
    "Capacity",
    "LemonSpec",
    "LemonSpecBody",
    "ObjectMeta",
    "Spec",
]

ApiVersion = Literal["lemon.ai/v1alpha1"]
"""The ``apiVersion`` of every LEMON kind (group ``lemon.ai``, version ``v1alpha1``)."""
API_VERSION: ApiVersion = "lemon.ai/v1alpha1"
KIND = "LemonSpec"
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
HARD_MAX_AGENTS = 1024
"""Upper bound written into the schema; the working limit (64 by default) is configurable."""


class Capacity(StrEnum):
    """Model tier an agent runs on."""

    SMALL = "small"
    MEDIUM = "medium"
    LARGE = "large"

    def downgraded(self) -> Capacity | None:
        """One tier down, or None for ``small``."""
        order = list(Capacity)
        index = order.index(self)
        return order[index - 1] if index else None


AgentName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=63, pattern=DNS1123_LABEL),
    Field(description="A lowercase DNS-1123 label: a-z, 0-9 and '-', 63 characters at most."),
]

_Duties = Annotated[
    str,
    StringConstraints(min_length=1, max_length=4096, pattern=r"\S"),
]


class Agent(BaseModel):
    """One worker of the team."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: AgentName = Field(description="Unique name of the agent within the spec.")
    role: Annotated[str, StringConstraints(min_length=1, max_length=63)] = Field(
        description="A base role from the role library (e.g. planner, math_solver, verifier)."
    )
    duties: _Duties | None = Field(
        default=None,
        description="Task-specific duties; when absent the base role's default duties apply.",
    )
    capacity: Capacity = Field(description="Model tier the agent runs on: small, medium, large.")
    depends_on: list[AgentName] = Field(
        default_factory=list,
        max_length=HARD_MAX_AGENTS,
        description="Names of the agents whose outputs this agent reads (the DAG's edges).",
    )


class Spec(BaseModel):
    """The bare orchestration spec: a team of agents and the one whose answer is returned."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agents: list[Agent] = Field(
        min_length=1,
        max_length=HARD_MAX_AGENTS,
        description="The agents (1 to 64 by default).",
    )
    output: AgentName | None = Field(
        default=None,
        description="The agent whose output is the answer; optional when exactly one agent "
        "has no dependants.",
    )


class LemonSpecBody(Spec):
    """The ``spec`` of a ``LemonSpec`` resource: the orchestration spec plus where it runs."""

    profile: AgentName | None = Field(
        default=None,
        description="Name of the LemonCapacityProfile whose tiers run the agents.",
    )
    task: Annotated[str, StringConstraints(min_length=1, max_length=65536)] | None = Field(
        default=None,
        description="A task to run: the operator creates a LemonRun of it (named "
        "<spec>-task-<generation>, owned by the spec) and shows its answer and tokens in "
        "status.run.",
    )


class ObjectMeta(BaseModel):
    """Kubernetes object metadata; fields other than these are kept as they are."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: AgentName | None = None
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class LemonSpec(BaseModel):
    """The full Kubernetes resource form of a spec."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    apiVersion: ApiVersion
    kind: Literal["LemonSpec"]
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: LemonSpecBody
    status: dict[str, Any] | None = Field(default=None, description="Written by the operator.")
