"""``LemonPolicy``: the versions of an orchestration policy and the one that is served.

Versions live in the spec, not the status: they are the policy's record (a status can always be
recomputed from the world; which checkpoints a training produced cannot). The operator appends a
version when a ``LemonTraining`` succeeds, and moves ``servedVersion`` to it when
``autoPromote`` is set; a person promotes or rolls back by setting ``servedVersion``. The served
version runs on the policy's own KServe InferenceService (huggingface runtime), which the
operator rolls whenever ``servedVersion`` changes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.alias_generators import to_camel

from lemon.resources.capacity_profile import Resources
from lemon.resources.status import Condition
from lemon.spec.models import ApiVersion, ObjectMeta

__all__ = [
    "MAX_VERSIONS",
    "POLICY_KIND",
    "LemonPolicy",
    "LemonPolicyStatus",
    "PolicyServing",
    "PolicySpec",
    "PolicyVersionEntry",
]

POLICY_KIND = "LemonPolicy"
MAX_VERSIONS = 256
_CHECKPOINT = r"^([A-Za-z0-9][\w.-]*/[\w.-]+|(hf|s3|gs|pvc|oci|https)://\S+|lemon://(best-fixed-team|learned))$"


class _Camel(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


class PolicyVersionEntry(_Camel):
    """One version of the policy: a checkpoint, where it came from and how it scored."""

    name: Annotated[
        str,
        StringConstraints(
            min_length=1, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
        ),
    ] = Field(description="Version label, unique within the policy.")
    checkpoint: Annotated[
        str, StringConstraints(min_length=3, max_length=2048, pattern=_CHECKPOINT)
    ] = Field(
        description="Storage URI of the version directory (pvc://, s3://, hf://, ...), or "
        "lemon://best-fixed-team or lemon://learned: a policy that ships with LEMON, run by the "
        "orchestration service itself (no InferenceService)."
    )

    @property
    def builtin(self) -> str | None:
        """The built-in policy this version names (``lemon://<name>``: one of
        :data:`lemon.policy.defaults.BUILTIN_POLICIES`), else None."""
        scheme = "lemon://"
        return self.checkpoint[len(scheme) :] if self.checkpoint.startswith(scheme) else None

    stage: Literal["base", "sft", "grpo"] = Field(
        default="base", description="What produced it: base, sft or grpo."
    )
    training: Annotated[str, StringConstraints(max_length=253)] | None = Field(
        default=None, description="The LemonTraining that produced it."
    )
    created: Annotated[str, StringConstraints(max_length=64)] | None = Field(
        default=None, description="When it was published (RFC 3339)."
    )
    metrics: dict[str, Any] | None = Field(
        default=None, description="What the training reported (its result.json metrics)."
    )


class PolicyServing(_Camel):
    """How the served version runs: a KServe InferenceService on the huggingface runtime."""

    runtime_args: list[Annotated[str, StringConstraints(min_length=1, max_length=256)]] = Field(
        default_factory=list,
        max_length=64,
        description="Extra vLLM server arguments, e.g. --max-model-len=4096.",
    )
    resources: Resources | None = Field(default=None, description="Model server resources.")
    min_replicas: int = Field(default=1, ge=0, le=100, description="Replicas kept running.")
    max_replicas: int | None = Field(
        default=None, ge=1, le=100, description="Autoscaling ceiling; absent = minReplicas."
    )

    @model_validator(mode="after")
    def _replica_range(self) -> PolicyServing:
        if self.max_replicas is not None and self.max_replicas < self.min_replicas:
            raise ValueError("maxReplicas must be at least minReplicas")
        return self


class PolicySpec(_Camel):
    """The ``spec`` of a ``LemonPolicy``."""

    versions: list[PolicyVersionEntry] = Field(
        default_factory=list,
        max_length=MAX_VERSIONS,
        description="Every version, oldest first; trainings append theirs.",
    )
    served_version: Annotated[str, StringConstraints(min_length=1, max_length=253)] | None = Field(
        default=None,
        description="The version to serve; setting an older one rolls back. Absent: nothing "
        "is served.",
    )
    auto_promote: bool = Field(
        default=False, description="Serve each new version as soon as a training publishes it."
    )
    default: bool = Field(
        default=False,
        description="The namespace's default policy: a LemonRun that gives only its task runs "
        "the spec this policy writes (at most one per namespace).",
    )
    serving: PolicyServing = Field(
        default_factory=PolicyServing, description="How the served version runs."
    )

    @model_validator(mode="after")
    def _versions_consistent(self) -> PolicySpec:
        names = [version.name for version in self.versions]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"duplicate versions: {', '.join(duplicates)}")
        if self.served_version is not None and self.served_version not in names:
            raise ValueError(f"servedVersion {self.served_version!r} is not one of the versions")
        return self

    def version(self, name: str) -> PolicyVersionEntry | None:
        return next((version for version in self.versions if version.name == name), None)


class LemonPolicyStatus(_Camel):
    """What the operator found and did for a ``LemonPolicy``."""

    observed_generation: int | None = Field(
        default=None, description="The metadata.generation last reconciled."
    )
    conditions: list[Condition] = Field(
        default_factory=list, description="Ready: the served version's endpoint is up."
    )
    served_version: str | None = Field(
        default=None, description="The version the InferenceService runs now."
    )
    version_count: int = Field(default=0, description="How many versions the policy has.")
    inference_service: str | None = Field(default=None, description="Its InferenceService.")
    url: str | None = Field(default=None, description="The policy endpoint, once KServe has one.")
    ready: bool = Field(default=False, description="Whether the served version is ready.")


class LemonPolicy(BaseModel):
    """The full Kubernetes resource form of a policy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    apiVersion: ApiVersion
    kind: Literal["LemonPolicy"]
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PolicySpec = Field(default_factory=PolicySpec)
