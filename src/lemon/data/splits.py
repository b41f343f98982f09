"""Seeded, documented splits: which items are reported (``test``) and which may train (``train``).

The rule, per benchmark:

- **GSM8K**: ``test`` is the whole official test file (1,319 items). ``train`` is the official
  train file (``gsm8k-train:<line>``), minus any item whose normalised question text also
  appears in the test file (there are none in the shipped files; the check stays).
- **MMLU**: ``train`` is the official dev set (``mmlu-dev:<subject>:<row>``, 5 per subject)
  plus a *held-in* partition of the official test set, stratified by subject: within each
  subject, the test items ordered by ``sha256(f"{seed}:{normalised question}")`` and the first
  ``round(mmlu_held_in_fraction × n_subject)`` of them held in (default 0.1: 1,406 of 14,042
  items, every subject represented in proportion). ``test`` is the rest of the test set. The
  dev set's 285 items alone are too few to train a router on.
- **SVAMP, MultiArith, AQuA, HumanEval** (no official train split here): a *held-in*
  partition. An item is held in when ``sha256(f"{seed}:{key}")``, read as a fraction in
  [0, 1), is below ``held_in_fraction`` (default seed 0, fraction 0.2). Held-in items form
  ``train``; the rest form ``test``. The key is the item's *template* for SVAMP and MultiArith
  (the normalised question with every number replaced by ``#``): both are built from templated
  problems whose near-duplicates differ only in their numbers, and hashing the exact text let
  125 of MultiArith's 482 test items share a template with a held-in item. For AQuA and
  HumanEval it is the normalised question (lower case, whitespace collapsed). Either way,
  hashing text rather than the id keeps repeated questions on the same side: MultiArith holds
  20 questions twice under different ids.

``all`` is every published test item (to compare with papers that report on the full sets);
a run reported on ``all`` must not have trained on the held-in partitions. Reported numbers
use ``test``. Splits are pure functions of the files and the seed: same inputs, same split.
"""

from __future__ import annotations

import hashlib
import re
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from lemon.data.items import Benchmark, Item
from lemon.data.loaders import load_items
from lemon.data.paths import PublishedSplit

__all__ = [
    "Split",
    "SplitConfig",
    "is_held_in",
    "normalise_question",
    "question_template",
    "split_items",
    "validation_ids",
]


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
    mmlu_held_in_fraction: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="share of each MMLU subject's test items held in for training",
    )


_HELD_IN = (Benchmark.SVAMP, Benchmark.MULTIARITH, Benchmark.AQUA, Benchmark.HUMANEVAL)
_TEMPLATED = (Benchmark.SVAMP, Benchmark.MULTIARITH)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def normalise_question(text: str) -> str:
    """Lower case, whitespace collapsed: two copies of one question compare equal."""
    return " ".join(text.lower().split())


def question_template(text: str) -> str:
    """The normalised question with every number replaced by ``#``: near-duplicates of one
    templated problem (same words, other numbers) compare equal."""
    return _NUMBER.sub("#", normalise_question(text))


def split_key(item: Item) -> str:
    """What an item's partition is drawn from: its template (SVAMP, MultiArith) or its
    normalised question (the rest)."""
    if item.benchmark in _TEMPLATED:
        return question_template(item.question)
    return normalise_question(item.question)


def _fraction(seed: int, key: str) -> float:
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def is_held_in(item: Item, *, config: SplitConfig) -> bool:
    """Whether a test-file item of a benchmark without a train split belongs to ``train``."""
    return _fraction(config.seed, split_key(item)) < config.held_in_fraction


def _mmlu_held_in(items: list[Item], config: SplitConfig) -> set[str]:
    """The ids of the MMLU test items held in: per subject, the lowest-hashed share."""
    by_subject: dict[str | None, list[Item]] = {}
    for item in items:
        by_subject.setdefault(getattr(item, "subject", None), []).append(item)
    held: set[str] = set()
    for group in by_subject.values():
        ranked = sorted(group, key=lambda i: (_fraction(config.seed, split_key(i)), i.id))
        held.update(i.id for i in ranked[: round(config.mmlu_held_in_fraction * len(group))])
    return held


def split_items(
    benchmark: Benchmark | str,
    *,
    split: Split | str = Split.TEST,
    config: SplitConfig | None = None,
    directory: Path | str | None = None,
) -> list[Item]:
    """The items of ``split`` in file order (see the module docstring for the rule)."""
    bench, part, config = Benchmark(benchmark), Split(split), config or SplitConfig()
    tests = list(load_items(bench, source=PublishedSplit.TEST, directory=directory))
    if part is Split.ALL:
        return tests
    if bench in _HELD_IN:
        return [item for item in tests if is_held_in(item, config=config) == (part is Split.TRAIN)]
    held = _mmlu_held_in(tests, config) if bench is Benchmark.MMLU else set()
    # a question the test file asks twice stays on one side: with its held-in copy
    held_questions = {normalise_question(i.question) for i in tests if i.id in held}
    held = {i.id for i in tests if normalise_question(i.question) in held_questions}
    if part is Split.TEST:
        return [item for item in tests if item.id not in held]
    source = PublishedSplit.TRAIN if bench is Benchmark.GSM8K else PublishedSplit.DEV
    seen = {normalise_question(item.question) for item in tests}
    extra = load_items(bench, source=source, directory=directory)
    train = [item for item in extra if normalise_question(item.question) not in seen]
    return train + [item for item in tests if item.id in held]


VALIDATION_FRACTION = 0.25
"""Share of a train split's items (by key, see :func:`validation_ids`) held out for validation."""


def validation_ids(
    items: list[Item], *, fraction: float = VALIDATION_FRACTION, seed: int = 0
) -> set[str]:
    """The ids of the train items held out for validation: every choice that is not the final
    report (a checkpoint, a step, a run) is made on them. Drawn by :func:`split_key` (the
    template for SVAMP and MultiArith, the normalised question otherwise), salted apart from
    the train/test partition, so near-duplicates and repeated questions fall on one side: a
    row split would put an item's sibling on the other."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"the validation fraction must be in (0, 1), got {fraction}")
    return {i.id for i in items if _fraction(seed, "validation:" + split_key(i)) < fraction}
