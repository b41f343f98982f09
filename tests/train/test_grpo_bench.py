"""``lemon bench learning``, ``learning-v1``, ``grpo-step`` and ``grpo-sampling`` run end to end
(tiny settings)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import LEMON, ROOT
from tests.train.conftest import train_env

pytestmark = pytest.mark.model


def _bench(*args: str) -> dict[str, object]:
    done = subprocess.run(
        [str(LEMON), "bench", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=train_env(OMP_NUM_THREADS="1"),
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, done.stdout[-2000:]  # one JSON object, trainer logs on stderr
    result: dict[str, object] = json.loads(lines[0])
    return result


def test_learning_bench_quick() -> None:
    result = _bench("learning", "--json", "--quick", "--workers", "1")
    assert result["benchmark"] == "learning"
    assert result["seeds"] == 2
    for key in ("ratio", "cost_ratio", "paper_kinds_ratio", "task_blind_share"):
        assert isinstance(result[key], float), key
    assert result["task_blind_share"] <= 0.7  # type: ignore[operator]
    low, high = result["ratio_ci95"]  # type: ignore[misc]
    assert low <= high
    calibrations = result["calibration"]  # one per seed, each on its own warm start
    assert len(calibrations) == 2  # type: ignore[arg-type]
    for calibration in calibrations:  # type: ignore[attr-defined]
        assert calibration["group_size_cost_matched"] >= calibration["group_size"]
    runs = result["per_seed"]
    assert {(r["seed"], r["arm"]) for r in runs} == {  # type: ignore[union-attr]
        (s, a) for s in (0, 1) for a in ("global", "paper", "two_way", "global_cost")
    }
    first: dict[
        object, object
    ] = {}  # each seed's own warm start: every arm of a seed starts from it
    for run in runs:  # type: ignore[union-attr]
        assert len(run["curve"]) == 3  # the warm start, then every 2 of 4 steps
        assert run["curve"][0] == first.setdefault(run["seed"], run["curve"][0])
        assert run["worker_calls"][0] == 0 < run["worker_calls"][-1]
        if run["arm"] in ("paper", "two_way"):
            assert run["mutants_per_step"] > 0
        else:
            assert run["span_share"] == 0.0


def test_learning_v1_bench_quick() -> None:
    result = _bench("learning-v1", "--json", "--quick")
    assert result["benchmark"] == "learning"
    assert result["seeds"] == 1
    assert isinstance(result["ratio"], float)
    assert result["ratio"] > 0
    assert 0.0 <= result["sft_invalid_rate"] <= 1.0  # type: ignore[operator]
    (seed,) = result["per_seed"]  # type: ignore[misc]
    for arm in ("global", "counterfactual"):
        assert len(seed[arm]["curve"]) == 2  # one optimum ratio per GRPO step
        assert seed[arm]["steps_to_90"] >= 1


def test_grpo_step_bench() -> None:
    result = _bench("grpo-step", "--json", "--repeats", "3", "--batch", "8", "--length", "16")
    assert result["benchmark"] == "grpo-step"
    assert isinstance(result["ratio"], float)
    assert result["ratio"] > 0
    assert result["plain_step_s"] > 0  # type: ignore[operator]


def test_grpo_sampling_bench_on_the_shipped_policy() -> None:
    """The step-time benchmark on the real shipped policy and the SVAMP table (tiny sizes):
    both sampling paths write the same greedy tokens, and each measured pair is reported."""
    result = _bench(
        "grpo-sampling", "--json", "--tasks", "2", "--group", "2", "--max-tokens", "16",
        "--repeats", "2", "--steps", "1",
    )  # fmt: skip
    assert result["benchmark"] == "grpo-sampling"
    assert result["greedy_equal"] is True
    for part, pairs in (("sampling", 2), ("scoring", 2), ("step", 1)):
        found = result[part]
        assert isinstance(found, dict), part
        assert found["pairs"] == pairs, found
        assert len(found["speedups"]) == pairs, found
        assert all(s > 0 for s in found["speedups"]), found
        low, high = found["speedup_ci95"]
        assert low <= found["speedup"] <= high, found
    assert len(result["prompt_tokens"]) == 2  # type: ignore[arg-type]
