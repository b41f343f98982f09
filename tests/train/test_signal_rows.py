"""Skipping groups with no learning signal (DAPO's dynamic sampling): by hand."""

from __future__ import annotations

import torch

from lemon_train.credit import SpanCredit
from lemon_train.grpo import keep_rows, signal_rows


def test_groups_without_spread_or_credit_are_dropped() -> None:
    """Three groups of two: the first has a spread, the second none, the third none but a
    non-zero Δc on one sample; with credit on, the second alone is dropped; with credit off,
    the second and third."""
    rewards = [1.0, 0.0, 0.5, 0.5, -1.0, -1.0]
    credit = SpanCredit("downgrade_capacity", (3,), 0.25)
    zero = SpanCredit("downgrade_capacity", (3,), 0.0)
    credits: list[list[SpanCredit]] = [[], [], [zero], [], [credit], []]
    assert signal_rows(rewards, credits, 2, True) == [0, 1, 4, 5]
    assert signal_rows(rewards, credits, 2, False) == [0, 1]


def test_a_batch_with_no_signal_keeps_its_first_group() -> None:
    assert signal_rows([1.0, 1.0, 0.0, 0.0], [[], [], [], []], 2, True) == [0, 1]


def test_keep_rows_indexes_the_batch_and_recounts_the_normaliser() -> None:
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 1]])
    output = {
        "completion_mask": mask,
        "advantages": torch.tensor([0.5, -0.5, 0.0, 0.0]),
        "num_items_in_batch": mask.sum(),
        "scalar": torch.tensor(7.0),
        "note": "kept as is",
    }
    kept = keep_rows(output, [0, 1])
    assert kept["completion_mask"].tolist() == [[1, 1, 0], [1, 0, 0]]
    assert kept["advantages"].tolist() == [0.5, -0.5]
    assert int(kept["num_items_in_batch"]) == 3
    assert float(kept["scalar"]) == 7.0
    assert kept["note"] == "kept as is"
    assert keep_rows(output, [0, 1, 2, 3]) is output
