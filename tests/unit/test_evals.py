"""lemon eval / report on real benchmark data, with the scripted backend standing in for models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
    assert [r["id"] for r in records][:3] == ["multiarith:0", "multiarith:1", "multiarith:2"]
    assert len(records) == 5  # the first three were not run again
    summary = json.loads(second.stdout)
    assert summary["n"] == 5
    assert summary["accuracy"] == 0.0  # the scripted double always says 42
    assert summary["mean_tokens"] > 0
    for record in records:
        assert record["extracted"] == 42.0
        assert parse_spec(record["spec"]).output == "checker"


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


def test_priced_cost_in_eval_and_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEMON_CALL_CACHE", str(tmp_path / "calls.sqlite"))
    args = ["eval", "--benchmark", "multiarith", "--profile", "scripted", "--baseline", "chain"]
    args += ["--out", str(tmp_path), "--limit", "2", "-q", "--json"]
    first = run_lemon(*args, "--name", "cold")
    assert first.returncode == 0, first.stderr
    cold = json.loads(first.stdout)
    # the chain is small -> medium -> large: priced = 0.273 * small + medium + 3.117 * large
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
