"""Every logged step to ``metrics.jsonl`` (rank 0) and to stderr; stdout carries only what the
CLI prints."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import torch
from transformers import Trainer, TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from lemon.learning.training_config import TrainingConfig
from lemon_train.checkpoints import staging_dir

__all__ = ["MetricsCallback", "jsonable", "metrics_callback", "quiet_stdout"]


def metrics_callback(
    config: TrainingConfig, *, path: Path | None = None, is_main: bool = True
) -> MetricsCallback:
    """The callback logging every step to ``path`` (default: the staging version's
    ``metrics.jsonl``)."""
    return MetricsCallback(path or staging_dir(config) / config.metrics_file, is_main=is_main)


class MetricsCallback(TrainerCallback):
    """Append every logged step to a JSONL file (rank 0 only) and keep the last values.

    Each line is ``{"step", "epoch", ...the trainer's logs...}`` (loss, learning_rate,
    num_tokens, grad_norm for SFT; the GRPO trainer adds its own keys). With ``echo`` the row
    is also printed to stderr; remove the trainer's own ``PrinterCallback``, which prints to
    stdout (:func:`quiet_stdout`).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, is_main: bool = True, echo: bool = True
    ) -> None:
        self.path = Path(path)
        self.is_main = is_main
        self.echo = echo
        self.last: dict[str, Any] = {}
        self.history: list[dict[str, Any]] = []

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, Any] | None = None,
        **_: Any,
    ) -> None:
        if not logs:
            return
        row = {"step": state.global_step, "epoch": state.epoch, **jsonable(logs)}
        self.history.append(row)
        self.last.update(row)
        if not self.is_main:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
        if self.echo:  # progress goes to stderr: stdout carries only the version's path
            shown = {key: _short(value) for key, value in row.items() if value is not None}
            print(json.dumps(shown), file=sys.stderr, flush=True)


def _short(value: Any) -> Any:
    return float(f"{value:.4g}") if isinstance(value, float) else value


def quiet_stdout(trainer: Trainer) -> None:
    """Drop the HF printer/progress callbacks so stdout carries only what the CLI prints."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)


def jsonable(logs: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in logs.items():
        if isinstance(value, torch.Tensor):
            value = value.item() if value.numel() == 1 else value.tolist()
        if isinstance(value, (int, float, str, bool, list)) or value is None:
            out[key] = value
    return out
