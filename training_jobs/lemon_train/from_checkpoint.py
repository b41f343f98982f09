"""A saved step of a run published as a policy version of its own, without training again:
``lemon train STAGE --config FILE --checkpoint N``.

The step a held-out score chose is then the weights that were scored, not a second run to that
step (which on a CPU need not sample the same specs). The version holds the checkpoint's model
files (the adapter merged into the base weights when ``lora.merge`` is on, as a finished run
does), the run's metrics and credit logged up to that step, and ``metrics.published_from``
naming the checkpoint. Keep the checkpoints to choose among with
``hyperparameters.keep_checkpoints: null``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from lemon.learning.training_config import TrainingConfig
from lemon_train.checkpoints import checkpoint_step, checkpoints_dir, rows_up_to, staging_dir
from lemon_train.errors import TrainingError
from lemon_train.publishing import parent_of, publish_version, version_label

__all__ = ["TRAINER_STATE", "publish_checkpoint", "published_name"]

TRAINER_STATE = frozenset(
    {"optimizer.pt", "scheduler.pt", "trainer_state.json", "training_args.bin", "scaler.pt"}
)
"""What a checkpoint holds for resuming only (with ``rng_state*.pth``): not copied."""


def published_name(config: TrainingConfig, step: int) -> tuple[Path, str]:
    """Where checkpoint ``step`` of ``config``'s run is published by default, and its version
    label: ``<output_dir>-at<step>`` and ``<version>-at<step>``."""
    out = Path(config.output_dir)
    return out.with_name(f"{out.name}-at{step}"), f"{version_label(config)}-at{step}"


def publish_checkpoint(
    config: TrainingConfig,
    step: int,
    *,
    output_dir: str | None = None,
    version: str | None = None,
) -> Path:
    """Publish ``checkpoint-<step>`` of ``config``'s run (``<output_dir>.checkpoints``) as a
    version at ``output_dir`` (default ``<output_dir>-at<step>``), labelled ``version``
    (default ``<version>-at<step>``). Raises :class:`TrainingError` when that checkpoint is
    not kept, naming the ones that are."""
    root = checkpoints_dir(config)
    source = root / f"checkpoint-{step}"
    if not source.is_dir():
        kept = (
            sorted(checkpoint_step(p) for p in root.glob("checkpoint-*") if p.is_dir())
            if root.is_dir()
            else []
        )
        raise TrainingError(
            f"{source}: no such checkpoint (kept: {kept or 'none'}; a run keeps every one with "
            "hyperparameters.keep_checkpoints: null)"
        )
    where, label = published_name(config, step)
    target = config.model_copy(
        update={"output_dir": output_dir or str(where), "version": version or label}
    )
    staging = staging_dir(target)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    if config.lora is not None and config.lora.merge:
        from peft import PeftModel

        from lemon_train.loading import load_model_and_tokenizer

        base, tokenizer = load_model_and_tokenizer(config.base_model)
        merged = PeftModel.from_pretrained(base, str(source)).merge_and_unload()
        merged.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
    else:
        for path in source.iterdir():
            resuming = path.name in TRAINER_STATE or path.name.startswith("rng_state")
            if path.is_file() and not resuming:
                shutil.copy2(path, staging / path.name)
    # the run's logs up to the step: in its version once it finished, else in its staging
    run_dir = Path(config.output_dir)
    logs = run_dir if (run_dir / config.metrics_file).is_file() else staging_dir(config)
    history: list[dict[str, Any]] = []
    for name in (config.metrics_file, "credit.jsonl"):
        lines = rows_up_to(logs / name, step)
        if lines:
            (staging / name).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        if name == config.metrics_file:
            history = [json.loads(line) for line in lines]
    metrics: dict[str, Any] = {
        "steps": step,
        "published_from": str(source.resolve()),
        **{
            f"{key}_last": row[key]
            for key in ("reward", "loss", "heldout/reward")
            for row in history
            if isinstance(row.get(key), (int, float))
        },
    }
    return publish_version(
        staging, target, stage=config.stage, metrics=metrics, parent=parent_of(config.base_model)
    )
