"""The mixed workload's report on hand-made tables of real SVAMP and AQuA items, by hand."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from lemon.evals import mixed
from lemon.policy.columns import column
from lemon.pricing import DEFAULT_TIER_PRICES
from lemon.tables.build import table_items
from lemon.tables.store import Cell, Table, TableMeta, TierModel
from lemon.tasks import TaskKind
from tests.conftest import run_lemon

N = 10
# team -> (cost, greedy right on item k, replica right on item k)
World = dict[str, tuple[float, Callable[[int], bool], Callable[[int], bool]]]
SVAMP: World = {
    "single-small": (10.0, lambda k: k % 5 == 0, lambda k: k == 0),
    "single-large": (100.0, lambda k: k % 2 == 0, lambda k: k % 2 == 0),
    "pot-large": (50.0, lambda k: k < 7, lambda k: k < 3),
}
AQUA: World = {
    "single-small": (10.0, lambda k: False, lambda k: False),
    "single-large": (100.0, lambda k: k < 4, lambda k: k < 4),
    "quick-large": (60.0, lambda k: k < 6, lambda k: k < 6),
}


def _cell(item: str, team: str, right: bool, cost: float, wrong: str) -> Cell:
    value = "gold" if right else wrong
    return Cell(
        item=item, team=team, success=float(right), extracted=value,
        answer=f"The answer is {value}.", status="succeeded", error=None,
        tokens_by_tier={"large": int(cost)}, priced_tokens=cost,
        agents=[("solver", "large", None, 1, 1)],
    )  # fmt: skip


def _table(path: Path, benchmark: str, split: str, kind: TaskKind, world: World) -> Table:
    items = table_items(benchmark, split, limit=N)
    teams = [*world, *(f"{t}-r1" for t in world)]
    meta = TableMeta(
        benchmark=benchmark, split=split, items=[i.id for i in items],
        teams={t: column(t).to_json(kind) for t in teams}, worker_max_tokens=300,
        deadline_s=60, tier_prices=DEFAULT_TIER_PRICES.to_json(),
        models={t: TierModel(model=t, label=t, identity=t) for t in ("small", "medium", "large")},
        profile="hand-made",
    )  # fmt: skip
    table = Table.create(path, meta)
    with table.writer() as writer:
        for k, item in enumerate(items):
            for team, (cost, greedy, replica) in world.items():
                writer.add(_cell(item.id, team, greedy(k), cost, f"{team}-{k}"), [])
                writer.add(_cell(item.id, f"{team}-r1", replica(k), cost, f"r-{team}-{k}"), [])
    return Table.open(path)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tables")
    for split in ("train", "test"):
        _table(root / f"svamp-{split}", "svamp", split, TaskKind.MATH, SVAMP)
        _table(root / f"aqua-{split}", "aqua", split, TaskKind.MULTIPLE_CHOICE, AQUA)
    return root


@pytest.fixture(scope="module")
def report(root: Path) -> dict[str, object]:
    pairs = mixed.discover(str(root), ["svamp", "aqua"])
    return mixed.mixed_report([mixed.load_bench(Table.open(a), Table.open(b)) for a, b in pairs])


def test_choices_are_made_on_train(report: dict) -> None:  # type: ignore[type-arg]
    svamp, aqua = report["svamp"], report["aqua"]
    # one team every benchmark runs: single-large (0.5 and 0.4) beats single-small (0.2, 0)
    assert report["best_fixed_team"] == "single-large"
    assert (svamp["max_expert_team"], aqua["max_expert_team"]) == ("pot-large", "quick-large")
    assert (svamp["kind_router_team"], aqua["kind_router_team"]) == ("pot-large", "quick-large")
    assert svamp["max_expert"]["accuracy"] == 0.7
    assert svamp["max_expert"]["vs_best_fixed"] == pytest.approx(0.2)


def test_replicated_oracle_by_hand(report: dict) -> None:  # type: ignore[type-arg]
    svamp = report["svamp"]
    # items 0,1,2,4,6,8 have a team right twice (cheapest: small 10, pot 50, pot 50, large
    # 100, large 100, large 100); 3,5,7,9 go to the max expert pot-large (right on 3 and 5,
    # by its greedy answer alone), at its cost 50
    oracle = svamp["replicated_oracle"]
    assert oracle["accuracy"] == 0.8
    assert oracle["cost"] == pytest.approx((10 + 50 + 50 + 100 + 100 + 100 + 4 * 50) / 10)
    assert oracle["replicated_share"] == 0.6
    assert svamp["self_oracle"]["accuracy"] == 0.7  # pot-large's replica adds nothing
    assert svamp["self_oracle"]["cost"] == 100.0
    # items 7 and 9: every team fails; item 8: only single-large; 1 and 3: only pot-large
    assert svamp["beta"] == 0.2
    assert svamp["fixed"]["single-large"]["exclusive"] == 1
    assert svamp["fixed"]["pot-large"]["exclusive"] == 2


def test_headroom_and_its_interval(report: dict) -> None:  # type: ignore[type-arg]
    svamp, aqua, mix = report["svamp"], report["aqua"], report["mix"]
    assert svamp["headroom"] == 0.1  # one item (8) of ten, the oracle's only replicated gain
    lo, hi = svamp["headroom_ci95"]
    assert lo == 0.0  # it reaches 0: below the noise on ten items
    assert hi > 0.1
    assert aqua["headroom"] == 0.0
    assert aqua["replicated_oracle"]["cost"] == 60.0  # unsolved items cost the expert, not small
    assert mix["headroom"] == 0.05  # equal weight per benchmark
    assert mix["max_expert"]["accuracy"] == 0.65
    assert report["pooled"]["max_expert"]["accuracy"] == 0.65  # equal sizes: the same
    assert mix["beta"] == pytest.approx((0.2 + 0.4) / 2)


def test_routers_and_cascade_run_on_each_kind(report: dict) -> None:  # type: ignore[type-arg]
    for bench in ("svamp", "aqua"):
        entry = report[bench]
        for name in ("knn", "logistic"):
            assert sum(entry[name]["shares"].values()) == pytest.approx(1.0)
        assert entry["cascade"]["cheap_team"] in entry["teams"]
    assert set(report["kinds"]) == {"math", "multiple_choice"}


def test_lemon_report_mix_writes_the_report_and_names_its_inputs(
    root: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = run_lemon(
        "report", "--mix", str(root), "--benchmarks", "svamp,aqua", "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    assert "headroom" in result.stdout
    data = json.loads((out / "report.json").read_text())
    assert data["mix"]["headroom"] == 0.05
    assert str(root / "svamp-test" / "cells.jsonl") in data["inputs"]
    assert (out / "report.png").stat().st_size > 0
    missing = run_lemon("report", "--mix", str(tmp_path))
    assert missing.returncode == 1
    assert "no <benchmark>-test table" in missing.stderr


def test_the_shipped_report_is_fresh_and_rebuilds_from_the_tables(tmp_path: Path) -> None:
    """experiments/mixed-workload/report.json is what `run.sh` writes from the tables it names
    (by hash): rebuilt here from the shipped tables, without a model, it is the same."""
    from tests.conftest import ROOT

    stored = json.loads((ROOT / "experiments/mixed-workload/report.json").read_text())
    for name, digest in stored["inputs"].items():
        assert hashlib.sha256((ROOT / name).read_bytes()).hexdigest() == digest, (
            f"{name} changed since the report was written: bash experiments/mixed-workload/run.sh"
        )
    result = run_lemon("report", "--mix", "tables", "--json", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == stored


def _records(root: Path, bench: str, team: str, extra_cost: float = 0.0) -> list[dict[str, object]]:
    """`lemon eval` item records of a policy that writes ``team`` on every test item."""
    table = Table.open(root / f"{bench}-test")
    records = []
    for item in table.meta.items:
        cell = table.cell(item, team)
        assert cell is not None
        records.append(
            {
                "id": item,
                "correct": cell.success >= 0.5,
                "full_cost": cell.priced_tokens + extra_cost,
            }
        )
    return records


def test_a_policy_joins_as_a_method_paired_with_the_fixed_teams_and_the_max_expert(
    root: Path,
) -> None:
    benches = [
        mixed.load_bench(Table.open(a), Table.open(b))
        for a, b in mixed.discover(str(root), ["svamp", "aqua"])
    ]
    # a policy that writes each benchmark's max expert, paying 5 tokens of its own per item
    expert = {
        "svamp": _records(root, "svamp", "pot-large", 5.0),
        "aqua": _records(root, "aqua", "quick-large", 5.0),
    }
    # one that writes single-small everywhere but was run on SVAMP only
    small = {"svamp": _records(root, "svamp", "single-small")}
    report = mixed.mixed_report(benches, policies={"expert": expert, "small": small})
    mix = report["mix"]
    assert report["policies"] == ["expert", "small"]
    assert mix["expert"]["accuracy"] == mix["max_expert"]["accuracy"] == 0.65
    assert mix["expert"]["cost"] == pytest.approx(mix["max_expert"]["cost"] + 5.0)
    assert mix["expert"]["vs_max_expert"] == 0.0
    assert mix["expert"]["vs_max_expert_ci95"] == [0.0, 0.0]
    assert mix["expert"]["vs_best_fixed"] == mix["max_expert"]["vs_best_fixed"]
    # single-small on SVAMP: 0.2 against single-large's 0.5 and pot-large's 0.7
    assert report["svamp"]["small"]["vs_best_fixed"] == pytest.approx(-0.3)
    assert report["svamp"]["small"]["vs_max_expert"] == pytest.approx(-0.5)
    assert report["aqua"]["small"] is None
    assert mix["small"] == {"missing": ["aqua"]}
    assert "expert" in report["svamp"]["score"]
    assert "| expert |" in mixed.markdown(report)
    # a policy on part of the items counts on those, paired on the same items
    half = mixed.policy_figure(benches[0], expert["svamp"][:4])
    assert list(half.rows) == [0, 1, 2, 3]
    twice = [*expert["svamp"], expert["svamp"][0]]
    with pytest.raises(ValueError, match="answered twice"):
        mixed.mixed_report(benches, policies={"p": {"svamp": twice}})
    with pytest.raises(ValueError, match="cannot be named 'knn'"):
        mixed.mixed_report(benches, policies={"knn": expert})


def test_lemon_report_mix_reads_a_policys_eval_runs(root: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for bench, team in (("svamp", "pot-large"), ("aqua", "quick-large")):
        (runs / bench).mkdir(parents=True)
        lines = [json.dumps(r) for r in _records(root, bench, team)]
        (runs / bench / "items.jsonl").write_text("\n".join(lines) + "\n")
    result = run_lemon(
        "report", "--mix", str(root), "--benchmarks", "svamp,aqua", "--policy", f"mine={runs}",
        "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["mix"]["mine"]["vs_max_expert"] == 0.0
    assert str(runs / "svamp" / "items.jsonl") in data["inputs"]
    assert data["command"].endswith(f"--policy mine={runs}")
    (runs / "aqua" / "items.jsonl").write_text('{"id": 1}\nnot json\n')
    broken = run_lemon("report", "--mix", str(root), "--benchmarks", "svamp,aqua",
                       "--policy", f"mine={runs}")  # fmt: skip
    assert broken.returncode == 1
    assert f"{runs / 'aqua' / 'items.jsonl'}:2: not JSON" in broken.stderr
    nothing = run_lemon("report", "--mix", str(root), "--benchmarks", "svamp,aqua",
                        "--policy", f"mine={tmp_path / 'none'}")  # fmt: skip
    assert nothing.returncode == 1
    assert "no <benchmark>/items.jsonl" in nothing.stderr


# MultiArith: one large agent right on every item, program of thought on none (as the real
# tables have it: 0.97 against 0.68), so over the two maths benchmarks the choice turns over
MULTIARITH: World = {
    "single-small": (10.0, lambda k: False, lambda k: False),
    "single-large": (100.0, lambda k: True, lambda k: True),
    "pot-large": (50.0, lambda k: False, lambda k: False),
}


def _copy(source: Path, target: Path) -> None:
    target.mkdir(parents=True)
    for part in source.iterdir():
        if part.is_file() and part.name != "summary.json":
            (target / part.name).write_bytes(part.read_bytes())


def test_the_report_kind_router_is_the_shipped_default_and_weighs_benchmarks_equally(
    root: Path, tmp_path: Path
) -> None:
    """One rule for "the best fixed team of a kind": ``fixed_teams.json`` (what `lemon run`,
    the gRPC service and a task-only LemonRun run) and the report's kind router choose alike,
    over every train table of the kind, and a budget prices the teams on the same tables."""
    from lemon.policy.estimates import measured_teams
    from lemon.policy.fixed import TABLES
    from lemon.tables.choice import choose_fixed_teams
    from lemon.tables.digest import write_summary

    repo = tmp_path / "repo"
    for name in ("svamp-train", "aqua-train"):
        _copy(root / name, repo / TABLES / name)
        write_summary(Table.open(repo / TABLES / name))
    alone = choose_fixed_teams(repo)
    assert (alone["math"]["team"], alone["multiple_choice"]["team"]) == ("pot-large", "quick-large")
    assert alone["math"]["source"] == f"{TABLES.as_posix()}/svamp-train/summary.json"

    both = tmp_path / "both"
    for split in ("train", "test"):
        for name in ("svamp", "aqua"):
            _copy(root / f"{name}-{split}", both / TABLES / f"{name}-{split}")
        _table(
            both / TABLES / f"multiarith-{split}", "multiarith", split, TaskKind.MATH, MULTIARITH
        )
    for name in ("svamp-train", "aqua-train", "multiarith-train"):
        write_summary(Table.open(both / TABLES / name))
    shipped = choose_fixed_teams(both)
    # svamp: pot-large 0.7 at 50, single-large 0.5 at 100; multiarith: 0.0 and 1.0. Each
    # benchmark weighs the same: single-large's 0.75 beats pot-large's 0.35
    assert shipped["math"]["team"] == "single-large"
    assert shipped["math"]["accuracy"] == 0.75
    assert shipped["math"]["benchmark"] == "multiarith+svamp"
    assert shipped["math"]["n"] == 2 * N
    assert shipped["multiple_choice"]["team"] == "quick-large"

    pairs = mixed.discover(str(both / TABLES), ["svamp", "aqua", "multiarith"])
    report = mixed.mixed_report([mixed.load_bench(Table.open(a), Table.open(b)) for a, b in pairs])
    for bench, kind in (("svamp", "math"), ("multiarith", "math"), ("aqua", "multiple_choice")):
        assert report[bench]["kind_router_team"] == shipped[kind]["team"], bench
    # and a budget prices the default's teams on the same two tables, as their means
    figures = {
        f.team: f for f in measured_teams(TaskKind.MATH, prices=DEFAULT_TIER_PRICES, root=both)
    }
    assert figures["single-large"].accuracy == pytest.approx(0.75)
    assert figures["pot-large"].cost == pytest.approx(50.0)
    assert figures["single-large"].benchmark == "multiarith+svamp"


def test_the_validation_report_reads_the_train_tables_parts(root: Path, tmp_path: Path) -> None:
    """``--validation``: each benchmark's fit part is the train side and its validation part
    (by template or sibling) the test side, both from the train table; the test table's
    outcomes are not read."""
    train, test = Table.open(root / "svamp-train"), Table.open(root / "svamp-test")
    bench = mixed.load_bench(train, test, validation=True)
    assert bench.train.items == train.part("fit")
    assert bench.test.items == train.part("validation")
    assert bench.test.table.path == train.path
    out = tmp_path / "val"
    done = run_lemon("report", "--mix", str(root), "--benchmarks", "svamp,aqua", "--validation",
                     "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["part"] == "validation"
    assert report["command"].endswith("--benchmarks svamp,aqua --validation")
    n = len(train.part("validation"))
    assert report["svamp"]["best_fixed"]["n"] == n
    assert (out / "report.md").read_text().startswith("**On the validation parts")
    alone = run_lemon("report", "--validation", str(root / "svamp-test"))
    assert alone.returncode == 2
    assert "--validation needs --mix DIR" in alone.stderr
