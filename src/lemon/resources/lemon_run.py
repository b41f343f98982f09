"""``LemonRun``: one task run on the cluster's tiers, from ``kubectl apply`` to the answer.

A run names its task and at most one source of the spec: ``specRef`` (a ``LemonSpec`` in the
namespace), an inline ``spec`` (the bare agents/output form), or ``policyRef`` (a
``LemonPolicy``: the version it serves writes the spec for the task). A run that gives only its
task is LEMON's to choose for, by the one resolution order (:mod:`lemon.policy.defaults`): the
namespace's default ``LemonPolicy`` (``spec.default: true``), else the orchestration service's
default policy (its own, else LEMON's built-in default). The operator hands the run
to the orchestration service (``lemon serve``) with the tier URLs of the capacity profile's
status; the service executes it once, keyed by the run's id (the object's uid), and the operator
writes the answer, each agent's tokens and the tier-priced cost into ``status``.

The spec of a run is immutable (a CEL transition rule): a new task is a new run. The pure
helpers here (:func:`answer_preview`, :func:`needed_tiers`, :func:`tier_endpoint`) are what the
operator uses to plan a run and build its status, so they are unit-tested without a cluster; the
cost is :class:`lemon.pricing.TierPrices` from the profile's ``costPerToken`` relative to its
medium tier's, in tier-priced tokens (:data:`lemon.pricing.COST_UNIT`: the unit of every cost
LEMON shows).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.alias_generators import to_camel

from lemon.budget import Budget
from lemon.resources.lemon_budget import BudgetAmounts
from lemon.resources.status import Condition, TierStatus
from lemon.spec.models import DNS1123_LABEL, AgentName, Capacity, ObjectMeta, Spec
from lemon.spec.roles import RoleLibrary, default_roles

__all__ = [
    "ANSWER_PREVIEW_CHARS",
    "KSERVE_OPENAI_PATH",
    "MAX_ANSWER_CHARS",
    "RUN_KIND",
    "TERMINAL_PHASES",
    "BudgetStop",
    "LemonRun",
    "LemonRunSpec",
    "LemonRunStatus",
    "LocalRef",
    "RunAgentStatus",
    "RunBudget",
    "RunBudgetStatus",
    "RunPhase",
    "RunTokens",
    "TierEndpoint",
    "answer_preview",
    "needed_tiers",
    "tier_endpoint",
]

RUN_KIND = "LemonRun"


class RunPhase(StrEnum):
    # where a run is, as ``status.phase`` says (no docstring: the field's description is the
    # CRD's)
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


TERMINAL_PHASES: frozenset[RunPhase] = frozenset({RunPhase.SUCCEEDED, RunPhase.FAILED})
MAX_ANSWER_CHARS = 16_384
"""The answer kept in status (longer answers are cut; the trace ConfigMap has the agents'
outputs). Keeps the object far below etcd's 1.5 MiB limit."""
ANSWER_PREVIEW_CHARS = 60
"""The printer column's answer: one line, this long at most."""

KSERVE_OPENAI_PATH = "/openai/v1"
"""Where KServe's huggingface runtime serves the OpenAI API on an InferenceService's URL."""

_Task = Annotated[str, StringConstraints(min_length=1, max_length=65536, pattern=r"\S")]


class _Camel(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


class LocalRef(_Camel):
    """A reference to an object of the given kind in the run's namespace."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=63, pattern=DNS1123_LABEL)] = (
        Field(description="The object's name (in the run's namespace).")
    )


class RunBudget(_Camel):
    """A run's own budget (:mod:`lemon.budget`): at least one of the three."""

    tokens: int | None = Field(
        default=None,
        ge=1,
        description="Worker tokens: prompt + completion of every model call of the run.",
    )
    cost: float | None = Field(
        default=None,
        gt=0,
        description="Tier-priced tokens: each worker token times its tier's price relative to "
        "the medium tier's (the unit of status.cost).",
    )
    wall_seconds: float | None = Field(
        default=None, gt=0, le=86400, description="Seconds of the whole run."
    )

    @model_validator(mode="after")
    def _a_limit(self) -> RunBudget:
        if self.tokens is None and self.cost is None and self.wall_seconds is None:
            raise ValueError("give at least one of tokens, cost, wallSeconds")
        return self

    def budget(self) -> Budget:
        """As the core's :class:`lemon.budget.Budget` (named ``spec.budget`` in messages)."""
        return Budget(
            tokens=self.tokens, cost=self.cost, wall_s=self.wall_seconds, source="spec.budget"
        )


BudgetStop = Literal["Run", "Namespace", "Refused"]


class RunBudgetStatus(_Camel):
    """A budgeted run's account: its budget, what it spent, what is left, why it stopped."""

    limits: RunBudget | None = Field(
        default=None, description="The run's own budget (spec.budget), when it has one."
    )
    text: str | None = Field(
        default=None,
        description="The budget in one line (printer column), e.g. 'tokens=2000,cost=800' and "
        "the namespace's LemonBudget, if any.",
    )
    spent: BudgetAmounts | None = Field(
        default=None, description="Worker tokens and tier-priced tokens the run spent."
    )
    spent_text: str | None = Field(
        default=None, description="What was spent in one line (printer column)."
    )
    remaining: BudgetAmounts | None = Field(
        default=None, description="What the run's own budget has left (its limits minus spent)."
    )
    wall_seconds: float | None = Field(default=None, ge=0, description="Seconds it ran.")
    reason: str | None = Field(
        default=None, description="Why a budget stopped the run or an agent, when one did."
    )
    stopped_by: BudgetStop | None = Field(
        default=None,
        description="Which budget stopped it: Run (its own), Namespace (the LemonBudget), "
        "Refused (its spec's estimate was over its budget before it ran).",
    )
    estimate: str | None = Field(
        default=None, description="The estimate checked before the run, in words."
    )
    namespace_budget: str | None = Field(
        default=None, description="The namespace's LemonBudget the run drew from, in words."
    )


class LemonRunSpec(_Camel):
    """The ``spec`` of a ``LemonRun`` (immutable once created)."""

    task: _Task = Field(description="The task to solve, e.g. a maths word problem.")
    spec_ref: LocalRef | None = Field(
        default=None,
        description="Run the spec of this LemonSpec (at most one of specRef, spec, policyRef; "
        "none: the namespace's default LemonPolicy, else LEMON's default policy, writes it).",
    )
    spec: Spec | None = Field(
        default=None,
        description="Run this spec, given inline: agents and output as in a LemonSpec "
        "(at most one of specRef, spec, policyRef).",
    )
    policy_ref: LocalRef | None = Field(
        default=None,
        description="Let this LemonPolicy write the spec: its served version, on its "
        "InferenceService, or a built-in policy (at most one of specRef, spec, policyRef).",
    )
    profile: AgentName | None = Field(
        default=None,
        description="The LemonCapacityProfile whose tiers run the agents; absent: the "
        "referenced LemonSpec's profile, else 'default'.",
    )
    deadline_seconds: int | None = Field(
        default=None,
        ge=1,
        le=86400,
        description="Fail the run if it has not finished this many seconds after it started "
        "(the service's own budget applies when absent).",
    )
    max_tokens: int | None = Field(
        default=None,
        ge=1,
        le=65536,
        description="Most completion tokens per agent; absent: the service's default.",
    )
    budget: RunBudget | None = Field(
        default=None,
        description="The run's own budget: tokens, cost (tier-priced tokens) and/or "
        "wallSeconds. The spec's estimate is checked against it before the run (over it, the "
        "run fails with reason BudgetRefused), and the service holds the run to it (reason "
        "BudgetExceeded when it stopped the run). The namespace's LemonBudget applies too.",
    )
    ttl_seconds_after_finished: int | None = Field(
        default=None,
        ge=0,
        le=31_536_000,
        description="Delete the run (and its trace) this many seconds after it finished; "
        "absent: keep it.",
    )

    @model_validator(mode="after")
    def _at_most_one_source(self) -> LemonRunSpec:
        given = [
            name
            for name, value in (
                ("specRef", self.spec_ref),
                ("spec", self.spec),
                ("policyRef", self.policy_ref),
            )
            if value is not None
        ]
        if len(given) > 1:
            raise ValueError(
                f"at most one of specRef, spec or policyRef may be given (got {', '.join(given)})"
            )
        return self


class RunTokens(_Camel):
    """Worker tokens of the run (policy tokens are not counted)."""

    prompt: int = Field(default=0, ge=0, description="Prompt tokens, all agents.")
    completion: int = Field(default=0, ge=0, description="Completion tokens, all agents.")
    total: int = Field(default=0, ge=0, description="prompt + completion.")


class RunAgentStatus(_Camel):
    """One agent of the run, as the service reported it."""

    name: str = Field(description="The agent's name in the spec.")
    role: str = Field(default="", description="Its base role.")
    tier: str = Field(description="The capacity tier it ran on: small, medium or large.")
    model: str = Field(default="", description="The model that answered (the tier's backend).")
    status: Literal["succeeded", "failed", "skipped"] = Field(
        description="succeeded, failed, or skipped (a dependency failed or the run ended)."
    )
    prompt_tokens: int = Field(default=0, ge=0, description="Prompt tokens of its calls.")
    completion_tokens: int = Field(default=0, ge=0, description="Completion tokens.")
    tokens: int = Field(default=0, ge=0, description="promptTokens + completionTokens.")
    latency_seconds: float = Field(default=0.0, ge=0, description="Wall time of its calls.")
    attempts: int = Field(default=0, ge=0, description="Calls made (retries included).")
    error: str | None = Field(default=None, description="Why it failed, when it did.")


class LemonRunStatus(_Camel):
    """What the operator found and did for a ``LemonRun``."""

    observed_generation: int | None = Field(
        default=None, description="The metadata.generation last reconciled."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="TiersReady (the tiers the run needs are up), Submitted (the service "
        "accepted the run id) and Succeeded (True, False with the reason, or Unknown while "
        "the run is pending or running).",
    )
    phase: RunPhase | None = Field(
        default=None, description="Pending, Running, Succeeded or Failed."
    )
    run_id: str | None = Field(
        default=None,
        description="The id the orchestration service knows the run by (the object's uid): "
        "the service executes a run id once, however often it is submitted.",
    )
    profile: str | None = Field(default=None, description="The capacity profile it runs on.")
    answer: str | None = Field(default=None, description="The output agent's answer.")
    answer_preview: str | None = Field(
        default=None, description="The answer's first line, shortened (printer column)."
    )
    spec: str | None = Field(default=None, description="The spec that ran, canonical YAML.")
    spec_origin: str | None = Field(
        default=None,
        description="Where the spec came from (a LemonSpec, inline, the policy that wrote it; "
        "a default policy named first: the namespace's LemonPolicy, else the service's default "
        "policy, else LEMON's built-in default, the best fixed team for the task's kind).",
    )
    agents: list[RunAgentStatus] | None = Field(
        default=None, description="One entry per agent: status, tier, model, tokens, latency."
    )
    tokens: RunTokens | None = Field(default=None, description="Worker tokens of all agents.")
    cost: float | None = Field(
        default=None,
        description="Tier-priced tokens (costUnit): each agent's tokens times its tier's price, "
        "the profile's costPerToken relative to its medium tier's (a medium token counts 1).",
    )
    cost_unit: str | None = Field(
        default=None, description="The unit of cost: 'tier-priced tokens'."
    )
    wall_seconds: float | None = Field(
        default=None, description="The engine's own wall time for the run."
    )
    budget: RunBudgetStatus | None = Field(
        default=None,
        description="A budgeted run's account (its own budget or its namespace's): the "
        "budget, spent, remaining, and the reason when a budget stopped it.",
    )
    trace: str | None = Field(
        default=None,
        description="ConfigMap holding the run's trace (key 'trace', JSONL; `lemon trace -` "
        "renders it), bounded in size.",
    )
    message: str | None = Field(default=None, description="Why the run is where it is.")
    start_time: str | None = Field(default=None, description="When the service accepted it.")
    completion_time: str | None = Field(default=None, description="When it finished.")


class LemonRun(BaseModel):
    """The full Kubernetes resource form of a run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    apiVersion: Literal["lemon.ai/v1alpha1"]
    kind: Literal["LemonRun"]
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: LemonRunSpec


def answer_preview(answer: str | None) -> str | None:
    """The answer's first non-empty line, at most ``ANSWER_PREVIEW_CHARS`` characters (an
    ellipsis marks a cut), for ``kubectl get lrun``."""
    if answer is None:
        return None
    line = next((text.strip() for text in answer.splitlines() if text.strip()), "")
    more = len(line) > ANSWER_PREVIEW_CHARS or line != answer.strip()
    if len(line) > ANSWER_PREVIEW_CHARS:
        line = line[: ANSWER_PREVIEW_CHARS - 1].rstrip()
    return f"{line}…" if more else line


def needed_tiers(spec: Spec, *, roles: RoleLibrary | None = None) -> list[Capacity]:
    """The tiers the spec's model agents run on, smallest first (a tool role's agent names a
    tier too, but no model runs it, so its tier need not be up)."""
    library = roles if roles is not None else default_roles()
    used = {
        agent.capacity
        for agent in spec.agents
        if agent.role not in library or not library[agent.role].is_tool
    }
    return [tier for tier in Capacity if tier in used]


@dataclass(frozen=True, slots=True)
class TierEndpoint:
    """One tier's OpenAI-compatible endpoint: its base URL (``…/openai/v1``) and the model name
    served there."""

    tier: Capacity
    url: str
    model: str


def tier_endpoint(status: TierStatus) -> TierEndpoint | None:
    """The endpoint of a tier's InferenceService, or None before KServe reports a URL. The model
    name is the tier's: the operator starts every tier's server with ``--model_name=<tier>``."""
    if not status.url:
        return None
    return TierEndpoint(status.tier, status.url.rstrip("/") + KSERVE_OPENAI_PATH, status.tier.value)
