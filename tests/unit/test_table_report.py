"""`lemon report TABLE`: the routing baselines, on hand-made tables of real SVAMP items."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lemon.evals.table_report import TableMatrices, table_report
from lemon.policy.columns import column
from lemon.pricing import DEFAULT_TIER_PRICES
from lemon.tables.build import table_items
from lemon.tables.store import Cell, Table, TableMeta, TierModel
from lemon.tasks import TaskKind
from tests.conftest import run_lemon

TEAMS = ["single-small", "single-medium", "single-large"]
SAMPLES = ["sample-medium-1", "sample-medium-2", "sample-medium-3"]
COSTS = {"single-small": 30.0, "single-medium": 100.0, "single-large": 300.0}


def _medium_solves(question: str) -> bool:
    """The hand-made world: medium solves the questions that ask 'how many', large all."""
    return "how many" in question.lower()


def _cell(item: str, team: str, success: bool, extracted: float) -> Cell:
    tier = "medium" if team.startswith("sample") else team.split("-")[1]
    cost = COSTS.get(team, 100.0)
    return Cell(
        item=item,
        team=team,
        success=float(success),
        extracted=extracted,
        answer=f"The answer is {extracted:g}.",
        status="succeeded",
        error=None,
        tokens_by_tier={tier: int(cost)},
        priced_tokens=cost,
        agents=[("solver", tier, None, int(cost) - 10, 10)],
    )


def _table(path: Path, split: str, n: int, *, samples: bool) -> Table:
    items = table_items("svamp", split, limit=n)
    teams = TEAMS + (SAMPLES if samples else [])
    meta = TableMeta(
        benchmark="svamp",
        split=split,
        items=[i.id for i in items],
        teams={t: column(t).to_json(TaskKind.MATH) for t in teams},
        worker_max_tokens=300,
        deadline_s=60,
        tier_prices=DEFAULT_TIER_PRICES.to_json(),
        models={t: TierModel(model=t, label=t, identity=t) for t in ("small", "medium", "large")},
        profile="hand-made",
    )
    table = Table.create(path, meta)
    with table.writer() as writer:
        for k, item in enumerate(items):
            gold = float(item.answer)  # type: ignore[attr-defined]
            medium = _medium_solves(item.question)
            writer.add(_cell(item.id, "single-small", False, -1.0), [])
            writer.add(_cell(item.id, "single-medium", medium, gold if medium else -2.0), [])
            writer.add(_cell(item.id, "single-large", k % 10 != 0, gold if k % 10 else -3.0), [])
            if samples:  # the samples agree where medium is right, split where it is wrong
                for s, name in enumerate(SAMPLES):
                    value = gold if medium else float(-10 - s)
                    writer.add(_cell(item.id, name, medium, value), [])
    return Table.open(path)


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> tuple[Table, Table]:
    root = tmp_path_factory.mktemp("tables")
    return _table(root / "svamp-train", "train", 120, samples=False), _table(
        root / "svamp-test", "test", 150, samples=True
    )


def test_every_baseline_is_reported(tables: tuple[Table, Table]) -> None:
    train, test = tables
    report = table_report(test, train=train)
    methods = report["methods"]
    assert report["n_items"] == 150
    assert report["teams"] == TEAMS
    assert {"oracle", "knn", "logistic", "sc-2", "sc-3", "cascade-2", "cascade-3"} <= set(methods)
    success = {t: np.mean([test.cells[(i, t)].success for i in test.items]) for t in TEAMS}
    for team in TEAMS:
        assert methods[team]["accuracy"] == pytest.approx(success[team], abs=1e-4)
        assert methods[team]["hull_diff"] <= 1e-9  # no fixed team lies above the hull
    oracle = methods["oracle"]
    assert oracle["accuracy"] >= max(success.values())
    assert oracle["score"] == pytest.approx(1.0, abs=1e-3)
    # the cascade escalates exactly where the samples disagree: where medium is wrong
    medium_wrong = 1 - success["single-medium"]
    assert methods["cascade-3"]["escalated"] == pytest.approx(medium_wrong, abs=1e-4)
    expected_cost = 300.0 + medium_wrong * 300.0  # three samples, then large when they split
    assert methods["cascade-3"]["cost"] == pytest.approx(expected_cost, abs=0.01)
    # a world where the text decides the team: the routers read it, their shuffled controls not
    for router in ("knn", "logistic"):
        assert methods[router]["auroc_probability"] > 0.9
        assert methods[router]["shuffled_auroc_probability"] < 0.7
    assert methods["knn"]["auroc"] > methods["knn"]["shuffled_auroc"] + 0.1
    assert methods["knn"]["score"] > 0.3
    lo, hi = methods["knn"]["hull_diff_ci95"]
    assert lo > 0
    assert lo <= methods["knn"]["hull_diff"] <= hi


def test_the_command_prints_the_report_as_json(tables: tuple[Table, Table]) -> None:
    _, test = tables
    result = run_lemon("report", str(test.path), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["train_table"].endswith("svamp-train")
    assert report == table_report(test, train=Table.open(report["train_table"]))
    text = run_lemon("report", str(test.path))
    assert "| knn | router |" in text.stdout


def test_a_bad_table_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "table.json").write_text("{not json")
    result = run_lemon("report", str(tmp_path / "t"))
    assert result.returncode == 1
    assert "table.json: not a table description" in result.stderr


def _keep_only(table: Table, team: str, kept: set[str]) -> None:
    """Drop ``team``'s cells outside ``kept``: a team a build has not finished."""
    lines = (table.path / "cells.jsonl").read_text().splitlines()
    (table.path / "cells.jsonl").write_text(
        "".join(
            line + "\n"
            for line in lines
            if json.loads(line)["team"] != team or json.loads(line)["item"] in kept
        )
    )


def test_a_team_still_being_built_is_named_not_silently_dropped(tmp_path: Path) -> None:
    from lemon.evals.table_report import markdown

    table = _table(tmp_path / "svamp-test", "test", 20, samples=False)
    kept = set(table.meta.items[:12])  # single-large has answered 12 of the 20 items so far
    _keep_only(table, "single-large", kept)
    partial = Table.open(table.path)
    covered = len(partial.covered("single-large"))
    assert covered == 12
    report = table_report(partial)
    assert report["teams"] == ["single-small", "single-medium"]
    assert report["left_out"] == {"single-large": f"{covered}/20 items"}
    assert f"Left out (incomplete): single-large ({covered}/20 items)." in markdown(report)


def test_fixed_teams_are_chosen_only_from_finished_tables(tmp_path: Path) -> None:
    from lemon.policy.fixed import FALLBACK, TABLES
    from lemon.tables.choice import choose_fixed_teams
    from lemon.tables.digest import write_summary

    table = _table(tmp_path / TABLES / "svamp-train", "train", 40, samples=False)
    fallback = FALLBACK.get(TaskKind.MATH, ("single-large", "knowledge_expert"))
    # stopped midway (no summary.json yet): the fallback, not a choice on whatever cells exist
    partial = choose_fixed_teams(tmp_path)["math"]
    assert (partial["team"], partial["source"]) == (fallback[0], None)
    write_summary(table)
    chosen = choose_fixed_teams(tmp_path)["math"]
    # large solves 36 of the 40 (all but every tenth); medium only the 'how many' items, and
    # R_orch's price of 300 tokens is far below one success
    medium = sum(table.cells[(i, "single-medium")].success for i in table.items)
    assert medium < 36
    assert (chosen["team"], chosen["n"], chosen["accuracy"]) == ("single-large", 40, 0.9)
    assert chosen["cost"] == chosen["large_cost"] == 300.0
    assert chosen["source"] == f"{TABLES.as_posix()}/svamp-train/summary.json"


def test_teams_left_out_by_choice_are_not_called_incomplete(tmp_path: Path) -> None:
    table = _table(tmp_path / "svamp-test", "test", 20, samples=False)
    report = table_report(table, teams=["single-small", "single-medium"])
    # single-large answered every item: the caller left it out, the build did not
    assert report["left_out"] == {}
    # with no one-large-agent column compared, no cost is quoted against it
    assert all(m["cost_vs_large"] is None for m in report["methods"].values())
    full = table_report(table)
    assert full["methods"]["single-medium"]["cost_vs_large"] == round(100 / 300, 4)


def test_the_large_reference_is_the_short_format_expert_on_mmlu() -> None:
    from lemon.policy.columns import large_alone

    assert large_alone(["quick-small", "quick-medium", "quick-large"]) == "quick-large"
    assert large_alone(["single-large", "quick-large"]) == "single-large"
    assert large_alone(["pot-large", "verify-medium-large"]) is None


def test_a_team_still_being_built_in_a_finished_table_is_not_chosen(tmp_path: Path) -> None:
    from lemon.policy.fixed import TABLES
    from lemon.tables.choice import choose_fixed_teams
    from lemon.tables.digest import write_summary

    table = _table(tmp_path / TABLES / "svamp-train", "train", 40, samples=False)
    write_summary(table)
    # a later plan line extends the finished table: single-large has answered 5 items so far
    kept = set(table.meta.items[:5])
    _keep_only(table, "single-large", kept)
    chosen = choose_fixed_teams(tmp_path)["math"]
    # chosen among the complete teams on every item, not among all three on the 5
    assert (chosen["team"], chosen["n"]) == ("single-medium", 40)
    assert chosen["large_cost"] is None


def _policy_run(path: Path, table: Table, spec_of: dict[str, str], tokens: dict[str, int]) -> Path:
    """A `lemon eval` run directory over ``table``'s items: the spec and worker tokens per item."""
    path.mkdir(parents=True)
    with (path / "items.jsonl").open("w") as out:
        for item in table.meta.items:
            cell = table.cells[(item, "single-medium")]
            record = {"id": item, "spec": spec_of[item], "correct": bool(cell.success),
                      "tokens": tokens[item], "priced_tokens": float(tokens[item]),
                      "policy_priced_tokens": 5.0}  # fmt: skip
            out.write(json.dumps(record) + "\n")
    return path


def _column_text(team: str) -> str:
    from lemon.spec.formatting import format_spec

    col = column(team)
    return format_spec(col.spec(TaskKind.MATH), output=col.output)


def test_routing_auroc_scores_the_team_chosen_not_the_item_cost(tmp_path: Path) -> None:
    from lemon.evals.table_report import spec_team

    table = _table(tmp_path / "svamp-test", "test", 20, samples=False)
    items = table.meta.items
    fails = {i for i in items if not table.cells[(i, "single-medium")].success}
    assert 0 < len(fails) < len(items)
    # one team for every item, its answers longer exactly where medium fails: the item cost
    # ranks the failures perfectly, the team chosen says nothing
    constant = {i: _column_text("single-medium") for i in items}
    longer = {i: 200 if i in fails else 100 for i in items}
    # large exactly where medium fails, its answers short there; medium elsewhere, long
    reads = {i: _column_text("single-large" if i in fails else "single-medium") for i in items}
    inverse = {i: 50 if i in fails else 400 for i in items}
    runs = [
        _policy_run(tmp_path / "constant", table, constant, longer),
        _policy_run(tmp_path / "reads", table, reads, inverse),
    ]
    report = table_report(table, policies=runs)
    constant_m, reads_m = report["methods"]["constant"], report["methods"]["reads"]
    assert constant_m["auroc"] == 0.5
    assert constant_m["auroc_item_cost"] == 1.0
    assert constant_m["teams_chosen"] == {"single-medium": 20}
    # ranked by the team chosen (large's column mean 300 against medium's 100) the failures
    # come first; ranked by the item's own cost, last
    assert reads_m["auroc"] == 1.0
    assert reads_m["auroc_item_cost"] == 0.0
    # by accuracy: large's column (0.9: all but every tenth item) above medium's
    medium_accuracy = 1 - len(fails) / len(items)
    assert medium_accuracy < 0.9
    assert reads_m["auroc_capability"] == 1.0
    assert constant_m["auroc_capability"] == 0.5
    assert reads_m["teams_chosen"] == {
        "single-large": len(fails),
        "single-medium": len(items) - len(fails),
    }
    renamed = (
        _column_text("single-large").replace("name: solver", "name: worker")
        .replace("output: solver", "output: worker")
    )  # fmt: skip
    assert spec_team(_column_text("single-large"), _data(table)) == "single-large"
    assert spec_team(renamed, _data(table)) == renamed
    assert spec_team("agents: [", _data(table)).startswith("(invalid)")


def test_team_scores_by_hand(tmp_path: Path) -> None:
    from lemon.evals.table_report import team_scores
    from lemon.tables.routers import auroc

    data = _data(_table(tmp_path / "svamp-test", "test", 4, samples=False))
    # columns cost 30 / 100 / 300 on every item; 'x' is no column: the mean of its items' costs
    teams = ["single-large", "x", "x", "single-small"]
    scores = team_scores(data, np.array([999.0, 10.0, 50.0, 7.0]), teams)
    assert scores.tolist() == [300.0, 30.0, 30.0, 30.0]
    # failures on items 0 and 1: item 0 (300) beats both negatives (30, 30); item 1 ties both
    assert auroc(scores, np.array([True, True, False, False])) == (2 + 0.5 * 2) / 4


def _data(table: Table) -> TableMatrices:
    from lemon.evals.table_report import default_teams, load_table_matrices

    return load_table_matrices(table, default_teams(table))
