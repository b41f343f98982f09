"""Policy versions: a directory a trained (or base) orchestration policy lives in.

Layout (``lemon-policy/v1``)::

    <version>/
      policy.json          metadata (this module's PolicyMetadata)
      config.json, model.safetensors, generation_config.json     full weights, or
      adapter_config.json, adapter_model.safetensors              a LoRA adapter over base_model
      tokenizer.json, tokenizer_config.json, ...                  the tokenizer (chat template)
      metrics.jsonl        training metrics, one object per logged step (optional)
      result.json          what the training run reported (optional)

``lemon run --policy PATH`` and ``lemon eval --policy PATH`` load such a directory; the training
entry points write one (atomically: the directory appears complete or not at all). Only
metadata is handled here (no torch): loading weights is the in-process backend's job.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lemon import atomic

__all__ = [
    "FORMAT",
    "METADATA_FILE",
    "PolicyMetadata",
    "PolicyVersionError",
    "file_sha256",
    "publish_directory",
    "read_policy",
    "write_metadata",
]

FORMAT: Literal["lemon-policy/v1"] = "lemon-policy/v1"
METADATA_FILE = "policy.json"
_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
_ADAPTER = ("adapter_model.safetensors", "adapter_model.bin")


class PolicyVersionError(ValueError):
    """A directory that is not a usable policy version (the message says why and where)."""


class PolicyMetadata(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["lemon-policy/v1"] = FORMAT
    policy: str = Field(default="default", description="The policy this is a version of.")
    version: str = Field(description="Version label, unique within the policy.")
    stage: Literal["base", "sft", "grpo"]
    base_model: str = Field(description="What training started from (id, path or 'packaged').")
    adapter: bool = Field(default=False, description="LoRA adapter files instead of weights.")
    prompt_format: str = Field(
        default="lemon-policy-prompt/v1", description="lemon.policy.prompt version it expects."
    )
    data_sha256: str | None = Field(default=None, description="Hash of the training data file.")
    training: str | None = Field(default=None, description="The LemonTraining that made it.")
    parent: str | None = Field(default=None, description="The version training started from.")
    created: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    metrics: dict[str, Any] = Field(default_factory=dict)


def read_policy(path: str | os.PathLike[str]) -> PolicyMetadata:
    """The metadata of a policy version, after checking its weights and tokenizer are there."""
    root = Path(path)
    if not root.is_dir():
        raise PolicyVersionError(f"{root}: not a directory (a policy version is a directory)")
    meta_path = root / METADATA_FILE
    try:
        raw = json.loads(meta_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PolicyVersionError(
            f"{meta_path}: missing (not a policy version; `lemon train` writes one)"
        ) from None
    except json.JSONDecodeError as exc:
        raise PolicyVersionError(f"{meta_path}:{exc.lineno}:{exc.colno}: {exc.msg}") from None
    try:
        meta = PolicyMetadata.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "(root)"
        raise PolicyVersionError(f"{meta_path}: {where}: {first['msg']}") from None
    wanted = _ADAPTER if meta.adapter else _WEIGHTS
    if not any((root / name).is_file() for name in wanted):
        raise PolicyVersionError(f"{root}: no {' or '.join(wanted)} (incomplete policy version)")
    if not (root / "tokenizer_config.json").is_file():
        raise PolicyVersionError(f"{root}: no tokenizer_config.json (incomplete policy version)")
    return meta


def write_metadata(directory: str | os.PathLike[str], meta: PolicyMetadata) -> Path:
    """Write ``policy.json`` atomically (temp file, then rename)."""
    return atomic.write_json(Path(directory) / METADATA_FILE, meta.model_dump())


def publish_directory(staging: str | os.PathLike[str], final: str | os.PathLike[str]) -> Path:
    """Move a completely written ``staging`` directory to ``final`` in one rename.

    An existing ``final`` is replaced only after the new one is in place beside it, so a reader
    sees the old version or the new one, never a half-written directory.
    """
    staging_path, final_path = Path(staging), Path(final)
    final_path.parent.mkdir(parents=True, exist_ok=True)
    if final_path.exists():
        retired = final_path.with_name(f".{final_path.name}.old")
        shutil.rmtree(retired, ignore_errors=True)
        os.replace(final_path, retired)
        os.replace(staging_path, final_path)
        shutil.rmtree(retired, ignore_errors=True)
    else:
        os.replace(staging_path, final_path)
    return final_path


def file_sha256(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
