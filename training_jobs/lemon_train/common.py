"""What both training stages share: loading a base, atomic checkpoints, metrics, publishing.

The output contract is :mod:`lemon.learning.training_config`'s: the version is written under
``<output_dir>.partial`` and renamed to ``output_dir`` when complete; checkpoints live in
``<output_dir>.checkpoints``; ``metrics.jsonl`` and ``result.json`` sit inside the version and
the result also goes (compact, at most 4 KiB) to the termination log when that file exists.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    TrainerCallback,
)

from lemon import atomic
from lemon.learning.training_config import PACKAGED_BASE, TrainingConfig
from lemon.policy.version import (
    METADATA_FILE,
    PolicyMetadata,
    PolicyVersionError,
    file_sha256,
    publish_directory,
    read_policy,
    write_metadata,
)
from lemon_train.distributed import DistInfo, barrier, init_from_env

__all__ = [
    "RESULT_FILE",
    "TERMINATION_LIMIT",
    "AtomicCheckpointMixin",
    "DistInfo",
    "MetricsCallback",
    "TrainingError",
    "checkpoints_dir",
    "data_sha256",
    "default_dtype",
    "init_from_env",
    "latest_checkpoint",
    "load_model_and_tokenizer",
    "load_tokenizer",
    "lora_config",
    "metrics_callback",
    "parent_of",
    "publish_version",
    "quiet_stdout",
    "resolve_base",
    "save_version",
    "staging_dir",
    "trainer_arguments",
    "version_label",
]

RESULT_FILE = "result.json"
TERMINATION_LIMIT = 4096
"""Kubernetes keeps at most 4 KiB of a container's termination message."""
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
_STAGING = ".staging"


class TrainingError(RuntimeError):
    """A training run that cannot proceed (bad data, unusable base model); says where."""


# ── loading ──────────────────────────────────────────────────────────────────────────────


def default_dtype() -> torch.dtype:
    """bf16 on CUDA; float32 on CPU (bf16 matmuls are slow there and lose precision in Adam)."""
    return torch.bfloat16 if torch.cuda.is_available() else torch.float32


def resolve_base(base_model: str) -> tuple[str, PolicyMetadata | None]:
    """Where ``base_model`` loads from, and its policy metadata when it is a policy version.

    ``'packaged'`` is the SmolLM2-135M-Instruct GGUF converted once to a cached HF directory; a
    directory holding ``policy.json`` is a policy version; any other directory is a plain HF
    model directory; anything else is a Hugging Face id (which needs the hub).
    """
    if base_model == PACKAGED_BASE:
        from lemon.backends.packaged import converted_packaged_model

        return str(converted_packaged_model("bfloat16")), None
    path = Path(base_model).expanduser()
    if path.is_dir():
        if (path / METADATA_FILE).is_file():
            try:
                return str(path.resolve()), read_policy(path)
            except PolicyVersionError as exc:
                raise TrainingError(f"base_model: {exc}") from None
        if not (path / "config.json").is_file():
            raise TrainingError(
                f"base_model: {path}: a directory without config.json or policy.json "
                "(not a model or a policy version)"
            )
        return str(path.resolve()), None
    if path.exists():
        raise TrainingError(f"base_model: {path}: not a directory")
    if base_model.startswith((".", "/", "~")):
        raise TrainingError(f"base_model: {base_model}: no such directory")
    return base_model, None


def load_tokenizer(base_model: str) -> Any:
    """The tokenizer of ``base_model`` (see :func:`resolve_base`), with a pad token set."""
    location, _ = resolve_base(base_model)
    tokenizer = AutoTokenizer.from_pretrained(location)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model_and_tokenizer(
    base_model: str, *, dtype: torch.dtype | str | None = None
) -> tuple[Any, Any]:
    """A causal LM and its tokenizer from ``'packaged'``, an HF id, an HF directory or a policy
    version (full weights, or a LoRA adapter applied to its own ``base_model`` and merged, so the
    caller always gets a plain model it can fine-tune or wrap in a new adapter)."""
    location, meta = resolve_base(base_model)
    resolved = default_dtype() if dtype is None else dtype
    if isinstance(resolved, str):
        resolved = getattr(torch, resolved)
    tokenizer = load_tokenizer(base_model)
    if meta is not None and meta.adapter:
        from peft import PeftModel

        base, _ = load_model_and_tokenizer(_adapter_base(meta, location), dtype=resolved)
        model: Any = PeftModel.from_pretrained(base, location).merge_and_unload()
    else:
        try:
            model = AutoModelForCausalLM.from_pretrained(location, dtype=resolved)
        except OSError as exc:
            raise TrainingError(f"base_model: {base_model}: cannot load: {exc}") from None
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def _adapter_base(meta: PolicyMetadata, location: str) -> str:
    if meta.base_model == location:
        raise TrainingError(f"base_model: {location}: adapter version names itself as its base")
    return meta.base_model


# ── where a run writes ───────────────────────────────────────────────────────────────────


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


def truncate_metrics(path: Path, step: int) -> None:
    """Keep the metrics logged up to ``step`` (the checkpoint a resumed run starts from)."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:  # the line a kill cut short
            continue
        if isinstance(row, dict) and row.get("step", 0) <= step:
            kept.append(line)
    atomic.write_text(path, "".join(f"{line}\n" for line in kept))


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


# ── what both trainers are configured with ───────────────────────────────────────────────


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
        "weight_decay": hp.weight_decay,
        "seed": hp.seed,
        "save_strategy": "steps",
        "save_steps": hp.save_steps,
        "save_total_limit": 2,
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


def lora_config(config: TrainingConfig) -> Any:
    """peft's ``LoraConfig`` for ``config.lora``, or None (full fine-tuning)."""
    if config.lora is None:
        return None
    from peft import LoraConfig

    layers = None
    targets = config.lora.target_modules
    if config.lora.top_layers is not None:
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


def metrics_callback(
    config: TrainingConfig, *, path: Path | None = None, is_main: bool = True
) -> MetricsCallback:
    """The callback logging every step to ``path`` (default: the staging version's
    ``metrics.jsonl``)."""
    return MetricsCallback(path or staging_dir(config) / config.metrics_file, is_main=is_main)


def save_version(
    trainer: Any,
    tokenizer: Any,
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


# ── checkpoints and metrics inside the trainer ───────────────────────────────────────────


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
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **_: Any
    ) -> None:
        if not logs:
            return
        row = {"step": state.global_step, "epoch": state.epoch, **_jsonable(logs)}
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


def quiet_stdout(trainer: Any) -> None:
    """Drop the HF printer/progress callbacks so stdout carries only what the CLI prints."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)


def _jsonable(logs: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in logs.items():
        if isinstance(value, torch.Tensor):
            value = value.item() if value.numel() == 1 else value.tolist()
        if isinstance(value, (int, float, str, bool, list)) or value is None:
            out[key] = value
    return out


# ── publishing ───────────────────────────────────────────────────────────────────────────


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
        metrics=_jsonable(metrics),
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
