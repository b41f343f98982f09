"""The split rule: training items never overlap reported test items."""

from __future__ import annotations

import pytest

from lemon.data import Benchmark, Split, SplitConfig, normalise_question, split_items


@pytest.mark.parametrize("benchmark", list(Benchmark))
def test_train_never_overlaps_test(benchmark: Benchmark) -> None:
    test = split_items(benchmark, split=Split.TEST)
    train = split_items(benchmark, split=Split.TRAIN)
    assert test
    assert train
    assert not {i.id for i in test} & {i.id for i in train}
    test_questions = {normalise_question(i.question) for i in test}
    assert not test_questions & {normalise_question(i.question) for i in train}


@pytest.mark.parametrize(
    "benchmark", [Benchmark.SVAMP, Benchmark.MULTIARITH, Benchmark.AQUA, Benchmark.HUMANEVAL]
)
def test_held_in_partition_covers_the_test_file_exactly(benchmark: Benchmark) -> None:
    test = split_items(benchmark, split=Split.TEST)
    train = split_items(benchmark, split=Split.TRAIN)
    every = split_items(benchmark, split=Split.ALL)
    assert sorted(i.id for i in test + train) == sorted(i.id for i in every)
    assert 0.1 < len(train) / len(every) < 0.3  # the default fraction is 0.2


def test_splits_are_seeded_and_deterministic() -> None:
    first = [i.id for i in split_items("svamp", split="train")]
    assert first == [i.id for i in split_items("svamp", split="train")]
    other = [i.id for i in split_items("svamp", split="train", config=SplitConfig(seed=1))]
    assert other != first
    assert split_items("svamp", split="train", config=SplitConfig(held_in_fraction=0.0)) == []


def test_multiarith_repeated_questions_stay_on_one_side() -> None:
    train = {normalise_question(i.question) for i in split_items("multiarith", split="train")}
    test = {normalise_question(i.question) for i in split_items("multiarith", split="test")}
    every = split_items("multiarith", split="all")
    assert len({normalise_question(i.question) for i in every}) == 580  # 20 asked twice
    assert not train & test


def test_gsm8k_and_mmlu_train_from_their_own_files() -> None:
    assert all(i.id.startswith("gsm8k-train:") for i in split_items("gsm8k", split="train"))
    assert len(split_items("gsm8k", split="test")) == 1319
    dev = split_items("mmlu", split="train")
    assert all(i.id.startswith("mmlu-dev:") for i in dev)
    assert len(dev) == 280  # 5 of the 285 dev questions also appear in the test set
