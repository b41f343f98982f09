"""Seeded, documented splits: which items are reported (``test``) and which may train (``train``).

The rule, per benchmark:

- **GSM8K**: ``test`` is the whole official test file (1,319 items). ``train`` is the official
  train file (``gsm8k-train:<line>``), minus any item whose normalised question text also
  appears in the test file (there are none in the shipped files; the check stays).
- **MMLU**: ``test`` is the whole official test set; ``train`` is the official dev set
  (``mmlu-dev:<subject>:<row>``, 5 per subject).
- **SVAMP, MultiArith, AQuA, HumanEval** (no official train split here): a *held-in*
  partition. An item is held in when ``sha256(f"{seed}:{normalised question}")``, read as a
  fraction in [0, 1), is below ``held_in_fraction`` (default seed 0, fraction 0.2). Held-in
  items form ``train``; the rest form ``test``. Hashing the normalised question text (lower
  case, whitespace collapsed), not the id, keeps repeated questions on the same side:
  MultiArith holds 20 questions twice under different ids.

``all`` is every published test item (to compare with papers that report on the full sets);
a run reported on ``all`` must not have trained on the held-in partitions. Reported numbers
use ``test``. Splits are pure functions of the files and the seed: same inputs, same split.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from lemon.data.items import Benchmark, Item
from lemon.data.loaders import load_items
from lemon.data.paths import Source

__all__ = ["Split", "SplitConfig", "is_held_in", "normalise_question", "split_items"]


class Split(StrEnum):
    TEST = "test"
    TRAIN = "train"
    ALL = "all"


class SplitConfig(BaseModel):
    """How the held-in partitions are drawn."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int = Field(default=0, description="salt of the hash that assigns items to partitions")
    held_in_fraction: float = Field(
        default=0.2,
        ge=0.0,
        le=1.0,
        description="share of SVAMP/MultiArith/AQuA/HumanEval items held in for training",
    )


_HELD_IN = (Benchmark.SVAMP, Benchmark.MULTIARITH, Benchmark.AQUA, Benchmark.HUMANEVAL)


def normalise_question(text: str) -> str:
    """Lower case, whitespace collapsed: two copies of one question compare equal."""
    return " ".join(text.lower().split())


def is_held_in(item: Item, *, config: SplitConfig) -> bool:
    """Whether a test-file item of a benchmark without a train split belongs to ``train``."""
    key = f"{config.seed}:{normalise_question(item.question)}".encode()
    fraction = int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2**64
    return fraction < config.held_in_fraction


def split_items(
    benchmark: Benchmark | str,
    *,
    split: Split | str = Split.TEST,
    config: SplitConfig | None = None,
    directory: Path | str | None = None,
) -> list[Item]:
    """The items of ``split`` in file order (see the module docstring for the rule)."""
    bench, part, config = Benchmark(benchmark), Split(split), config or SplitConfig()
    tests = list(load_items(bench, source=Source.TEST, directory=directory))
    if part is Split.ALL:
        return tests
    if bench in _HELD_IN:
        return [item for item in tests if is_held_in(item, config=config) == (part is Split.TRAIN)]
    if part is Split.TEST:
        return tests
    source = Source.TRAIN if bench is Benchmark.GSM8K else Source.DEV
    seen = {normalise_question(item.question) for item in tests}
    extra = load_items(bench, source=source, directory=directory)
    return [item for item in extra if normalise_question(item.question) not in seen]
