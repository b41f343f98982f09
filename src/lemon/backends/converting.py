"""GGUF to safetensors: the packaged model and the pinned GGUF models, converted once.

transformers loads a GGUF by dequantizing it, which takes a while; the first use converts the
file once to a Hugging Face model directory (weights in ``dtype``, with its tokenizer) under the
cache directory (``$LEMON_CACHE_DIR``, default ``~/.cache/lemon``), which the in-process backend
and the training entry points load from. Beside the two model catalogues it reads
(:mod:`lemon.backends.packaged`, :mod:`lemon.backends.ggufs`), not inside either, so that
neither imports the other back.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from lemon import atomic
from lemon.backends.ggufs import GGUF_MODELS, locate
from lemon.backends.packaged import cache_dir, packaged_model, quiet_transformers

__all__ = ["GGUF_BASE_PREFIX", "converted_gguf_model", "converted_packaged_model"]


def converted_packaged_model(dtype: str = "bfloat16") -> Path:
    """The directory of the packaged model converted to safetensors in ``dtype`` (a Hugging
    Face model directory with its tokenizer), converting it on first use."""
    target = cache_dir() / "models" / f"SmolLM2-135M-Instruct-{dtype}"
    if (target / "config.json").is_file():
        return target
    packaged = packaged_model()
    return _convert(packaged.path, target, dtype=dtype, title="the packaged SmolLM2-135M-Instruct")


GGUF_BASE_PREFIX = "gguf:"
"""``gguf:NAME``: a model of :data:`lemon.backends.ggufs.GGUF_MODELS` (its fetched GGUF file,
dequantized) as a base to train or serve a policy on, e.g. ``gguf:qwen2.5-coder-0.5b-instruct``."""


def converted_gguf_model(name: str, dtype: str = "bfloat16") -> Path:
    """The directory of the pinned GGUF model ``name`` (``lemon models fetch NAME``) converted
    to safetensors in ``dtype`` with its tokenizer, converting it on first use; raises
    ``KeyError`` naming the known models for another name."""
    if name not in GGUF_MODELS:
        raise KeyError(f"{name!r}: not a pinned GGUF model (known: {', '.join(GGUF_MODELS)})")
    pinned = GGUF_MODELS[name]
    target = cache_dir() / "models" / f"{name}-{dtype}"
    if (target / "config.json").is_file():
        return target
    return _convert(locate(pinned), target, dtype=dtype, title=pinned.title)


def _convert(gguf: Path, target: Path, *, dtype: str, title: str) -> Path:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    print(f"lemon: converting {title} (GGUF) once to {target} ...", file=sys.stderr, flush=True)
    started = time.monotonic()
    with quiet_transformers():
        model: Any = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=dtype
        )
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # transformers dequantizes GGUF weights on load but still marks the model as quantized,
    # which blocks save_pretrained; the weights are plain tensors, so drop the marker.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    # another process converting at the same time may win the race: its copy is kept
    with atomic.staged_directory(target, marker="config.json") as staging, quiet_transformers():
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
    print(
        f"lemon: converted in {time.monotonic() - started:.1f} s (later runs load the copy)",
        file=sys.stderr,
        flush=True,
    )
    return target
