"""Outcome tables: built once, resumed, verified, and read back with no model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from lemon.backends.base import Backend
from lemon.backends.callcache import CachedBackend, PersistentCallCache
from lemon.backends.scripted import ScriptedBackend, ScriptedConfig, ScriptedRule
from lemon.data.items import NumericItem
from lemon.orchestration import ItemSettings, item_outcome, run_item
from lemon.policy.columns import column, columns
from lemon.pricing import DEFAULT_TIER_PRICES
from lemon.spec.models import Capacity, Spec
from lemon.tables.build import build_table, table_items
from lemon.tables.digest import summarize, verify
from lemon.tables.replay import MISSING, table_backends
from lemon.tables.store import Table, TableMeta, TierModel
from lemon.tasks import TaskKind

TEAMS = ["single-small", "single-medium", "single-large", "verify-medium-large", "sample-medium-1"]


def _items() -> list[NumericItem]:
    items = table_items("svamp", "train", limit=4)
    assert all(isinstance(i, NumericItem) for i in items)
    return items  # type: ignore[return-value]


def _backends(items: list[NumericItem], cache: PersistentCallCache) -> dict[Capacity, Backend]:
    """Scripted tiers: the large tier and the verifier answer the first two items right."""
    right = [
        ScriptedRule(
            match=f"(?s)verifier.*{item.question[:30]}", output=f"The answer is {item.answer:g}."
        )
        for item in items[:2]
    ] + [
        ScriptedRule(
            match=item.question[:30].replace("(", r"\("), output=f"The answer is {item.answer:g}."
        )
        for item in items[:2]
    ]
    wrong = ScriptedRule(output="I think it is {digest}. The answer is 7777.")
    configs = {
        Capacity.SMALL: ScriptedConfig(name="s", rules=(wrong,)),
        Capacity.MEDIUM: ScriptedConfig(name="m", rules=(wrong,)),
        Capacity.LARGE: ScriptedConfig(name="l", rules=(*right, wrong)),
    }
    return {
        tier: CachedBackend(ScriptedBackend(config, tier=tier.value), cache)
        for tier, config in configs.items()
    }


def _table(path: Path, items: list[NumericItem], backends: dict[Capacity, Backend]) -> Table:
    models = {
        tier.value: TierModel(
            model=b.model_id,
            label=b.label,
            identity=b.identity(),  # type: ignore[attr-defined]
        )
        for tier, b in backends.items()
    }
    meta = TableMeta(
        benchmark="svamp",
        split="train",
        items=[i.id for i in items],
        teams={t: column(t).to_json(TaskKind.MATH) for t in TEAMS},
        worker_max_tokens=64,
        deadline_s=60,
        tier_prices=DEFAULT_TIER_PRICES.to_json(),
        models=models,
        profile="scripted",
    )
    return Table.create(path, meta)


def _build(
    table: Table,
    items: list[NumericItem],
    backends: dict[Capacity, Backend],
    teams: list[str] = TEAMS,
) -> int:
    stats = asyncio.run(
        build_table(
            table,
            items,
            columns(teams),
            backends=backends,
            settings=ItemSettings(worker_max_tokens=64, deadline_s=60),
            prices=DEFAULT_TIER_PRICES,
            concurrency=4,
            chunk=2,
        )
    )
    return stats.added


def test_a_table_is_built_once_resumed_and_verified(tmp_path: Path) -> None:
    items = _items()
    cache = PersistentCallCache(tmp_path / "calls.sqlite")
    backends = _backends(items, cache)
    table = _table(tmp_path / "t", items, backends)
    assert _build(table, items, backends) == len(items) * len(TEAMS)
    reread = Table.open(tmp_path / "t")
    assert len(reread.cells) == len(items) * len(TEAMS)
    assert verify(reread) == []
    # the verifier team's solver asks exactly what the single medium solver asks: one call
    for item in items:
        single = reread.cell(item.id, "single-medium")
        verified = reread.cell(item.id, "verify-medium-large")
        assert single is not None
        assert verified is not None
        assert verified.agents[0][2] == single.agents[0][2]
    distinct = {k for c in reread.cells.values() for k in c.keys}
    assert distinct == set(reread.calls)
    assert len(distinct) < sum(len(c.keys) for c in reread.cells.values())
    summary = summarize(reread)
    assert summary["teams"]["single-large"]["correct"] == 2
    assert summary["teams"]["single-medium"]["correct"] == 0
    assert summary["teams"]["verify-medium-large"]["correct"] == 2
    # nothing left to run; a torn last line (a build stopped mid-write) runs again, alone
    assert _build(reread, items, backends) == 0
    cells = (tmp_path / "t" / "cells.jsonl").read_text().splitlines()
    (tmp_path / "t" / "cells.jsonl").write_text("\n".join(cells[:-1]) + "\n" + cells[-1][:20])
    torn = Table.open(tmp_path / "t")
    assert len(torn.torn) == 1
    assert any("torn line" in p for p in verify(torn))
    assert _build(torn, items, backends) == 1
    assert verify(Table.open(tmp_path / "t")) == []


def test_verify_names_a_cell_whose_call_is_missing(tmp_path: Path) -> None:
    items = _items()[:1]
    cache = PersistentCallCache(tmp_path / "calls.sqlite")
    backends = _backends(items, cache)
    table = _table(tmp_path / "t", items, backends)
    _build(table, items, backends)
    calls = tmp_path / "t" / "calls.jsonl"
    lines = calls.read_text().splitlines()
    gone = json.loads(lines[0])["key"]
    calls.write_text("\n".join(lines[1:]) + "\n")
    problems = verify(Table.open(tmp_path / "t"))
    assert problems
    assert all(gone[:12] in p and "is not in calls.jsonl" in p for p in problems)


def test_a_machine_failure_is_not_recorded(tmp_path: Path) -> None:
    items = _items()[:2]
    cache = PersistentCallCache(tmp_path / "calls.sqlite")
    backends = _backends(items, cache)
    down = ScriptedConfig(name="down", rules=(ScriptedRule(fail="transient"),))
    backends[Capacity.LARGE] = CachedBackend(ScriptedBackend(down, tier="large"), cache)
    table = _table(tmp_path / "t", items, backends)
    added = _build(table, items, backends)
    large = {"single-large", "verify-medium-large"}
    assert added == len(items) * (len(TEAMS) - len(large))
    assert not any(team in large for _, team in Table.open(tmp_path / "t").cells)


def test_a_fresh_reader_gets_the_tables_answers_without_a_model(tmp_path: Path) -> None:
    items = _items()
    cache = PersistentCallCache(tmp_path / "calls.sqlite")
    backends = _backends(items, cache)
    table = _table(tmp_path / "t", items, backends)
    _build(table, items, backends)
    table = Table.open(tmp_path / "t")
    replay, calls = table_backends(table)
    spec = column("verify-medium-large").spec(TaskKind.MATH)
    renamed = Spec.model_validate(
        {
            "agents": [
                {"name": "solver", "role": "math_solver", "capacity": "medium"},
                {
                    "name": "checker",
                    "role": "verifier",
                    "capacity": "large",
                    "depends_on": ["solver"],
                },
            ],
        }
    )
    for item in items:
        result = asyncio.run(
            run_item(item, renamed, backends=replay, settings=ItemSettings(64, 60.0))
        )
        stored = table.cell(item.id, "verify-medium-large")
        assert stored is not None
        assert result.answer == stored.answer
        outcome = asyncio.run(item_outcome(item, result, spec=spec))
        assert outcome.success == stored.success
    assert calls.misses == 0
    assert calls.hits == 2 * len(items)
    # new duties ask a new question: the table cannot answer it, and says so
    with_duties = Spec.model_validate(
        {
            "agents": [
                {
                    "name": "solver",
                    "role": "math_solver",
                    "capacity": "medium",
                    "duties": "Think in French.",
                }
            ]
        }
    )
    result = asyncio.run(
        run_item(items[0], with_duties, backends=replay, settings=ItemSettings(64, 60.0))
    )
    assert result.answer is None
    assert result.agents[0].error == MISSING
    assert calls.misses == 1


def test_table_items_extend_the_same_prefix_and_stratify_mmlu() -> None:
    first = [i.id for i in table_items("svamp", "test", limit=20)]
    assert first == [i.id for i in table_items("svamp", "test", limit=40)][:20]
    mmlu = table_items("mmlu", "test", limit=57 * 2)
    subjects = [i.subject for i in mmlu]  # type: ignore[attr-defined]
    assert len(set(subjects[:57])) == 57
    assert len(set(subjects[57:])) == 57


@pytest.mark.parametrize("name", ["single-medium", "pot-large", "quick-small"])
def test_columns_are_valid_specs_without_duties(name: str) -> None:
    col = column(name)
    kind = col.kinds[0]
    spec = col.spec(kind)
    assert all(agent.duties is None for agent in spec.agents)


def test_the_table_commands_build_extend_show_and_verify(tmp_path: Path) -> None:
    from tests.conftest import run_lemon

    table = tmp_path / "t"
    common = ["--benchmark", "svamp", "--split", "train", "--profile", "scripted", "-q"]
    env = {"LEMON_CALL_CACHE": str(tmp_path / "calls.sqlite")}
    first = run_lemon("table", "build", str(table), *common, "--limit", "2",
                      "--teams", "single-medium", env=env)  # fmt: skip
    assert first.returncode == 0, first.stderr
    more = run_lemon("table", "build", str(table), *common, "--limit", "3",
                     "--teams", "single-medium,single-large", "--json", env=env)  # fmt: skip
    assert more.returncode == 0, more.stderr
    data = json.loads(more.stdout)
    assert data["added"] == 1 + 3  # the new item's medium cell, and every large cell
    assert data["summary"]["n_items"] == 3
    shown = run_lemon("table", "show", str(table), "--json")
    assert json.loads(shown.stdout)["teams"]["single-large"]["n"] == 3
    checked = run_lemon("table", "verify", str(table))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    meta = json.loads((table / "table.json").read_text())
    assert [b["added"] for b in meta["builds"]] == [2, 4]
    other = run_lemon("table", "build", str(table), "--benchmark", "mmlu", "--split", "train",
                      "--teams", "single-medium", "--profile", "scripted", env=env)  # fmt: skip
    assert other.returncode == 2
    assert "is svamp/train, not mmlu/train" in other.stderr


class _Reworded(ScriptedBackend):
    """The same model (same identity) answering the same prompt differently, as greedy llama.cpp
    does under another batching."""

    async def generate(self, request):  # type: ignore[no-untyped-def]
        found = await super().generate(request)
        return type(found)("Reworded: the answer is 4242.", found.prompt_tokens, 7, "stop")


def test_extending_a_table_reads_the_calls_it_holds_instead_of_asking_again(
    tmp_path: Path,
) -> None:
    items = _items()[:2]
    backends = _backends(items, PersistentCallCache(tmp_path / "first.sqlite"))
    table = _table(tmp_path / "t", items, backends)
    assert _build(table, items, backends, ["single-medium"]) == 2
    # a later build, on another machine's empty cache, whose medium tier would answer anew
    medium = backends[Capacity.MEDIUM]
    assert isinstance(medium, CachedBackend)
    scripted = medium.inner
    assert isinstance(scripted, ScriptedBackend)
    again = dict(backends)
    again[Capacity.MEDIUM] = CachedBackend(
        _Reworded(scripted.config, tier="medium"), PersistentCallCache(tmp_path / "second.sqlite")
    )
    assert again[Capacity.MEDIUM].identity() == medium.identity()  # type: ignore[attr-defined]
    extended = Table.open(tmp_path / "t")
    assert _build(extended, items, again, ["verify-medium-large"]) == 2
    done = Table.open(tmp_path / "t")
    assert verify(done) == []
    for item in items:
        single, verified = (
            done.cell(item.id, "single-medium"),
            done.cell(item.id, "verify-medium-large"),
        )
        assert single is not None
        assert verified is not None
        assert verified.agents[0][2] == single.agents[0][2]  # the same call, read from the table
        assert "Reworded" not in done.calls[verified.agents[0][2]].text
