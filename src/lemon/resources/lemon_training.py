"""``LemonTraining``: one training run (SFT or counterfactual GRPO) as a Kubernetes resource.

The spec embeds the parts of :class:`lemon.learning.training_config.TrainingConfig`
(hyperparameters, counterfactual settings, reward weights, LoRA) in camelCase, plus what only a
cluster needs:
the image, replicas, resources and where data and output live. :func:`training_config` turns
a spec into the exact ``TrainingConfig`` the operator renders into the PyTorchJob's ConfigMap,
so the resource and ``lemon train --config`` can never disagree on a field.

Where a run writes: ``pvc://<output.pvc>/<output.path>/<policy>/<version>``, mounted in the pods
at ``/var/lemon/output``. The version label is derived from the training's name and uid
(:func:`produced_version`), so every training (and every retry of its pods) writes its own
directory and the operator can publish it idempotently.
"""

from __future__ import annotations

import posixpath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.alias_generators import to_camel

from lemon.learning.training_config import (
    PACKAGED_BASE,
    CounterfactualConfig,
    GenerationConfig,
    HyperParameters,
    LoraConfig,
    TrainingConfig,
)
from lemon.resources.capacity_profile import Resources
from lemon.resources.status import Condition
from lemon.reward import RewardConfig
from lemon.spec.models import ApiVersion, ObjectMeta
from lemon.spec.mutations import PAPER_KINDS, MutationKind

__all__ = [
    "CONFIG_PATH",
    "DATA_MOUNT",
    "OUTPUT_MOUNT",
    "TRAINING_KIND",
    "Counterfactual",
    "DataSource",
    "LemonTraining",
    "LemonTrainingStatus",
    "Lora",
    "OutputLocation",
    "Rewards",
    "TrainingPhase",
    "TrainingSpec",
    "checkpoint_uri",
    "output_dir",
    "produced_version",
    "training_config",
]

TRAINING_KIND = "LemonTraining"
CONFIG_PATH = "/etc/lemon/train.yaml"
"""Where the rendered TrainingConfig is mounted in the training pods."""
OUTPUT_MOUNT = "/var/lemon/output"
"""Where ``spec.output.pvc`` is mounted in the training pods."""
DATA_MOUNT = "/var/lemon/data"
"""Where ``spec.data.pvc`` is mounted (read-only) in the training pods."""

DnsName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"),
]
RelativePath = Annotated[
    str, StringConstraints(min_length=1, max_length=1024, pattern=r"^[\w.-]+(/[\w.-]+)*$")
]
TrainingPhase = Literal["Pending", "Created", "Running", "Restarting", "Succeeded", "Failed"]


_CAMEL = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)


class _Camel(BaseModel):
    model_config = _CAMEL


class Rewards(RewardConfig):
    """R_orch's weights (:class:`lemon.reward.RewardConfig`), camelCase as in a resource."""

    model_config = _CAMEL


class Counterfactual(CounterfactualConfig):
    """Localized counterfactual credit (GRPO only)."""

    model_config = _CAMEL

    kinds: list[MutationKind] = Field(
        default_factory=lambda: list(PAPER_KINDS),
        max_length=len(MutationKind),
        description="Mutation kinds: drop_dependency, rollback_role, downgrade_capacity (the "
        "default, the paper's three), upgrade_capacity, remove_agent (two-way edits).",
    )


class TrainingGeneration(GenerationConfig):
    """How GRPO samples specs: ``transformers`` (default) or ``vllm`` in ``colocate`` mode (on
    the pods' GPUs: give them ``nvidia.com/gpu`` in ``resources``) or ``server`` mode."""

    model_config = _CAMEL


_Modules = list[Annotated[str, StringConstraints(min_length=1, max_length=128)]]


class Lora(LoraConfig):
    """LoRA adapters instead of full fine-tuning; ``targetModules`` absent means all-linear."""

    model_config = _CAMEL

    target_modules: _Modules | None = Field(  # type: ignore[assignment]
        default=None, max_length=64, description="Module names to adapt; absent: all-linear."
    )


class DataSource(_Camel):
    """The training data: a file in the image, a file on a claim, or ``synthetic:<N>``."""

    path: Annotated[str, StringConstraints(min_length=1, max_length=1024)] = Field(
        description="JSONL file (relative to the claim when pvc is set), or synthetic:<N>."
    )
    pvc: DnsName | None = Field(
        default=None, description=f"PersistentVolumeClaim mounted read-only at {DATA_MOUNT}."
    )

    @model_validator(mode="after")
    def _path_fits(self) -> DataSource:
        if self.path.startswith("synthetic:"):
            if self.pvc is not None:
                raise ValueError("synthetic data needs no pvc")
            if not self.path.removeprefix("synthetic:").isdigit():
                raise ValueError("synthetic data is synthetic:<N> (a number of tasks)")
        elif self.pvc is not None and (self.path.startswith("/") or ".." in self.path.split("/")):
            raise ValueError("a path on a pvc is relative and has no '..'")
        elif self.pvc is None and not self.path.startswith("/"):
            raise ValueError("without a pvc, the data path is absolute (a file in the image)")
        return self


class OutputLocation(_Camel):
    """Where produced versions go: ``pvc://<pvc>/<path>/<policy>/<version>``."""

    pvc: DnsName = Field(description=f"PersistentVolumeClaim mounted at {OUTPUT_MOUNT}.")
    path: RelativePath = Field(default="policies", description="Folder on the claim.")

    @model_validator(mode="after")
    def _inside_the_claim(self) -> OutputLocation:
        if ".." in self.path.split("/"):
            raise ValueError("output.path stays inside the claim (no '..')")
        return self


class TrainingSpec(_Camel):
    """The ``spec`` of a ``LemonTraining`` (immutable: a new run is a new resource)."""

    stage: Literal["sft", "grpo"] = Field(description="sft or grpo.")
    policy: DnsName = Field(description="The LemonPolicy that receives the produced version.")
    base_model: Annotated[str, StringConstraints(min_length=1, max_length=1024)] = Field(
        default=PACKAGED_BASE,
        description="Where training starts: a Hugging Face id, a path in the image, or "
        "'packaged' (SmolLM2-135M-Instruct). Ignored when fromVersion is set.",
    )
    from_version: DnsName | None = Field(
        default=None,
        description="Start from this version of the policy (its checkpoint must be on the "
        "output claim).",
    )
    data: DataSource = Field(description="The training data.")
    output: OutputLocation = Field(description="Where the produced version is written.")
    hyperparameters: HyperParameters = Field(default_factory=HyperParameters)
    counterfactual: Counterfactual = Field(default_factory=Counterfactual)
    generation: TrainingGeneration = Field(default_factory=TrainingGeneration)
    rewards: Rewards = Field(default_factory=Rewards)
    lora: Lora | None = Field(default=None, description="LoRA instead of full fine-tuning.")
    profile: Annotated[str, StringConstraints(min_length=1, max_length=253)] = Field(
        default="embedded", description="Capacity profile executing sampled specs (GRPO)."
    )
    image: Annotated[str, StringConstraints(min_length=1, max_length=512)] = Field(
        description="Training image; its entry point has `lemon train`."
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    replicas: int = Field(
        default=1, ge=1, le=256, description="Pods in all: one Master and replicas-1 Workers."
    )
    resources: Resources | None = Field(
        default=None, description="Per pod, e.g. limits: {nvidia.com/gpu: 1}."
    )
    backoff_limit: int = Field(default=2, ge=0, le=100, description="Pod restarts allowed.")
    active_deadline_seconds: int | None = Field(
        default=None, ge=1, description="Fail the run after this long."
    )
    service_account_name: DnsName | None = None


class LemonTrainingStatus(_Camel):
    """What the operator found and did for a ``LemonTraining``."""

    observed_generation: int | None = Field(
        default=None, description="The metadata.generation last reconciled."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="The PyTorchJob's (Created, Running, Restarting, Succeeded, Failed) and "
        "Published (the version is on the policy).",
    )
    phase: TrainingPhase | None = Field(default=None, description="The job's latest state.")
    job: str | None = Field(default=None, description="The PyTorchJob running the training.")
    produced_version: str | None = Field(
        default=None, description="The policy version this training produced."
    )
    checkpoint: str | None = Field(default=None, description="Where the version lives (URI).")
    metrics: dict[str, Any] | None = Field(
        default=None, description="What the job reported in result.json."
    )
    start_time: str | None = None
    completion_time: str | None = None


class LemonTraining(BaseModel):
    """The full Kubernetes resource form of a training run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    apiVersion: ApiVersion
    kind: Literal["LemonTraining"]
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TrainingSpec


def produced_version(name: str, uid: str) -> str:
    """The version label a training publishes: its name and the start of its uid (a training
    deleted and created again under the same name produces a different version)."""
    return f"{name}-{uid.replace('-', '')[:8]}"


def _version_path(spec: TrainingSpec, version: str) -> str:
    return posixpath.join(spec.output.path, spec.policy, version)


def output_dir(spec: TrainingSpec, version: str) -> str:
    """The version's directory inside the training pods."""
    return posixpath.join(OUTPUT_MOUNT, _version_path(spec, version))


def checkpoint_uri(spec: TrainingSpec, version: str) -> str:
    """The version's storage URI (what KServe's ``storageUri`` reads)."""
    return f"pvc://{spec.output.pvc}/{_version_path(spec, version)}"


def training_config(
    spec: TrainingSpec, *, version: str, base_model: str | None = None
) -> TrainingConfig:
    """The ``TrainingConfig`` the pods run with (``base_model`` overrides the spec's, as the
    operator does when resolving ``fromVersion``)."""
    data = spec.data.path
    if spec.data.pvc is not None:
        data = posixpath.join(DATA_MOUNT, data)
    lora = None
    if spec.lora is not None:
        lora = LoraConfig(
            r=spec.lora.r,
            alpha=spec.lora.alpha,
            dropout=spec.lora.dropout,
            target_modules=spec.lora.target_modules or "all-linear",
            merge=spec.lora.merge,
        )
    return TrainingConfig(
        stage=spec.stage,
        base_model=base_model or spec.base_model,
        data=data,
        output_dir=output_dir(spec, version),
        policy=spec.policy,
        version=version,
        lora=lora,
        hyperparameters=spec.hyperparameters,
        counterfactual=CounterfactualConfig.model_validate(
            spec.counterfactual.model_dump(by_alias=False)
        ),
        generation=GenerationConfig.model_validate(spec.generation.model_dump(by_alias=False)),
        rewards=RewardConfig.model_validate(spec.rewards.model_dump(by_alias=False)),
        profile=spec.profile,
    )
