"""One record of an executed spec: the engine's result reads back from its JSON, and the table
cell, the evaluation's item record and the teacher row are projections of one
:class:`~lemon.orchestration.ItemOutcome` that agree on every fact they share, written in the
file formats the stored tables, evaluations and SFT rows already use."""

from __future__ import annotations

import asyncio
import json

import pytest

from lemon.budget import Budget, BudgetEstimate, BudgetUse
from lemon.data.items import NumericItem
from lemon.engine.results import AgentResult, AgentStatus, FailureKind, RunResult, RunStatus
from lemon.evals.loop import ItemRecord
from lemon.orchestration import ItemOutcome, item_outcome
from lemon.pricing import TierPrices
from lemon.reward import orchestration_rewards
from lemon.spec.models import Spec
from lemon.tables.build import table_items
from lemon.tables.store import Cell, stored_calls
from lemon.teaching.rows import outcome_facts
from tests.conftest import ROOT

PRICES = TierPrices(small=0.5, medium=1.0, large=3.0)
SPEC = Spec.model_validate(
    {
        "agents": [
            {"name": "coder", "role": "programmer", "capacity": "small"},
            {
                "name": "run",
                "role": "python_executor",
                "capacity": "small",
                "depends_on": ["coder"],
            },
            {"name": "solver", "role": "math_solver", "capacity": "large", "depends_on": ["run"]},
        ]
    }
)


def _item() -> NumericItem:
    (item,) = table_items("svamp", "train", limit=1)
    assert isinstance(item, NumericItem)
    return item


def _result(answer: str | None) -> RunResult:
    """A run of :data:`SPEC` by hand: a model agent from the call cache, a tool agent, and a
    solver that answered (``answer``) or failed (None)."""
    solver_ok = answer is not None
    return RunResult(
        status=RunStatus.SUCCEEDED if solver_ok else RunStatus.FAILED,
        answer=answer,
        spec="agents: ...\n",
        agents=[
            AgentResult(
                "coder", "programmer", "small", "scripted:s", status=AgentStatus.SUCCEEDED,
                output="answer = 2 + 2", prompt_tokens=40, completion_tokens=10, latency_s=0.5,
                attempts=1, cached=True, started_s=0.0, finished_s=0.5, finish_reason="stop",
                call_key="k-coder",
            ),
            AgentResult(
                "run", "python_executor", "small", "tool:python", tool=True,
                status=AgentStatus.SUCCEEDED, output="4", attempts=1, started_s=0.5,
                finished_s=0.5125,
            ),
            AgentResult(
                "solver", "math_solver", "large", "scripted:l",
                status=AgentStatus.SUCCEEDED if solver_ok else AgentStatus.FAILED,
                output=answer or "", prompt_tokens=100, completion_tokens=20 if solver_ok else 0,
                latency_s=1.25, attempts=1 if solver_ok else 2, started_s=0.5125,
                finished_s=1.75, finish_reason="length" if solver_ok else "",
                error=None if solver_ok else "empty answer",
                failure=None if solver_ok else FailureKind.AGENT_FAILED,
                call_key="k-solver" if solver_ok else "k-unused",
            ),
        ],
        wall_s=1.75,
        critical_path=("coder", "run", "solver"),
        error=None if solver_ok else "agent solver failed: empty answer",
        failure=None if solver_ok else FailureKind.AGENT_FAILED,
    )  # fmt: skip


def _outcome(answer: str | None) -> ItemOutcome:
    return asyncio.run(item_outcome(_item(), _result(answer), spec=SPEC, prices=PRICES))


# -- the engine's result, through its JSON --------------------------------------------------


def test_a_run_with_a_tool_a_failed_agent_and_a_budget_reads_back_equal() -> None:
    run = _result(None)
    run.wall_s = 2 / 3  # nothing rounds on the way
    run.budget = BudgetUse(
        Budget(tokens=2000, cost=800.5, source="--budget"),
        tokens=150,
        cost=325.0 / 3,
        wall_s=1.75,
        reason="tokens: 2000 worker tokens spent",
        estimate=BudgetEstimate(
            tokens=180.55, cost=340.0 / 7, source="upper_bound", basis="3 agents"
        ),
        replaced="the template's estimate 2500 tokens",
        scope="shared",
        shared="LemonBudget team/a (tokens=5000 per 3600 s)",
    )
    back = RunResult.from_json(json.loads(json.dumps(run.to_json())))
    assert back == run
    assert back.agents[1].tool
    assert back.agents[0].call_key == "k-coder"
    assert back.agents[2].failure is FailureKind.AGENT_FAILED
    assert back.budget is not None
    assert back.budget.budget is not None
    assert back.budget.budget.label() == "--budget tokens=2000,cost=800.5"
    # without a budget, and an answer: equal too
    plain = _result("The answer is 4.")
    assert RunResult.from_json(json.loads(json.dumps(plain.to_json()))) == plain


def test_a_run_written_before_the_agents_carried_their_keys_still_reads() -> None:
    data = _result("The answer is 4.").to_json()
    for agent in data["agents"]:
        for key in ("tool", "finish_reason", "call_key", "started_s", "finished_s"):
            del agent[key]
    back = RunResult.from_json(data)
    assert [a.call_key for a in back.agents] == [None, None, None]
    assert back.tokens() == {"prompt": 140, "completion": 30, "total": 170}
    with pytest.raises(ValueError, match="half-done"):
        RunResult.from_json({**data, "status": "half-done"})


# -- one record, three projections ----------------------------------------------------------


def test_the_record_keeps_what_ran() -> None:
    item = _item()
    outcome = _outcome(f"The answer is {item.answer:g}.")
    assert outcome.success == 1.0
    assert outcome.worker_tokens == 170
    assert outcome.tokens_by_tier == {"small": 50, "large": 120}
    assert outcome.priced_tokens == pytest.approx(0.5 * 50 + 3.0 * 120)
    assert (outcome.agents, outcome.edges) == (3, 2)
    assert [(a.name, a.tier, a.key, a.answered) for a in outcome.agent_runs] == [
        ("coder", "small", "k-coder", True),
        ("run", "small", None, False),
        ("solver", "large", "k-solver", True),
    ]
    assert (outcome.status, outcome.calls, outcome.cache_hits) == (RunStatus.SUCCEEDED, 1, 1)
    failed = _outcome(None)
    # a failed agent's key names no answer a record reads
    assert failed.agent_runs[2].key is None
    assert not failed.agent_runs[2].answered
    assert failed.failure is FailureKind.AGENT_FAILED
    assert failed.error == "agent solver failed: empty answer"


@pytest.mark.parametrize("right", [True, False])
def test_the_cell_the_item_record_and_the_teacher_row_agree(right: bool) -> None:
    item = _item()
    outcome = _outcome(f"The answer is {item.answer if right else item.answer + 1:g}.")
    cell = Cell.of(outcome, item=item.id, team="pot-mixed")
    record = ItemRecord.of([outcome], item=item.id, method="spec:x", spec="s", wall_s=2.0)
    facts = outcome_facts(outcome)
    assert cell.success == float(record.success) == facts["success"] == float(right)
    assert cell.worker_tokens == record.worker_tokens == facts["worker_tokens"] == 170
    assert cell.priced_tokens == record.priced_tokens == outcome.priced_tokens
    assert facts["priced_tokens"] == round(record.priced_tokens, 3)
    assert cell.answer == record.answer == outcome.answer
    assert cell.extracted == record.extracted == outcome.extracted
    # the cell read back is the record R_orch was paid on
    back = cell.outcome(spec=SPEC)
    assert orchestration_rewards([back]) == orchestration_rewards([outcome])
    assert back.tokens_by_tier == outcome.tokens_by_tier
    assert [a.key for a in back.agent_runs] == [a.key for a in outcome.agent_runs]


def test_a_table_cell_needs_the_key_of_every_answer_it_reads() -> None:
    item = _item()
    outcome = _outcome("The answer is 4.")
    unkeyed = outcome.model_copy(
        update={"agent_runs": (outcome.agent_runs[0].model_copy(update={"key": None}),)}
    )
    with pytest.raises(ValueError, match="agent 'coder' has no call key"):
        Cell.of(unkeyed, item=item.id, team="t")


def test_self_consistency_sums_the_samples_and_takes_the_majority() -> None:
    item = _item()
    right, wrong = f"The answer is {item.answer:g}.", f"The answer is {item.answer + 1:g}."
    runs = [_outcome(wrong), _outcome(None), _outcome(right), _outcome(right)]
    record = ItemRecord.of(
        runs, item=item.id, method="baseline:sc", spec="s", wall_s=1.0, sampled=True
    )
    assert record.success
    assert record.answer == right
    assert record.worker_tokens == sum(r.worker_tokens for r in runs)
    assert record.calls == 1 + 2 + 1 + 1
    assert record.cache_hits == 4
    assert record.failure is FailureKind.AGENT_FAILED  # the run without an answer says why
    assert record.samples == [str(item.answer + 1), str(item.answer), str(item.answer)]
    first = ItemRecord.of(runs, item=item.id, method="m", spec="s", wall_s=1.0, vote=False)
    assert first.answer == wrong
    assert not first.success
    assert first.samples == []


# -- the file formats, a golden line each ---------------------------------------------------


def test_the_file_lines_are_the_formats_on_disk() -> None:
    item = _item()
    gold = f"{item.answer:g}"
    outcome = _outcome(f"The answer is {gold}.")
    cell = Cell.of(outcome, item=item.id, team="pot-mixed")
    assert json.dumps(cell.to_json(), ensure_ascii=False) == (
        f'{{"item": "{item.id}", "team": "pot-mixed", "success": 1.0, "extracted": {item.answer},'
        f' "answer": "The answer is {gold}.", "status": "succeeded", "error": null,'
        ' "tokens": {"small": 50, "large": 120}, "worker_tokens": 170, "priced": 385.0,'
        ' "agents": [["coder", "small", "k-coder", 40, 10], ["run", "small", null, 0, 0],'
        ' ["solver", "large", "k-solver", 100, 20]], "wall_s": 1.75}'
    )
    assert [json.dumps(c.to_json()) for c in stored_calls(outcome)] == [
        '{"key": "k-coder", "tier": "small", "text": "answer = 2 + 2", "prompt_tokens": 40,'
        ' "completion_tokens": 10, "finish": "stop"}',
        f'{{"key": "k-solver", "tier": "large", "text": "The answer is {gold}.",'
        ' "prompt_tokens": 100, "completion_tokens": 20, "finish": "length"}',
    ]
    record = ItemRecord.of([outcome], item=item.id, method="spec:team.yaml", spec="s", wall_s=2.5)
    assert json.dumps(record.to_json(), ensure_ascii=False) == (
        f'{{"id": "{item.id}", "method": "spec:team.yaml", "spec": "s",'
        f' "answer": "The answer is {gold}.", "extracted": {item.answer}, "correct": true,'
        ' "tokens": 170, "priced_tokens": 385.0, "policy_priced_tokens": 0.0,'
        ' "full_cost": 385.0, "calls": 1, "cache_hits": 1, "wall_s": 2.5,'
        ' "status": "succeeded", "error": null}'
    )
    failed = ItemRecord.of([_outcome(None)], item=item.id, method="m", spec="s", wall_s=0.25)
    line = failed.to_json()
    assert (line["status"], line["failure"], line["correct"]) == ("failed", "agent_failed", False)
    assert json.dumps(outcome_facts(outcome)) == (
        '{"success": 1.0, "worker_tokens": 170, "priced_tokens": 385.0}'
    )


@pytest.mark.parametrize("table", ["svamp-test", "mmlu-train"])
def test_stored_cells_read_and_write_back_byte_for_byte(table: str) -> None:
    path = ROOT / "tables" / table / "cells.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()[:300]
    assert len(lines) == 300
    for line in lines:
        cell = Cell.from_json(json.loads(line))
        assert json.dumps(cell.to_json(), ensure_ascii=False) == line
        assert cell.outcome(spec=SPEC).tokens_by_tier == cell.tokens_by_tier


def test_the_record_names_one_fact_one_way() -> None:
    """The code's names: no field of the record or its projections is called ``correct``,
    ``tokens`` or ``priced`` any more (the files keep those keys)."""
    for cls in (ItemOutcome, Cell, ItemRecord):
        names = set(getattr(cls, "model_fields", None) or cls.__dataclass_fields__)
        assert not names & {"correct", "tokens", "priced"}, cls
