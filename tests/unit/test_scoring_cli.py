"""``lemon score`` and ``lemon data`` as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lemon.data import load_items
from lemon.scoring import wilson_interval


def _write(path: Path, lines: list[object]) -> Path:
    path.write_text(
        "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n"
    )
    return path


def test_score_json_keeps_order_and_repeats(lemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = _write(
        tmp_path / "p.jsonl",
        [
            {"id": "gsm8k:1", "output": "#### 3"},
            {"id": "gsm8k:0", "output": "She makes $18 a day. The answer is 18."},
            {"id": "gsm8k:0", "output": "I think 17"},
            {"id": "gsm8k:1", "output": "no idea"},
        ],
    )
    result = lemon("score", "--benchmark", "gsm8k", "--predictions", str(path), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report) == {"benchmark", "n", "correct", "accuracy", "ci95", "items"}
    assert (report["benchmark"], report["n"], report["correct"]) == ("gsm8k", 4, 2)
    assert report["accuracy"] == 0.5
    assert report["ci95"] == pytest.approx(list(wilson_interval(2, 4)))
    assert report["items"] == [
        {"id": "gsm8k:1", "correct": True, "extracted": 3.0},
        {"id": "gsm8k:0", "correct": True, "extracted": 18.0},
        {"id": "gsm8k:0", "correct": False, "extracted": 17.0},
        {"id": "gsm8k:1", "correct": False, "extracted": None},
    ]


@pytest.mark.parametrize("benchmark", ["svamp", "multiarith", "aqua", "mmlu"])
def test_gold_answers_score_perfectly(lemon, tmp_path: Path, benchmark: str) -> None:  # type: ignore[no-untyped-def]
    items = load_items(benchmark)[:40]
    path = _write(
        tmp_path / "p.jsonl",
        [
            {"id": i.id, "output": f"The answer is {getattr(i, 'answer_text', i.answer)}."}
            for i in items
        ],
    )
    result = lemon("score", "--benchmark", benchmark, "--predictions", str(path), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["n"], report["correct"]) == (40, 40)


def test_humaneval_via_cli(lemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    item = load_items("humaneval")[0]
    path = _write(
        tmp_path / "p.jsonl",
        [
            {"id": item.id, "output": item.canonical_solution},  # type: ignore[union-attr]
            {"id": item.id, "output": "    return False\n"},
        ],
    )
    result = lemon("score", "--benchmark", "humaneval", "--predictions", str(path), "--json")
    assert result.returncode == 0, result.stderr
    assert [i["correct"] for i in json.loads(result.stdout)["items"]] == [True, False]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            [{"id": "gsm8k:0", "output": "1"}, '{"id": "gsm8k:1", "output": '],
            ":2: malformed JSON: Expecting value",
        ),
        (
            [{"id": "gsm8k:0", "output": "1"}, {"id": "gsm8k:999999", "output": "1"}],
            ":2: unknown gsm8k id 'gsm8k:999999'",
        ),
        (["", {"id": "gsm8k:0"}], ":2: missing field 'output'"),
        ([{"id": "gsm8k:0", "output": 5}], ":1: field 'output' should be a string, got int"),
        (["[1, 2]"], ":1: expected a JSON object"),
        ([{"id": "svamp:chal-1", "output": "1"}], ":1: unknown gsm8k id 'svamp:chal-1'"),
    ],
)
def test_bad_prediction_files_are_located(lemon, tmp_path: Path, lines, message) -> None:  # type: ignore[no-untyped-def]
    path = _write(tmp_path / "bad.jsonl", lines)
    result = lemon("score", "--benchmark", "gsm8k", "--predictions", str(path), "--json")
    assert result.returncode == 1
    assert result.stderr.strip() == f"{path}{message}"
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_usage_errors(lemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = _write(tmp_path / "p.jsonl", [{"id": "gsm8k:0", "output": "1"}])
    result = lemon("score", "--benchmark", "nope", "--predictions", str(path))
    assert result.returncode == 2
    assert "invalid choice: 'nope'" in result.stderr
    result = lemon("score", "--benchmark", "gsm8k", "--predictions", str(tmp_path / "none"))
    assert result.returncode == 2
    assert result.stderr.startswith(f"lemon: {tmp_path / 'none'}: cannot read")
    result = lemon(
        "score",
        "--benchmark",
        "gsm8k",
        "--predictions",
        str(path),
        "--data-dir",
        str(tmp_path / "nodata"),
    )
    assert result.returncode == 2
    assert "data directory does not exist" in result.stderr
    assert "Traceback" not in result.stderr


def test_data_lists_what_is_present(lemon) -> None:  # type: ignore[no-untyped-def]
    result = lemon("data", "--json", "--splits")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    counts = {(f["benchmark"], f["source"]): f["items"] for f in payload["files"]}
    assert counts[("gsm8k", "test")] == 1319
    assert counts[("mmlu", "test")] == 14042
    assert payload["splits"]["svamp"]["all"] == 1000


def test_data_says_where_missing_files_go(lemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = lemon("data", "--data-dir", str(tmp_path))
    assert result.returncode == 0
    assert f"{tmp_path}/gsm8k/test.jsonl" in result.stdout
    assert "does not download" in result.stderr
    assert "github.com/openai/grade-school-math" in result.stderr


def test_data_uses_the_shipped_copy_without_a_variable() -> None:
    env = {k: v for k, v in os.environ.items() if k != "LEMON_DATA_DIR"}
    lemon = str(Path(sys.executable).with_name("lemon"))
    result = subprocess.run(
        [lemon, "data", "--json"], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["origin"] == "packaged"
    assert "(the copy shipped with lemon)" in result.stderr
    assert all(entry["present"] and entry["items"] for entry in payload["files"])
    verified = subprocess.run(
        [lemon, "data", "--verify"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert verified.returncode == 0, verified.stdout
    assert "all files match" in verified.stderr


def test_data_names_a_missing_override() -> None:
    env = {**os.environ, "LEMON_DATA_DIR": "/nonexistent/lemon-data"}
    result = subprocess.run(
        [str(Path(sys.executable).with_name("lemon")), "data"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert "/nonexistent/lemon-data: data directory does not exist" in result.stderr
    assert "unset it to use the shipped copy" in result.stderr
