"""The split rule: training items never overlap reported test items."""

from __future__ import annotations

import pytest

from lemon.data import (
    Benchmark,
    Split,
    SplitConfig,
    normalise_question,
    question_template,
    split_items,
)


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


@pytest.mark.parametrize("benchmark", [Benchmark.SVAMP, Benchmark.MULTIARITH])
def test_templated_near_duplicates_never_cross_the_split(benchmark: Benchmark) -> None:
    """Items that differ only in their numbers share a template and a side."""
    train = {question_template(i.question) for i in split_items(benchmark, split="train")}
    test = {question_template(i.question) for i in split_items(benchmark, split="test")}
    assert not train & test
    assert question_template("Tom had 3 apples and 12.5 pears") == (
        question_template("tom had 17  apples and 2 pears")
    )


def test_gsm8k_trains_from_its_own_file() -> None:
    assert all(i.id.startswith("gsm8k-train:") for i in split_items("gsm8k", split="train"))
    assert len(split_items("gsm8k", split="test")) == 1319


def test_mmlu_holds_in_a_stratified_share_of_the_test_set() -> None:
    train = split_items("mmlu", split="train")
    test = split_items("mmlu", split="test")
    every = split_items("mmlu", split="all")
    dev = [i for i in train if i.id.startswith("mmlu-dev:")]
    held = [i for i in train if not i.id.startswith("mmlu-dev:")]
    assert len(dev) == 280  # 5 of the 285 dev questions also appear in the test set
    assert sorted(i.id for i in held + test) == sorted(i.id for i in every)
    per_subject: dict[str | None, list[int]] = {}
    for item in every:
        counts = per_subject.setdefault(item.subject, [0, 0])  # type: ignore[union-attr]
        counts[0] += 1
    for item in held:
        per_subject[item.subject][1] += 1  # type: ignore[union-attr]
    assert len(per_subject) == 57
    for total, kept in per_subject.values():  # every subject in proportion, exactly
        assert kept == round(0.1 * total)
    other = {i.id for i in split_items("mmlu", split="train", config=SplitConfig(seed=1))}
    assert other != {i.id for i in train}


def test_validation_is_carved_out_of_train_by_template() -> None:
    from lemon.data.splits import question_template, split_key, validation_ids

    train = split_items("svamp", split="train")
    held = validation_ids(train)
    assert 0.15 < len(held) / len(train) < 0.35
    # siblings (one template, other numbers) never straddle the two parts
    side: dict[str, bool] = {}
    for item in train:
        key = split_key(item)
        assert side.setdefault(key, item.id in held) == (item.id in held)
    assert question_template("Tom has 3 apples") == question_template("Tom has 12 apples")
    assert validation_ids(train) == held  # a pure function of the items and the seed
    assert validation_ids(train, seed=1) != held
