"""Where a run writes and how it resumes: ``<output_dir>.partial`` (the version being written),
``<output_dir>.checkpoints`` (the trainer's checkpoints, each appearing by rename), and the
start of a run that picks up the newest complete checkpoint."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from lemon import atomic
from lemon.learning.training_config import TrainingConfig
from lemon_train.distributed import DistInfo, barrier, init_from_env
from lemon_train.errors import TrainingError

__all__ = [
    "AtomicCheckpointMixin",
    "checkpoint_step",
    "checkpoints_dir",
    "latest_checkpoint",
    "rows_up_to",
    "staging_dir",
    "start_run",
    "truncate_metrics",
]

_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
_STAGING = ".staging"


def staging_dir(config: TrainingConfig) -> Path:
    """``<output_dir>.partial``: the version being written (renamed when complete)."""
    out = Path(config.output_dir)
    return out.with_name(out.name + ".partial")


def checkpoints_dir(config: TrainingConfig) -> Path:
    """``<output_dir>.checkpoints``: the trainer's checkpoints, for resuming."""
    out = Path(config.output_dir)
    return out.with_name(out.name + ".checkpoints")


def latest_checkpoint(config: TrainingConfig) -> Path | None:
    """The newest complete checkpoint to resume from (None when ``resume`` is off or none).

    Checkpoints appear by rename (:class:`AtomicCheckpointMixin`), so every ``checkpoint-N``
    directory is complete; a leftover ``.staging`` directory from a killed save is ignored.
    """
    if not config.resume:
        return None
    root = checkpoints_dir(config)
    if not root.is_dir():
        return None
    found = [
        (int(match.group(1)), entry)
        for entry in root.iterdir()
        if entry.is_dir() and (match := _CHECKPOINT.match(entry.name))
    ]
    return max(found)[1] if found else None


def checkpoint_step(checkpoint: Path) -> int:
    """The optimiser step a ``checkpoint-N`` directory was saved at."""
    return int(checkpoint.name.rsplit("-", 1)[1])


def rows_up_to(path: Path, step: int) -> list[str]:
    """The JSON lines of ``path`` logged at or before ``step`` (none if it is missing)."""
    if not path.is_file():
        return []
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:  # the line a kill cut short
            continue
        if isinstance(row, dict) and row.get("step", 0) <= step:
            kept.append(line)
    return kept


def truncate_metrics(path: Path, step: int) -> None:
    """Keep the metrics logged up to ``step`` (the checkpoint a resumed run starts from)."""
    if path.is_file():
        atomic.write_text(path, "".join(f"{line}\n" for line in rows_up_to(path, step)))


def start_run(config: TrainingConfig, stage: str) -> tuple[DistInfo, Path, Path | None, Path]:
    """What both stages do first: check the stage, join the process group, find the checkpoint
    to resume from, and (rank 0) prepare the staging directory: fresh for a new run, or with the
    metrics logged after the checkpoint cut (they will be logged again). Returns the process
    info, the staging directory, the checkpoint (or None) and the metrics file."""
    if config.stage != stage:
        raise TrainingError(f"stage: {config.stage!r}: `lemon train {stage}` needs stage: {stage}")
    info = init_from_env()
    staging = staging_dir(config)
    resume = latest_checkpoint(config)
    metrics_path = staging / config.metrics_file
    if info.is_main:
        if resume is None:
            shutil.rmtree(staging, ignore_errors=True)
            if not config.resume:
                shutil.rmtree(checkpoints_dir(config), ignore_errors=True)
        else:
            truncate_metrics(metrics_path, checkpoint_step(resume))
        staging.mkdir(parents=True, exist_ok=True)
    barrier()
    return info, staging, resume, metrics_path


class AtomicCheckpointMixin:
    """Make HF Trainer checkpoints appear atomically: each is written under
    ``<checkpoints>/.staging/checkpoint-N`` and renamed to ``<checkpoints>/checkpoint-N`` once
    every rank has finished writing, so a kill mid-save never leaves a directory that looks
    complete. Mix in before the trainer class: ``class T(AtomicCheckpointMixin, SFTTrainer)``.
    """

    _lemon_staging: str | None = None

    def _get_output_dir(self, trial: Any) -> str:
        if self._lemon_staging is not None:
            return self._lemon_staging
        out: str = super()._get_output_dir(trial)  # type: ignore[misc]
        return out

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        from transformers.trainer_utils import rotate_checkpoints

        trainer: Any = self
        run_dir = self._get_output_dir(trial)
        name = f"checkpoint-{trainer.state.global_step}"
        staging = os.path.join(run_dir, _STAGING)
        self._lemon_staging = staging
        try:
            super()._save_checkpoint(model, trial)  # type: ignore[misc]
        finally:
            self._lemon_staging = None
        barrier()
        if trainer.args.should_save:
            final = os.path.join(run_dir, name)
            if os.path.isdir(final):  # the same step saved again after a resume
                shutil.rmtree(final)
            _fsync_tree(os.path.join(staging, name))
            os.replace(os.path.join(staging, name), final)
            with contextlib.suppress(OSError):
                os.rmdir(staging)
            rotate_checkpoints(
                output_dir=run_dir,
                save_total_limit=trainer.args.save_total_limit,
                use_mtime=False,
            )
        barrier()


def _fsync_tree(root: str) -> None:
    """Flush a checkpoint's files to disk before the rename makes it visible."""
    for folder, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(folder, name), "rb") as handle:
                os.fsync(handle.fileno())
