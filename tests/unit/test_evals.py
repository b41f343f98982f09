"""lemon eval / report on real benchmark data, with the scripted backend standing in for models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lemon.data import split_items
from lemon.evals import BASELINES, baseline_spec
from lemon.evals.report import load_summaries, markdown_table, pareto_front, plot
from lemon.spec import format_spec, parse_spec
from tests.conftest import run_lemon


@pytest.mark.parametrize("name", sorted(BASELINES))
@pytest.mark.parametrize(
    "task", ["What is 2 + 3?", "Pick one: (A) red (B) blue (C) green", "def f(x):\n    pass"]
)
def test_baseline_specs_are_valid(name: str, task: str) -> None:
    spec = baseline_spec(name, task)
    assert parse_spec(format_spec(spec)).spec.agents == spec.agents


def test_eval_writes_scores_and_resumes(tmp_path: Path) -> None:
    args = [
        "eval",
        "--benchmark",
        "multiarith",
        "--profile",
        "scripted",
        "--baseline",
        "chain",
        "--out",
        str(tmp_path),
        "--name",
        "r",
        "-q",
        "--json",
    ]
    first = run_lemon(*args, "--limit", "3")
    assert first.returncode == 0, first.stderr
    items = tmp_path / "r" / "items.jsonl"
    assert len(items.read_text().splitlines()) == 3
    second = run_lemon(*args, "--limit", "5")
    assert second.returncode == 0, second.stderr
    records = [json.loads(line) for line in items.read_text().splitlines()]
    first_three = [i.id for i in split_items("multiarith", split="test")[:3]]
    assert [r["id"] for r in records][:3] == first_three
    assert len(records) == 5  # the first three were not run again
    summary = json.loads(second.stdout)
    assert summary["n"] == 5
    assert summary["accuracy"] == 0.0  # the scripted double always says 42
    assert summary["mean_tokens"] > 0
    for record in records:
        assert record["extracted"] == 42.0
        assert parse_spec(record["spec"]).output == "checker"


def test_eval_refuses_to_resume_a_run_made_another_way(tmp_path: Path) -> None:
    """Resuming keeps the finished items: a run directory made with another method (or policy
    version, token budget, prices...) is refused by name, and nothing in it changes."""
    args = ["eval", "--benchmark", "multiarith", "--profile", "scripted", "--limit", "2"]
    out = ["--out", str(tmp_path), "--name", "r", "-q", "--json"]
    first = run_lemon(*args, "--baseline", "chain", *out)
    assert first.returncode == 0, first.stderr
    items = tmp_path / "r" / "items.jsonl"
    before = items.read_bytes(), (tmp_path / "r" / "summary.json").read_bytes()
    other = run_lemon(*args, "--baseline", "single", *out)
    assert other.returncode != 0
    assert "holds a run made with method = 'baseline:chain'" in other.stderr, other.stderr
    assert "'baseline:single'" in other.stderr
    budget = run_lemon(*args, "--baseline", "chain", "--max-tokens", "64", *out)
    assert budget.returncode != 0
    assert "max_tokens" in budget.stderr, budget.stderr
    assert (items.read_bytes(), (tmp_path / "r" / "summary.json").read_bytes()) == before
    more = run_lemon(*args[:-1], "4", "--baseline", "chain", *out)  # more items: allowed
    assert more.returncode == 0, more.stderr
    assert json.loads(more.stdout)["n"] == 4


def test_self_consistency_votes_over_samples(tmp_path: Path) -> None:
    result = run_lemon(
        "eval",
        "--benchmark",
        "aqua",
        "--limit",
        "2",
        "--profile",
        "scripted",
        "--baseline",
        "sc3",
        "--out",
        str(tmp_path),
        "-q",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    records = [
        json.loads(x) for x in (tmp_path / "aqua-sc3" / "items.jsonl").read_text().split("\n") if x
    ]
    assert all(len(r["samples"]) == 3 for r in records)
    assert all(r["calls"] == 3 for r in records)


def test_eval_usage_errors(tmp_path: Path) -> None:
    assert run_lemon("eval", "--benchmark", "nope", "--out", str(tmp_path)).returncode == 2
    assert run_lemon("eval", "--benchmark", "svamp", "--baseline", "nope").returncode == 2
    policy = run_lemon("eval", "--benchmark", "svamp", "--policy", "x")
    assert policy.returncode == 2
    assert "not a directory (a policy version is a directory)" in policy.stderr
    columns = run_lemon("eval", "--benchmark", "svamp", "--policy", "x", "--policy-columns", "a")
    assert columns.returncode == 2
    assert "--policy-columns needs --policy and --table" in columns.stderr
    table = "tables/svamp-test"
    unknown = run_lemon(
        *("eval", "--table", table, "--max-tokens", "300", "--policy", "packaged"),
        *("--policy-columns", "single-small,no-such-team", "--out", str(tmp_path)),
    )
    assert unknown.returncode == 2
    assert "--policy-columns: no-such-team not in the table's teams" in unknown.stderr


def test_report(tmp_path: Path) -> None:
    rows = [
        {
            "run": "a",
            "benchmark": "svamp",
            "method": "m1",
            "n": 10,
            "accuracy": 0.5,
            "ci95": [0.2, 0.8],
            "mean_tokens": 100.0,
        },
        {
            "run": "b",
            "benchmark": "svamp",
            "method": "m2",
            "n": 10,
            "accuracy": 0.4,
            "ci95": [0.1, 0.7],
            "mean_tokens": 200.0,
        },
        {
            "run": "c",
            "benchmark": "gsm8k",
            "method": "m3",
            "n": 10,
            "accuracy": 0.1,
            "ci95": [0.0, 0.4],
            "mean_tokens": 300.0,
        },
    ]
    assert pareto_front(rows) == [0, 2]  # b is beaten by a; c is alone on its benchmark
    paths = []
    for row in rows:
        path = tmp_path / f"{row['run']}.json"
        path.write_text(json.dumps(row))
        paths.append(path)
    loaded = load_summaries(paths)
    table = markdown_table(loaded)
    assert table.count("| yes |") == 2
    plot(loaded, tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_eval_reports_only_test_items_by_default(tmp_path: Path) -> None:
    from lemon.data.splits import split_items

    result = run_lemon(
        "eval",
        "--benchmark",
        "svamp",
        "--limit",
        "40",
        "--profile",
        "scripted",
        "--baseline",
        "single",
        "--out",
        str(tmp_path),
        "--name",
        "s",
        "-q",
    )
    assert result.returncode == 0, result.stderr
    ids = [
        json.loads(x)["id"] for x in (tmp_path / "s" / "items.jsonl").read_text().split("\n") if x
    ]
    test_ids = [item.id for item in split_items("svamp", split="test")]
    held_in = {item.id for item in split_items("svamp", split="train")}
    assert sorted(ids, key=test_ids.index) == test_ids[:40]
    assert not held_in & set(ids)
    assert held_in  # the held-in partition exists, and was skipped


def test_stratified_selection_interleaves_subjects() -> None:
    from lemon.data import Benchmark
    from lemon.data.splits import split_items
    from lemon.evals.selection import stratified

    items = split_items(Benchmark.MMLU)
    chosen = stratified(items)
    assert sorted(i.id for i in chosen) == sorted(i.id for i in items)  # a reordering
    subjects = [getattr(i, "subject", None) for i in items]
    distinct = list(dict.fromkeys(subjects))
    assert len(distinct) > 50
    first = chosen[: len(distinct)]
    assert [getattr(i, "subject", None) for i in first] == distinct  # one per subject
    for subject in distinct[:3]:  # file order within a subject
        mine = [i.id for i in chosen if getattr(i, "subject", None) == subject]
        assert mine == [i.id for i in items if getattr(i, "subject", None) == subject]
    gsm8k = split_items(Benchmark.GSM8K)
    assert stratified(gsm8k) == gsm8k  # no subjects: order unchanged


def test_eval_on_one_tier(tmp_path: Path) -> None:
    result = run_lemon(
        *("eval", "--benchmark", "mmlu", "--profile", "scripted", "--baseline", "chain"),
        *("--tier", "large", "--stratified", "--limit", "3", "--out", str(tmp_path)),
        *("--name", "t", "-q", "--json"),
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["tier"] == "large"
    assert summary["stratified"] is True
    assert summary["models"]["large"] == "scripted:scripted:large"
    lines = (tmp_path / "t" / "items.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    for record in records:
        spec = parse_spec(record["spec"]).spec
        assert len(spec.agents) == 3
        assert {a.capacity.value for a in spec.agents} == {"large"}
    assert len({r["id"].split(":")[0] for r in records}) == 1


def test_report_summarizes_a_run_still_in_progress(tmp_path: Path) -> None:
    result = run_lemon(
        *("eval", "--benchmark", "gsm8k", "--profile", "scripted", "--baseline", "single"),
        *("--tier", "small", "--limit", "4", "--out", str(tmp_path), "--name", "r", "-q"),
    )
    assert result.returncode == 0, result.stderr
    (tmp_path / "r" / "summary.json").unlink()  # as while the run is still going
    (summary,) = load_summaries([tmp_path / "r"])
    assert summary["partial"] is True
    assert (summary["n"], summary["benchmark"], summary["tier"]) == (4, "gsm8k", "small")
    assert "| r (partial) | gsm8k | baseline:single | 4 |" in markdown_table([summary])


def test_priced_cost_in_eval_and_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEMON_CALL_CACHE", str(tmp_path / "calls.sqlite"))
    args = ["eval", "--benchmark", "multiarith", "--profile", "scripted", "--baseline", "chain"]
    args += ["--out", str(tmp_path), "--limit", "2", "-q", "--json"]
    first = run_lemon(*args, "--name", "cold")
    assert first.returncode == 0, first.stderr
    cold = json.loads(first.stdout)
    # the chain is small -> medium -> large: priced = 0.272 * small + medium + 3.125 * large
    records = [json.loads(x) for x in (tmp_path / "cold" / "items.jsonl").read_text().splitlines()]
    assert all(r["priced_tokens"] > 0 for r in records)
    assert cold["mean_priced_tokens"] != cold["mean_tokens"]
    assert cold["tier_prices"]["medium"] == 1.0
    assert cold["cache_hits"] == 0
    warm = json.loads(run_lemon(*args, "--name", "warm").stdout)
    assert warm["cache_hits"] == cold["calls"]  # a second run answered from the call cache
    assert warm["calls"] == 0
    assert warm["mean_priced_tokens"] == cold["mean_priced_tokens"]
    report = run_lemon("report", str(tmp_path / "cold"), "--cost", "tokens")
    assert "mean tier-priced tokens" in report.stdout
    assert "Pareto (tokens)" in report.stdout
    rows = [
        {"run": "a", "benchmark": "b", "n": 1, "accuracy": 0.5, "ci95": [0, 1], "mean_tokens": 100,
         "mean_priced_tokens": 300},
        {"run": "c", "benchmark": "b", "n": 1, "accuracy": 0.5, "ci95": [0, 1], "mean_tokens": 200,
         "mean_priced_tokens": 100},
    ]  # fmt: skip
    assert pareto_front(rows, "tokens") == [0]
    assert pareto_front(rows, "priced") == [1]


def _write_run(path: Path, records: list[tuple[str, bool, float]]) -> Path:
    path.mkdir()
    lines = [
        json.dumps(
            {"id": i, "method": "baseline:single", "correct": ok, "tokens": 10, "priced_tokens": c,
             "calls": 1, "wall_s": 1.0, "status": "succeeded"}
        )
        for i, ok, c in records
    ]  # fmt: skip
    (path / "items.jsonl").write_text("\n".join(lines) + "\n")
    return path


def test_oracle_bound_and_policy_comparison(tmp_path: Path) -> None:
    """``--oracle`` takes, per shared item, the cheapest run that solved it (the cheapest run
    when none did): an upper bound shown in the table but kept off the Pareto front. The
    comparison line places each learned policy against the most accurate fixed team."""
    from lemon.evals.report import oracle_summary, policy_comparison

    cheap = _write_run(
        tmp_path / "cheap", [("x:0", True, 1.0), ("x:1", False, 1.0), ("x:2", False, 1.0)]
    )
    dear = _write_run(
        tmp_path / "dear", [("x:0", True, 9.0), ("x:1", True, 9.0), ("x:3", True, 9.0)]
    )
    bound = oracle_summary([cheap, dear])
    assert (bound["n"], bound["correct"], bound["benchmark"], bound["bound"]) == (2, 2, "x", True)
    assert bound["mean_priced_tokens"] == pytest.approx(5.0)  # x:0 from cheap, x:1 from dear
    with pytest.raises(ValueError, match="at least two runs"):
        oracle_summary([cheap])
    with pytest.raises(ValueError, match="not a run directory"):
        oracle_summary([cheap, tmp_path / "missing"])
    runs = load_summaries([cheap, dear])
    policy = {
        **runs[0],
        "run": "pol",
        "method": "policy:p",
        "accuracy": 0.9,
        "mean_priced_tokens": 4.0,
    }
    summaries = [*runs, policy, bound]
    # the bound (1.0 at 5) would beat dear (1.0 at 9), but bounds neither join nor shape the front
    assert pareto_front(summaries) == [0, 1, 2]
    (line,) = policy_comparison(summaries)
    assert "pol (x): 0.900 vs the most accurate fixed team dear 1.000 (-10.0 points)" in line
    assert "at 0.44x its priced cost; on the fixed teams' front" in line
    worse = {**policy, "accuracy": 0.2, "mean_priced_tokens": 2.0}
    assert "dominated by cheap" in policy_comparison([*runs, worse])[0]
    result = run_lemon("report", str(cheap), str(dear), "--oracle", f"{cheap},{dear}")
    assert result.returncode == 0, result.stderr
    assert "| oracle(cheap + dear) (bound) | x |" in result.stdout
    bad = run_lemon("report", str(cheap), "--oracle", str(cheap))
    assert bad.returncode == 1  # EXIT_INVALID
    assert "an oracle needs at least two runs" in bad.stderr


def test_eval_on_a_train_tables_validation_part(tmp_path: Path) -> None:
    """``--part validation`` evaluates on the items choices are made on (by template, as the
    teacher's rows and GRPO's held-out reward take them), answered from the table: a column's
    spec scores exactly the table's cells on those items and on no others."""
    from lemon.policy.columns import column
    from lemon.tables.store import Table, TableError
    from lemon.tasks import TaskKind

    table = Table.open("tables/multiarith-train")
    held = table.part("validation")
    fit = table.part("fit")
    assert held
    assert fit
    assert not set(held) & set(fit)
    assert sorted(held + fit) == sorted(table.items)
    spec = tmp_path / "single-medium.yaml"
    spec.write_text(format_spec(column("single-medium").spec(TaskKind.MATH)))
    done = run_lemon(
        *("eval", "--table", str(table.path), "--part", "validation", "--spec", str(spec)),
        *("--out", str(tmp_path / "out"), "--name", "held", "-q"),
    )
    assert done.returncode == 0, done.stderr
    out = (tmp_path / "out/held/items.jsonl").read_text()
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["id"] for r in records] == held
    expected = {i: table.cell(i, "single-medium").success for i in held}  # type: ignore[union-attr]
    assert {r["id"]: float(r["correct"]) for r in records} == expected
    assert all(r["calls"] == 0 for r in records)  # answered from the table, no model
    with pytest.raises(TableError, match="needs a train table"):
        Table.open("tables/multiarith-test").part("fit")
    test_part = run_lemon("eval", "--table", "tables/multiarith-test", "--part", "fit",
                          "--spec", str(spec), "--out", str(tmp_path / "x"))  # fmt: skip
    assert test_part.returncode == 2
    assert "--part: part fit needs a train table" in test_part.stderr
    no_table = run_lemon("eval", "--benchmark", "svamp", "--part", "fit")
    assert no_table.returncode == 2
    assert "--part needs --table" in no_table.stderr
