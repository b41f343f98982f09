"""Saving and publishing a version: ``policy.json`` and ``result.json`` written, the staging
directory renamed to ``output_dir`` in one step, the result (at most 4 KiB) to the termination
log."""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from lemon import atomic
from lemon.learning.training_config import PACKAGED_BASE, TrainingConfig
from lemon.policy.version import (
    METADATA_FILE,
    PolicyMetadata,
    file_sha256,
    publish_directory,
    read_policy,
    write_metadata,
)
from lemon_train.progress import jsonable

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase, Trainer

__all__ = [
    "RESULT_FILE",
    "TERMINATION_LIMIT",
    "data_sha256",
    "parent_of",
    "publish_version",
    "save_version",
    "termination_message",
    "version_label",
]

RESULT_FILE = "result.json"
TERMINATION_LIMIT = 4096
"""Kubernetes keeps at most 4 KiB of a container's termination message."""


def data_sha256(data: str) -> str:
    """The training data's hash: of the file's bytes, or of the ``synthetic:<N>`` name."""
    path = Path(data)
    if path.is_file():
        return file_sha256(path)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def parent_of(base_model: str) -> str | None:
    """The policy version training started from (its absolute path), if it started from one."""
    path = Path(base_model).expanduser()
    if path.is_dir() and (path / METADATA_FILE).is_file():
        return str(path.resolve())
    return None


def version_label(config: TrainingConfig) -> str:
    return config.version or datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def save_version(
    trainer: Trainer,
    tokenizer: PreTrainedTokenizerBase,
    staging: Path,
    config: TrainingConfig,
    *,
    stage: Literal["sft", "grpo"],
    metrics: dict[str, Any],
) -> None:
    """Write the trained weights (a LoRA adapter merged in unless ``lora.merge`` is false) and
    the tokenizer to ``staging`` and publish it as the version (rank 0 only)."""
    model: Any = trainer.model
    if config.lora is not None and config.lora.merge:
        model = model.merge_and_unload()
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    publish_version(
        staging, config, stage=stage, metrics=metrics, parent=parent_of(config.base_model)
    )


def publish_version(
    staging: str | os.PathLike[str],
    config: TrainingConfig,
    *,
    stage: Literal["sft", "grpo"],
    metrics: dict[str, Any],
    parent: str | None,
) -> Path:
    """Finish a version written in ``staging`` (weights or adapter, tokenizer, metrics.jsonl):
    write ``policy.json`` and ``result.json``, rename it to ``output_dir`` in one step, then
    write the result to the termination log when that file exists. Returns ``output_dir``.

    Call on rank 0 only.
    """
    staging_path, final = Path(staging), Path(config.output_dir).resolve()
    adapter = any((staging_path / name).is_file() for name in ("adapter_config.json",))
    base = config.base_model
    if base != PACKAGED_BASE and Path(base).expanduser().is_dir():
        base = str(Path(base).expanduser().resolve())
    meta = PolicyMetadata(
        policy=config.policy,
        version=version_label(config),
        stage=stage,
        base_model=base,
        adapter=adapter,
        prompt_format=config.prompt_format,
        data_sha256=data_sha256(str(config.data)),
        parent=parent,
        metrics=jsonable(metrics),
    )
    write_metadata(staging_path, meta)
    result = {
        "policy": str(final),
        "version": meta.version,
        "stage": stage,
        "metrics": meta.metrics,
    }
    atomic.write_json(staging_path / RESULT_FILE, result)
    read_policy(staging_path)  # refuse to publish an incomplete version
    publish_directory(staging_path, final)
    log = Path(config.termination_log)
    if log.exists():
        log.write_text(termination_message(result), encoding="utf-8")
    return final


def termination_message(result: dict[str, Any]) -> str:
    """``result`` as compact JSON of at most 4 KiB (metrics dropped, largest first, to fit)."""
    metrics = dict(result.get("metrics") or {})
    while True:
        text = json.dumps({**result, "metrics": metrics}, separators=(",", ":"))
        if len(text.encode("utf-8")) <= TERMINATION_LIMIT or not metrics:
            return text[:TERMINATION_LIMIT]
        del metrics[max(metrics, key=lambda key: len(json.dumps(metrics[key])))]
