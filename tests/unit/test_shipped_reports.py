"""The shipped routing reports rebuild, with no model loaded, from the shipped tables and runs.

Each ``report.json`` under ``experiments/`` (or ``benchmarks/results``) names its test table, train
table, teams, cheap team and policy runs; rebuilding it from those must give the same figures. A
table that a build extends later (more teams, more items) leaves a report on its items and teams
unchanged: only ``left_out``, the teams still being built, may differ."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lemon.evals.table_report import table_report
from lemon.tables.store import Table

ROOT = Path(__file__).resolve().parents[2]
REPORTS = sorted(
    path
    for results in ("experiments", "benchmarks/results")
    for path in (ROOT / results).rglob("report.json")
    if "table" in json.loads(path.read_text()) and "methods" in json.loads(path.read_text())
)


def test_there_are_shipped_reports_to_check() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in REPORTS}
    assert "experiments/policy-tables/svamp/report.json" in names


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.parent.name)
def test_a_shipped_report_rebuilds_from_its_tables(path: Path) -> None:
    shipped = json.loads(path.read_text())
    train = shipped.get("train_table")
    rebuilt = table_report(
        Table.open(ROOT / shipped["table"]),
        train=Table.open(ROOT / train) if train else None,
        teams=shipped["teams"],
        policies=[ROOT / run for run in shipped["policy_runs"]],
        cheap_team=shipped["cheap_team"],
    )
    rebuilt = json.loads(json.dumps(rebuilt))  # the JSON the command prints
    for key in ("table", "train_table", "policy_runs"):  # paths: the test's are absolute
        shipped.pop(key), rebuilt.pop(key)
    shipped.pop("left_out"), rebuilt.pop("left_out")
    assert rebuilt["methods"].keys() == shipped["methods"].keys()
    for name, figures in shipped["methods"].items():
        assert rebuilt["methods"][name] == figures, name
    assert rebuilt == shipped
