"""``lemon train sft``: supervised warm start of the orchestration policy.

TRL's :class:`~trl.SFTTrainer` on conversational prompt/completion rows (``lemon teacher``
writes them: ``{"prompt": [messages], "completion": [{"role": "assistant", "content": YAML}],
"provenance": {...}}``). With prompt/completion data TRL computes the loss on completion tokens
only (labels are -100 on the prompt), so the policy learns to write specs, not to echo the
role library. Optional LoRA (peft), merged into the weights on publish unless ``lora.merge`` is
false. Checkpoints appear atomically (:class:`~lemon_train.checkpoints.AtomicCheckpointMixin`) and a
rerun with the same ``output_dir`` resumes from the newest one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from trl import SFTConfig, SFTTrainer

from lemon.jsonl import JsonLineError, json_lines
from lemon.learning.training_config import TrainingConfig
from lemon.learning.training_data import FileData, TrainingData, parse_data
from lemon_train.arguments import lora_config, trainer_arguments
from lemon_train.checkpoints import AtomicCheckpointMixin, checkpoint_step, start_run
from lemon_train.distributed import barrier
from lemon_train.errors import TrainingError
from lemon_train.loading import load_model_and_tokenizer
from lemon_train.progress import MetricsCallback, metrics_callback, quiet_stdout
from lemon_train.publishing import save_version

__all__ = ["LemonSFTTrainer", "build_trainer", "load_rows", "run"]

_ROLES = frozenset({"system", "user", "assistant"})


class LemonSFTTrainer(AtomicCheckpointMixin, SFTTrainer):
    """SFTTrainer whose checkpoints appear by rename (never half-written)."""


def load_rows(data: TrainingData | str) -> list[dict[str, Any]]:
    """Read SFT rows from JSONL, checking each row's shape (errors say ``FILE:LINE: ...``).

    A row is TRL's prompt/completion format, conversational (lists of ``{"role", "content"}``
    messages; the completion one assistant message) or plain strings; other keys
    (``provenance``) are dropped.
    """
    if isinstance(data, str):
        data = parse_data(data)
    if not isinstance(data, FileData):
        raise TrainingError(
            f"data: {data}: SFT reads JSONL rows; write rows to a file first "
            "(`lemon teacher`, `lemon teacher tables`), or train on it with `lemon train grpo`"
        )
    path = data.path
    rows: list[dict[str, Any]] = []
    try:
        rows.extend(_check_row(row, where) for where, _, row in json_lines(Path(path), label=path))
    except OSError as exc:
        raise TrainingError(f"data: {path}: cannot read: {exc.strerror or exc}") from None
    except JsonLineError as exc:
        raise TrainingError(str(exc)) from None
    if not rows:
        raise TrainingError(f"data: {path}: no rows (a JSONL file of prompt/completion objects)")
    kinds = {isinstance(row["prompt"], str) for row in rows}
    if len(kinds) > 1:
        raise TrainingError(f"data: {path}: mixes string and conversational rows")
    return rows


def _check_row(row: Any, where: str) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise TrainingError(f"{where}: a row is an object, got {type(row).__name__}")
    for key in ("prompt", "completion"):
        if key not in row:
            raise TrainingError(f"{where}: missing {key!r}")
    prompt, completion = row["prompt"], row["completion"]
    if isinstance(prompt, str) and isinstance(completion, str):
        if not completion.strip():
            raise TrainingError(f"{where}: completion: empty")
        return {"prompt": prompt, "completion": completion}
    if isinstance(prompt, str) or isinstance(completion, str):
        raise TrainingError(f"{where}: prompt and completion must both be strings or both lists")
    _check_messages(prompt, f"{where}: prompt")
    _check_messages(completion, f"{where}: completion")
    if len(completion) != 1 or completion[0]["role"] != "assistant":
        raise TrainingError(f"{where}: completion: one assistant message expected")
    if not completion[0]["content"].strip():
        raise TrainingError(f"{where}: completion: empty")
    if prompt[-1]["role"] == "assistant":
        raise TrainingError(f"{where}: prompt: ends with an assistant message")
    return {
        "prompt": [{"role": m["role"], "content": m["content"]} for m in prompt],
        "completion": [{"role": "assistant", "content": completion[0]["content"]}],
    }


def _check_messages(messages: Any, where: str) -> None:
    if not isinstance(messages, list) or not messages:
        raise TrainingError(f"{where}: a non-empty list of messages expected")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise TrainingError(f"{where}[{index}]: a message is an object")
        if message.get("role") not in _ROLES:
            raise TrainingError(
                f"{where}[{index}].role: {message.get('role')!r} is not one of {sorted(_ROLES)}"
            )
        if not isinstance(message.get("content"), str):
            raise TrainingError(f"{where}[{index}].content: a string expected")


def sft_arguments(config: TrainingConfig) -> SFTConfig:
    hp = config.hyperparameters
    return SFTConfig(
        **trainer_arguments(config),
        per_device_train_batch_size=hp.per_device_batch_size,
        max_length=hp.max_length,
        completion_only_loss=True,
    )


def build_trainer(
    config: TrainingConfig, *, metrics_path: Path | None = None, is_main: bool = True
) -> tuple[LemonSFTTrainer, MetricsCallback, Any]:
    """The configured trainer (data read, model loaded, LoRA applied), its metrics callback and
    the tokenizer; nothing trained yet."""
    from datasets import Dataset

    rows = load_rows(config.data)
    model, tokenizer = load_model_and_tokenizer(config.base_model)
    metrics = metrics_callback(config, path=metrics_path, is_main=is_main)
    trainer = LemonSFTTrainer(
        model=model,
        args=sft_arguments(config),
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=lora_config(config, model),
        callbacks=[metrics],
    )
    quiet_stdout(trainer)
    kept = _rows(trainer) or 0
    if kept == 0:
        raise TrainingError(
            f"data: {config.data}: every row's prompt fills max_length "
            f"({config.hyperparameters.max_length} tokens): no completion token left to train on"
        )
    if kept < len(rows) and is_main:
        print(
            f"lemon train: {len(rows) - kept} of {len(rows)} rows dropped: their prompt fills "
            f"max_length ({config.hyperparameters.max_length} tokens)",
            file=sys.stderr,
        )
    return trainer, metrics, tokenizer


def _rows(trainer: LemonSFTTrainer) -> int | None:
    """How many rows the trainer kept (after dropping those with no completion token left)."""
    dataset: Any = trainer.train_dataset  # a datasets.Dataset, which ships no types
    return len(dataset) if dataset is not None else None


def run(config: TrainingConfig) -> Path:
    """Train, publish the version at ``config.output_dir`` (rank 0) and return its path."""
    info, staging, resume, metrics_path = start_run(config, "sft")
    trainer, metrics, tokenizer = build_trainer(
        config, metrics_path=metrics_path, is_main=info.is_main
    )
    output = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    final = Path(config.output_dir).resolve()
    if info.is_main:
        summary = {
            "train_loss": output.training_loss,
            "final_loss": metrics.last.get("loss"),
            "steps": trainer.state.global_step,
            "num_tokens": metrics.last.get("num_tokens"),
            "rows": _rows(trainer),
            "resumed_from_step": checkpoint_step(resume) if resume else None,
            "runtime_s": output.metrics.get("train_runtime"),
        }
        save_version(trainer, tokenizer, staging, config, stage="sft", metrics=summary)
    barrier()
    return final
