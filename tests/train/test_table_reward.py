"""GRPO's reward on an outcome table, and on the real tiny tiers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from lemon.backends.callcache import PersistentCallCache
from lemon.learning.training_config import CounterfactualConfig
from lemon.reward import RewardConfig
from lemon.spec.mutations import MutationKind
from lemon.tables.store import Table
from tests.unit.test_tables import TEAMS, _backends, _build, _items, _table

pytestmark = pytest.mark.model  # the policy's tokenizer (transformers)

SINGLE = "agents:\n  - name: solver\n    role: math_solver\n    capacity: {tier}\noutput: solver\n"


@pytest.fixture
def table(tmp_path: Path) -> Table:
    items = _items()
    backends = _backends(items, PersistentCallCache(tmp_path / "calls.sqlite"))
    made = _table(tmp_path / "svamp-train", items, backends)
    _build(made, items, backends)
    return Table.open(tmp_path / "svamp-train")


def _rows(table: Table) -> dict[str, list[Any]]:
    from lemon.learning.training_data import TableData
    from lemon_train.task_rows import table_rows

    rows = table_rows(TableData(path=str(table.path)), prompt_format="lemon-policy-prompt/v2")
    return {key: [r[key] for r in rows] for key in ("task", "answer", "benchmark", "id")}


def _reward(table: Table, tokenizer: Any, **kwargs: Any) -> Any:
    from lemon_train.rewards import TableReward

    return TableReward(
        lambda ids: tokenizer.decode(list(ids), skip_special_tokens=True),
        rewards=RewardConfig(),
        counterfactual=kwargs.pop("counterfactual", CounterfactualConfig(enabled=False)),
        table=str(table.path),
        profile="scripted",
        worker_max_tokens=64,
        **kwargs,
    )


def test_table_rollouts_are_answered_from_the_table(table: Table, tiny_model: Path) -> None:
    from lemon_train.loading import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_model))
    columns = _rows(table)
    items = columns["id"]
    large = tokenizer(SINGLE.format(tier="large"), add_special_tokens=False)["input_ids"]
    reward = _reward(table, tokenizer, live=False)
    # every item's rollout: one large solver, a column of the table (trailing text after a
    # blank line is cut, as evaluation cuts it)
    tail = tokenizer("\n\nThat is my answer.", add_special_tokens=False)["input_ids"]
    rewards = asyncio.run(
        reward([None] * len(items), [None] * len(items), [large + tail] * len(items), **columns)
    )
    stats = reward.last
    assert all(stats.valid)
    assert stats.success == [table.cells[(i, "single-large")].success for i in items]
    assert reward.distinct_calls == len(items)  # one large call per item
    assert reward.live_calls == 0
    # the run's worker tokens: each item's one large call, counted once, priced as the table
    calls = [table.calls[k] for k in reward._store.read]
    raw = sum(c.prompt_tokens + c.completion_tokens for c in calls)
    assert raw > 0
    assert reward.distinct_tokens == (raw, pytest.approx(raw * table.meta.tier_prices["large"]))
    # read again: no new distinct call
    asyncio.run(reward([None] * len(items), [None] * len(items), [large] * len(items), **columns))
    assert reward.distinct_calls == len(items)
    assert reward.last.worker_calls == 0
    assert reward.distinct_tokens[0] == raw  # read again: nothing new
    assert rewards[0] != rewards[-1] or len(set(stats.success)) == 1
    # a team the table lacks (duties of its own) fails without live calls
    text = SINGLE.format(tier="medium").replace("capacity", 'duties: "Be brief."\n    capacity')
    odd = tokenizer(text, add_special_tokens=False)["input_ids"]
    asyncio.run(reward([None], [None], [odd], **{k: v[:1] for k, v in columns.items()}))
    assert reward.last.success == [0.0]
    assert reward.distinct_calls == len(items) + 1


def test_a_call_the_table_lacks_runs_live_and_counts_once(table: Table, tiny_model: Path) -> None:
    from lemon_train.loading import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_model))
    columns = {k: v[:1] for k, v in _rows(table).items()}
    text = SINGLE.format(tier="medium").replace("capacity", 'duties: "Be brief."\n    capacity')
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    reward = _reward(table, tokenizer, live=True)
    for _ in range(2):
        asyncio.run(reward([None], [None], [ids], **columns))
    assert reward.live_calls == 1
    assert reward.distinct_calls == 1
    assert reward.last.valid == [True]
    # the live call names its model's identity; it is priced as its tier, medium
    (call,) = reward._store.added.values()
    tokens = call.prompt_tokens + call.completion_tokens
    assert reward.distinct_tokens == (
        tokens,
        pytest.approx(tokens * table.meta.tier_prices["medium"]),
    )


def test_mutants_of_a_column_are_mostly_other_columns(table: Table, tiny_model: Path) -> None:
    """A downgraded large solver is the medium column: its Δc comes at no live call."""
    from lemon_train.loading import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_model))
    columns = {k: v[:2] for k, v in _rows(table).items()}
    ids = tokenizer(SINGLE.format(tier="large"), add_special_tokens=False)["input_ids"]
    credit = CounterfactualConfig(
        enabled=True, kinds=[MutationKind.DOWNGRADE_CAPACITY], max_mutants=1
    )
    reward = _reward(table, tokenizer, live=False, counterfactual=credit)
    asyncio.run(reward([None] * 2, [None] * 2, [ids] * 2, **columns))
    assert reward.last.mutant_runs == 2
    credits = reward.take_pending(2)
    for item, found in zip(columns["id"], credits, strict=True):
        (one,) = found
        large, medium = table.cells[(item, "single-large")], table.cells[(item, "single-medium")]
        assert (one.delta > 0) == (large.success > medium.success)
    assert reward.live_calls == 0
    assert set(TEAMS) >= {"single-large", "single-medium"}


def test_paid_mutants_credit_only_with_calls_already_read(table: Table, tiny_model: Path) -> None:
    """``mutants: paid``: a mutant counts only when the run has read every call it makes (here a
    sibling rollout's column), so the credit adds no distinct worker call; the same mutant, when
    nothing paid for it, is left out and counted as unpaid."""
    from lemon_train.loading import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_model))
    one = {k: v[:1] for k, v in _rows(table).items()}
    large, medium = (
        tokenizer(SINGLE.format(tier=tier), add_special_tokens=False)["input_ids"]
        for tier in ("large", "medium")
    )
    credit = CounterfactualConfig(
        enabled=True, kinds=[MutationKind.DOWNGRADE_CAPACITY], max_mutants=1, mutants="paid"
    )
    reward = _reward(table, tokenizer, live=False, counterfactual=credit)
    # alone, the large solver's downgrade (the medium column) was never read: no credit
    asyncio.run(reward([None], [None], [large], **one))
    assert reward.last.mutant_runs == 0
    assert reward.last.unpaid_mutants == 1
    assert reward.last.metrics()["cf/unpaid_mutants"] == 1.0
    assert reward.take_pending(1) == [[]]
    assert reward.distinct_calls == 1  # the mutant's tentative read left no trace
    # beside a medium sibling: the large one's mutant is paid for, the medium one's (small) not
    pair = {k: v * 2 for k, v in one.items()}
    asyncio.run(reward([None] * 2, [None] * 2, [large, medium], **pair))
    assert reward.last.mutant_runs == 1
    assert reward.last.unpaid_mutants == 1
    assert reward.distinct_calls == 2  # large and medium: the credit read nothing new
    paid, none = reward.take_pending(2)
    assert none == []
    # the same Δc as scoring every mutant (``mutants: all``) gives
    every = _reward(
        table, tokenizer, live=False,
        counterfactual=credit.model_copy(update={"mutants": "all"}),
    )  # fmt: skip
    asyncio.run(every([None], [None], [large], **one))
    (expected,) = every.take_pending(1)[0]
    assert [(c.kind, c.tokens, c.delta) for c in paid] == [
        (expected.kind, expected.tokens, expected.delta)
    ]
    assert every.distinct_calls == 2  # it paid for the medium call itself


def test_paid_mutants_refuse_live_calls(table: Table, tiny_model: Path) -> None:
    from lemon_train.loading import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_model))
    one = {k: v[:1] for k, v in _rows(table).items()}
    large = tokenizer(SINGLE.format(tier="large"), add_special_tokens=False)["input_ids"]
    credit = CounterfactualConfig(
        enabled=True, kinds=[MutationKind.DOWNGRADE_CAPACITY], max_mutants=1, mutants="paid"
    )
    reward = _reward(table, tokenizer, live=True, counterfactual=credit)
    with pytest.raises(ValueError, match="live calls off"):
        asyncio.run(reward([None], [None], [large], **one))


def test_engine_reward_on_the_tiny_llamacpp_tiers(tiny_model: Path, tmp_path: Path) -> None:
    """EngineReward executes a rollout and its mutant on real models (the ``tiny`` profile:
    SmolLM2-135M on llama.cpp on every tier), scores it as evaluation does, and keeps its
    reuse cache to one batch (it used to grow for the whole training)."""
    from lemon.learning.training_data import BenchmarkData
    from lemon_train.loading import load_tokenizer
    from lemon_train.rewards import EngineReward
    from lemon_train.task_rows import benchmark_rows

    tokenizer = load_tokenizer(str(tiny_model))
    rows = benchmark_rows(
        BenchmarkData(name="gsm8k", limit=1), prompt_format="lemon-policy-prompt/v1"
    )
    columns = {key: [rows[0][key]] for key in ("task", "answer", "benchmark", "id")}
    ids = tokenizer(SINGLE.format(tier="medium"), add_special_tokens=False)["input_ids"]
    reward = EngineReward(
        lambda i: tokenizer.decode(list(i), skip_special_tokens=True),
        rewards=RewardConfig(),
        counterfactual=CounterfactualConfig(
            enabled=True, kinds=[MutationKind.UPGRADE_CAPACITY], max_mutants=1
        ),
        profile="tiny",
        call_cache=False,
        worker_max_tokens=24,
    )
    try:
        (first,) = asyncio.run(reward([None], [None], [ids], **columns))
        stats = reward.last
        assert stats.valid == [True]
        assert stats.worker_tokens[0] > 24  # the prompt and up to 24 completion tokens
        assert stats.success[0] in (0.0, 1.0)
        assert stats.mutant_runs == 1
        assert first == pytest.approx(
            stats.success[0] - 0.02 * stats.worker_tokens[0] / 1000 - 0.01, abs=0.01
        )
        held = reward.cache
        asyncio.run(reward([None], [None], [ids], **columns))
        assert reward.cache is not held  # a fresh reuse cache per batch
        assert len(reward.cache) <= 2  # this batch's spec and mutant only
    finally:
        asyncio.run(reward.aclose())


def test_credit_lands_on_the_field_when_the_spec_follows_prose(
    table: Table, tiny_model: Path
) -> None:
    """The reward scores the text evaluation reads (cut at the first blank line, the fenced
    YAML extracted) and shifts the credit spans by where that text starts: with a sentence and
    a fence before the spec, and prose after a blank line, the downgrade's credit still covers
    the tokens that spell ``large``, and the reward is the bare spec's."""
    from lemon_train.loading import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_model))
    columns = {k: v[:1] for k, v in _rows(table).items()}
    credit = CounterfactualConfig(
        enabled=True, kinds=[MutationKind.DOWNGRADE_CAPACITY], max_mutants=1
    )
    bare = tokenizer(SINGLE.format(tier="large"), add_special_tokens=False)["input_ids"]
    text = "Here is the team:\n```yaml\n" + SINGLE.format(tier="large") + "```\n\nIt is cheap."
    wrapped = tokenizer(text, add_special_tokens=False)["input_ids"]
    got = {}
    for name, ids in (("bare", bare), ("wrapped", wrapped)):
        reward = _reward(table, tokenizer, live=False, counterfactual=credit)
        (value,) = asyncio.run(reward([None], [None], [ids], **columns))
        (credits,) = reward.take_pending(1)
        (one,) = credits
        spelled = tokenizer.decode([ids[t] for t in one.tokens])
        assert spelled.strip() == "large", (name, spelled)
        got[name] = (value, one.delta)
    assert got["wrapped"] == got["bare"]


def test_several_tables_are_read_as_one_store(tmp_path: Path, tiny_model: Path) -> None:
    """The mixed workload: rollouts over two tables' items (built on the same tiers) are
    answered from both tables, with no live call; tables on other tiers are refused."""
    from lemon.data.items import NumericItem
    from lemon.learning.training_data import TableData
    from lemon.tables.build import table_items
    from lemon_train.loading import load_tokenizer
    from lemon_train.task_rows import table_rows

    every = [i for i in table_items("svamp", "train", limit=7) if isinstance(i, NumericItem)]
    backends = _backends(every, PersistentCallCache(tmp_path / "calls.sqlite"))
    first = _table(tmp_path / "a-train", every[:4], backends)
    second = _table(tmp_path / "b-train", every[4:], backends)
    _build(first, every[:4], backends)
    _build(second, every[4:], backends)
    paths = f"{first.path},{second.path}"
    rows = table_rows(TableData(path=paths), prompt_format="lemon-policy-prompt/v2")
    columns = {key: [r[key] for r in rows] for key in ("task", "answer", "benchmark", "id")}
    tokenizer = load_tokenizer(str(tiny_model))
    large = tokenizer(SINGLE.format(tier="large"), add_special_tokens=False)["input_ids"]
    reward = _reward(first, tokenizer, live=False)
    reward = type(reward)(
        reward.decode, rewards=RewardConfig(), counterfactual=CounterfactualConfig(enabled=False),
        table=paths, profile="scripted", worker_max_tokens=64, live=False,
    )  # fmt: skip
    n = len(columns["id"])
    assert n == len(every)
    asyncio.run(reward([None] * n, [None] * n, [large] * n, **columns))
    cells = {**Table.open(first.path).cells, **Table.open(second.path).cells}
    assert reward.last.success == [cells[(i, "single-large")].success for i in columns["id"]]
    assert reward.distinct_calls == n
    assert reward.live_calls == 0
    other = _backends(every[4:6], PersistentCallCache(tmp_path / "other.sqlite"))
    elsewhere = _table(tmp_path / "c-train", every[:2], other)
    with pytest.raises(ValueError, match="built on other models"):
        type(reward)(
            reward.decode, rewards=RewardConfig(), counterfactual=CounterfactualConfig(),
            table=f"{first.path},{elsewhere.path}", profile="scripted", worker_max_tokens=64,
        )  # fmt: skip


def test_a_worker_budget_stops_the_run_at_the_step_that_reaches_it(
    table: Table, tiny_model: Path, tmp_path: Path
) -> None:
    """hyperparameters.max_worker_tokens: the step whose reads bring the run's tier-priced
    worker tokens to the budget is the last, and is saved; reading a call again adds nothing."""
    from transformers import TrainerControl, TrainerState

    from lemon_train.grpo import WorkerBudget
    from lemon_train.loading import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_model))
    columns = _rows(table)
    large = tokenizer(SINGLE.format(tier="large"), add_special_tokens=False)["input_ids"]

    def step(reward: Any, index: int) -> float:
        one = {k: v[index : index + 1] for k, v in columns.items()}
        asyncio.run(reward([None], [None], [large], **one))
        return float(reward.distinct_tokens[1])

    probe = _reward(table, tokenizer, live=False)
    first = step(probe, 0)
    second = step(probe, 1) - first
    assert first > 0
    assert second > 0
    reward = _reward(table, tokenizer, live=False)
    budget = WorkerBudget(reward, first + second / 2)
    state, control = TrainerState(), TrainerControl()
    for number, index in ((1, 0), (2, 0), (3, 1), (4, 1)):  # item 0 twice: read once
        step(reward, index)
        state.global_step = number
        budget.on_step_end(None, state, control)
        if control.should_training_stop:  # as the trainer does
            break
    assert budget.stopped_at == 3
    assert control.should_training_stop
    assert control.should_save
    # resumed after step 1: the run's totals go on from those its metrics logged there, so
    # the budget still stops it where the whole run reaches it
    from lemon_train.grpo import carry_totals

    logged = tmp_path / "metrics.jsonl"
    raw = probe.distinct_tokens[0]
    logged.write_text(
        json.dumps({"step": 1, "worker_calls_total": 1, "worker_tokens_total": 7,
                    "worker_priced_tokens_total": first}) + "\n" + '{"step": 1, "heldout'
    )  # fmt: skip
    resumed = _reward(table, tokenizer, live=False)
    carry_totals(resumed, logged)
    assert resumed.distinct_tokens == (7, first)
    later = WorkerBudget(resumed, first + second / 2)
    state.global_step, control = 2, TrainerControl()
    step(resumed, 1)
    later.on_step_end(None, state, control)
    assert later.stopped_at == 2
    assert resumed.distinct_calls == 2
    assert resumed.last.worker_calls == 1  # the batch's own new call, not the carried one
    assert resumed.distinct_tokens[1] == pytest.approx(first + second)
    assert 7 < resumed.distinct_tokens[0] < 7 + raw


def test_a_worker_budget_needs_table_data(tmp_path: Path) -> None:
    from pydantic import ValidationError

    from lemon.learning.training_config import TrainingConfig

    base = {"stage": "grpo", "base_model": "packaged", "output_dir": str(tmp_path / "v")}
    budget = {"max_worker_tokens": 1000.0}
    with pytest.raises(ValidationError, match="max_worker_tokens needs stage grpo on table"):
        TrainingConfig.model_validate({**base, "data": "synthetic:8", "hyperparameters": budget})
    with pytest.raises(ValidationError, match="greater than 0"):
        TrainingConfig.model_validate(
            {**base, "data": "table:x", "hyperparameters": {"max_worker_tokens": 0}}
        )
    made = TrainingConfig.model_validate({**base, "data": "table:x", "hyperparameters": budget})
    assert made.hyperparameters.max_worker_tokens == 1000.0
