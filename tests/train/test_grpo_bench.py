"""``lemon bench learning`` and ``lemon bench grpo-step`` run end to end (tiny settings)."""

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
    result = _bench("learning", "--json", "--quick")
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
