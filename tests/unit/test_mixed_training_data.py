"""GRPO's data over the mixed workload: several tables, their fit/validation parts, cost weights."""

from __future__ import annotations

from pathlib import Path

import pytest

from lemon.learning.training_config import TrainingConfig
from lemon.learning.training_data import TableData, parse_data
from lemon.tables.store import Table
from lemon.tasks import TaskKind
from tests.unit.test_mixed_report import AQUA, SVAMP, _table


def test_table_data_reads_several_tables_and_a_part() -> None:
    data = parse_data("table:tables/svamp-train,tables/aqua-train:0:0:validation")
    assert isinstance(data, TableData)
    assert data.paths == ["tables/svamp-train", "tables/aqua-train"]
    assert data.part == "validation"
    assert parse_data(str(data)) == data
    assert str(parse_data("table:t")) == "table:t:0:0"  # the one-table form is unchanged
    with pytest.raises(ValueError, match="part must be all, fit or validation"):
        parse_data("table:t:0:0:heldout")
    with pytest.raises(ValueError, match=r"expected table:<dir>\[,<dir>...\]"):
        parse_data("table:,:1")


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> list[Table]:
    root = tmp_path_factory.mktemp("mixed")
    return [
        _table(root / "svamp-train", "svamp", "train", TaskKind.MATH, SVAMP),
        _table(root / "aqua-train", "aqua", "train", TaskKind.MULTIPLE_CHOICE, AQUA),
    ]


def test_rows_of_several_tables_split_into_fit_and_validation(tables: list[Table]) -> None:
    from lemon_train.task_rows import table_rows

    paths = ",".join(str(t.path) for t in tables)
    fmt = "lemon-policy-prompt/v2"
    every = table_rows(TableData(path=paths), prompt_format=fmt)
    assert [r["benchmark"] for r in every] == ["svamp"] * 10 + ["aqua"] * 10
    fit = table_rows(TableData(path=paths, part="fit"), prompt_format=fmt)
    held = table_rows(TableData(path=paths, part="validation"), prompt_format=fmt)
    assert sorted(r["id"] for r in fit + held) == sorted(r["id"] for r in every)
    assert not {r["id"] for r in fit} & {r["id"] for r in held}


def test_cost_weights_are_drawn_per_row_and_stated_in_the_prompt(tables: list[Table]) -> None:
    from lemon_train.task_rows import table_rows, with_cost_weights

    rows = table_rows(TableData(path=str(tables[0].path)), prompt_format="lemon-policy-prompt/v3")
    weighted = with_cost_weights(rows, [0.0, 4.0], seed=0, prompt_format="lemon-policy-prompt/v3")
    assert {r["cost_weight"] for r in weighted} == {0.0, 4.0}
    for row in weighted:
        assert f"Cost weight: {row['cost_weight']:g} per 1,000" in row["prompt"][1]["content"]
    again = with_cost_weights(rows, [0.0, 4.0], seed=0, prompt_format="lemon-policy-prompt/v3")
    assert [r["cost_weight"] for r in again] == [r["cost_weight"] for r in weighted]


def test_cost_weights_need_the_prompt_that_states_them() -> None:
    base = {"stage": "grpo", "policy": "p", "base_model": "m", "data": "table:t", "outputDir": "o"}
    with pytest.raises(ValueError, match="needs prompt_format lemon-policy-prompt/v3"):
        TrainingConfig.model_validate({**base, "hyperparameters": {"cost_weights": [0.1]}})
    config = TrainingConfig.model_validate(
        {**base, "prompt_format": "lemon-policy-prompt/v3",
         "hyperparameters": {"cost_weights": [0.0, 0.02, 0.1]}}
    )  # fmt: skip
    assert config.hyperparameters.cost_weights == [0.0, 0.02, 0.1]


def test_a_rows_cost_weight_sets_the_token_cost_of_its_reward(tmp_path: Path) -> None:
    from lemon.learning.training_config import CounterfactualConfig
    from lemon.reward import Outcome, RewardConfig
    from lemon_train.rewards import SpecReward

    reward = SpecReward(
        lambda ids: "", rewards=RewardConfig(), counterfactual=CounterfactualConfig()
    )
    outcome = Outcome(valid=True, success=1.0, worker_tokens=500, priced_tokens=500.0, agents=1)
    plain = reward._reward(outcome, {})
    assert reward._reward(outcome, {"cost_weight": 0.02}) == pytest.approx(plain)  # the default
    assert plain - reward._reward(outcome, {"cost_weight": 2.0}) == pytest.approx(
        (2.0 - 0.02) * 500 / 1000
    )
