"""Loading a base: ``packaged``, a Hugging Face id or directory, or a policy version (full
weights, or a LoRA adapter merged into its own base)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from lemon.backends.converting import GGUF_BASE_PREFIX
from lemon.learning.training_config import PACKAGED_BASE
from lemon.policy.version import METADATA_FILE, PolicyMetadata, PolicyVersionError, read_policy
from lemon_train.errors import TrainingError

__all__ = ["default_dtype", "load_model_and_tokenizer", "load_tokenizer", "resolve_base"]


def default_dtype() -> torch.dtype:
    """bf16 on CUDA; float32 on CPU (bf16 matmuls are slow there and lose precision in Adam)."""
    return torch.bfloat16 if torch.cuda.is_available() else torch.float32


def resolve_base(base_model: str) -> tuple[str, PolicyMetadata | None]:
    """Where ``base_model`` loads from, and its policy metadata when it is a policy version.

    ``'packaged'`` is the SmolLM2-135M-Instruct GGUF converted once to a cached HF directory,
    ``'gguf:NAME'`` a pinned GGUF model of ``lemon models`` (fetched) converted the same way; a
    directory holding ``policy.json`` is a policy version; any other directory is a plain HF
    model directory; anything else is a Hugging Face id (which needs the hub).
    """
    if base_model == PACKAGED_BASE:
        from lemon.backends.converting import converted_packaged_model

        return str(converted_packaged_model("bfloat16")), None
    if base_model.startswith(GGUF_BASE_PREFIX):  # a fetched pinned GGUF model, dequantized
        from lemon.backends.converting import converted_gguf_model
        from lemon.backends.ggufs import ModelNotFetched

        try:
            return str(converted_gguf_model(base_model.removeprefix(GGUF_BASE_PREFIX))), None
        except (KeyError, ModelNotFetched) as exc:
            raise TrainingError(f"base_model: {exc.args[0]}") from None
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


def load_tokenizer(base_model: str) -> PreTrainedTokenizerBase:
    """The tokenizer of ``base_model`` (see :func:`resolve_base`), with a pad token set."""
    location, _ = resolve_base(base_model)
    tokenizer = AutoTokenizer.from_pretrained(location)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model_and_tokenizer(
    base_model: str, *, dtype: torch.dtype | str | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
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
