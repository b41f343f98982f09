"""What both trainers are configured with: the shared ``TrainingArguments`` keywords and the
LoRA configuration."""

from __future__ import annotations

from typing import Any

import torch

from lemon.learning.training_config import TrainingConfig
from lemon_train.checkpoints import checkpoints_dir
from lemon_train.loading import resolve_base

__all__ = ["LLAMA_LINEAR", "lora_config", "trainer_arguments"]


def trainer_arguments(config: TrainingConfig) -> dict[str, Any]:
    """The ``TrainingArguments`` both stages share, as keywords for ``SFTConfig`` and
    ``GRPOConfig`` (each adds its own: batch sizes, lengths, the GRPO settings)."""
    hp = config.hyperparameters
    cuda = torch.cuda.is_available()
    return {
        "output_dir": str(checkpoints_dir(config)),
        "max_steps": hp.max_steps if hp.max_steps is not None else -1,
        "num_train_epochs": hp.epochs,
        "gradient_accumulation_steps": hp.gradient_accumulation_steps,
        "learning_rate": hp.learning_rate,
        "warmup_steps": hp.warmup_ratio,
        "lr_scheduler_type": hp.lr_scheduler,
        "weight_decay": hp.weight_decay,
        "seed": hp.seed,
        "save_strategy": "steps",
        "save_steps": hp.save_steps,
        "save_total_limit": hp.keep_checkpoints,
        "logging_steps": hp.logging_steps,
        "logging_first_step": True,
        "use_cpu": not cuda,
        "bf16": cuda,
        # TRL turns it on by default; on the CPU the models here fit in memory many times over
        # and recomputing every activation in the backward pass costs about a third more time
        "gradient_checkpointing": cuda,
        "report_to": [],
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
        "ddp_find_unused_parameters": False,
    }


LLAMA_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""The linear layers of a Llama-family block (SmolLM2, Qwen2.5): ``all-linear`` with
``lora.top_layers``."""


def lora_config(config: TrainingConfig, model: Any = None) -> Any:
    """peft's ``LoraConfig`` for ``config.lora``, or None (full fine-tuning). ``lora.top_layers``
    counts the layers of ``model`` (the loaded base) when given, else of the base's config
    (which an adapter version, e.g. an SFT warm start, does not have: pass the model)."""
    if config.lora is None:
        return None
    from peft import LoraConfig

    layers = None
    targets = config.lora.target_modules
    if config.lora.top_layers is not None:
        if model is not None:
            total = int(model.config.num_hidden_layers)
        else:
            from transformers import AutoConfig

            location, _ = resolve_base(config.base_model)
            total = int(AutoConfig.from_pretrained(location).num_hidden_layers)
        layers = list(range(max(0, total - config.lora.top_layers), total))
        if targets == "all-linear":  # peft takes layers_to_transform with named modules only
            targets = list(LLAMA_LINEAR)
    return LoraConfig(
        r=config.lora.r,
        lora_alpha=config.lora.alpha,
        lora_dropout=config.lora.dropout,
        target_modules=targets,
        layers_to_transform=layers,
        task_type="CAUSAL_LM",
    )
