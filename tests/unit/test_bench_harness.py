"""The shared harness of ``lemon bench`` (``benchmarks/harness.py``): its arguments, output and
record, its side-by-side helpers against values computed by hand, and every harness on it."""

from __future__ import annotations

import ast
import datetime as dt
import json
import os
from pathlib import Path

import pytest

import harness
from lemon.scoring.stats import paired_bootstrap
from tests.conftest import ROOT

HARNESSES = sorted((ROOT / "benchmarks").glob("bench_*.py"))


def test_alternating_swaps_the_sides_every_other_round() -> None:
    assert [harness.alternating(i, "a", "b") for i in range(3)] == [
        ("a", "b"),
        ("b", "a"),
        ("a", "b"),
    ]


def test_ratio_rounds_the_quotient() -> None:
    assert harness.ratio(2.0, 3.0) == 0.6667
    assert harness.ratio(2.0, 3.0, digits=2) == 0.67


def test_percentile_is_the_nearest_ranked_value() -> None:
    values = [5.0, 1.0, 4.0, 2.0, 3.0]  # sorted: 1 2 3 4 5, n - 1 = 4
    assert harness.percentile(values, 0.5) == 3.0  # index round(2.0)
    assert harness.percentile(values, 0.99) == 5.0  # index round(3.96) = 4
    assert harness.percentile(values, 0.3) == 2.0  # index round(1.2) = 1
    assert harness.percentile([7.0], 0.99) == 7.0


def test_interval_is_the_rounded_paired_bootstrap() -> None:
    a, b = [1.0, 2.0, 4.0, 8.0], [1.5, 1.0, 3.0, 9.0]

    def mean_difference(x: object, y: object) -> float:
        return float((x - y).mean())  # type: ignore[operator]

    lo, hi = paired_bootstrap(mean_difference, a, b, rounds=500, seed=3)
    expected = [round(lo, 4), round(hi, 4)]
    assert harness.interval(mean_difference, a, b, rounds=500, seed=3) == expected
    assert expected[0] < expected[1]
    assert harness.interval(lambda x: float(x.mean()), [2.0, 2.0, 2.0]) == [2.0, 2.0]


def test_record_path_is_the_file_or_a_timestamped_name_in_the_folder(tmp_path: Path) -> None:
    at = dt.datetime(2025, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
    assert harness.record_path(tmp_path / "x.json", name="spec", at=at) == tmp_path / "x.json"
    assert harness.record_path(tmp_path, name="spec", at=at) == (
        tmp_path / "spec-20250304T050607Z.json"
    )


def _demo(**options: object) -> harness.Harness:
    bench = harness.Harness("demo", "A demo harness.\n\nMore text.", rounds=2, **options)  # type: ignore[arg-type]
    bench.parser.add_argument("--size", type=int, default=1)
    return bench


def test_json_prints_one_object_and_the_record_carries_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in [k for k in os.environ if k.startswith("LEMON_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("LEMON_DEMO", "a b")
    bench = _demo()
    argv = ["--rounds", "3", "--record", str(tmp_path / "runs"), "--json", "--size", "4"]
    args = bench.parse(argv)
    assert (args.rounds, args.size, args.json) == (3, 4, True)
    result = {"benchmark": "demo", "ratio": 0.5}
    assert bench.finish(args, result, code=1) == 1
    out = capsys.readouterr()
    assert out.out.splitlines() == [json.dumps(result)]
    (path,) = (tmp_path / "runs").glob("demo-*.json")
    assert str(path) in out.err
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["command"] == "LEMON_DEMO='a b' lemon bench demo --json --rounds 3 --size 4"
    assert record["result"] == result
    assert record["exit_code"] == 1
    assert len(record["loadavg_before"]) == len(record["loadavg_after"]) == 3
    assert record["commit"]
    assert record["cpus"]
    assert record["wall_s"] >= 0
    assert set(record) == {
        "command",
        "recorded_at",
        "commit",
        "cpus",
        "loadavg_before",
        "loadavg_after",
        "wall_s",
        "exit_code",
        "result",
    }


def test_without_json_the_summary_is_printed_and_out_gets_the_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = _demo(out=True)
    args = bench.parse(["--out", str(tmp_path / "o" / "r.json")])
    assert args.rounds == 2
    assert args.record is None
    result = {"benchmark": "demo", "ratio": 0.5}
    assert bench.finish(args, result) == 0
    assert capsys.readouterr().out == "benchmark: demo\nratio: 0.5\n"
    assert json.loads((tmp_path / "o" / "r.json").read_text(encoding="utf-8")) == result
    bench.finish(args, result, text=lambda r: f"ratio {r['ratio']}")
    assert capsys.readouterr().out == "ratio 0.5\n"


def test_help_names_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        _demo().parse(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: lemon bench demo ")
    assert "A demo harness." in text
    assert "More text." not in text
    assert "--record PATH" in text
    assert "--rounds" in text
    assert "--repeats" not in text


@pytest.mark.parametrize("path", HARNESSES, ids=lambda path: path.stem)
def test_every_harness_is_on_the_shared_harness(path: Path) -> None:
    """Each ``bench_*.py`` builds its command line with :class:`harness.Harness` and leaves its
    output to it: no parser of its own, and ``main`` prints nothing to stdout itself."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    calls = [ast.unparse(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)]
    assert "harness.Harness" in calls
    assert "argparse.ArgumentParser" not in calls
    (main,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"]
    in_main = [n for n in ast.walk(main) if isinstance(n, ast.Call)]
    assert "bench.finish" in [ast.unparse(n.func) for n in in_main]
    assert "json.dumps" not in [ast.unparse(n.func) for n in in_main]
    to_stdout = [
        ast.unparse(n)
        for n in in_main
        if ast.unparse(n.func) == "print" and not any(k.arg == "file" for k in n.keywords)
    ]
    assert to_stdout == []
