"""Training fixtures: a tiny random Llama with the real SmolLM2 tokenizer (trains in seconds on
CPU), SFT rows in the policy's real prompt format, and a config writer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import LEMON, ROOT

EXAMPLE_SPECS = sorted((ROOT / "examples" / "specs").glob("*.yaml"))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from lemon_testing.tiny_models import tiny_test_model

    return tiny_test_model(tmp_path_factory.mktemp("models") / "tiny-llama")


def sft_rows(count: int) -> list[dict[str, Any]]:
    """Rows as ``lemon teacher`` writes them: the policy prompt, the canonical spec YAML."""
    from lemon.policy.prompt import policy_messages, spec_completion
    from lemon.spec.validation import parse_spec

    parsed = [parse_spec(path.read_text(), source=str(path)) for path in EXAMPLE_SPECS]
    rows = []
    for index in range(count):
        spec = parsed[index % len(parsed)]
        rows.append(
            {
                "prompt": policy_messages(f"Task {index}: what is {index} + {index * 7}?"),
                "completion": [
                    {"role": "assistant", "content": spec_completion(spec.spec, spec.output)}
                ],
                "provenance": {"example": EXAMPLE_SPECS[index % len(parsed)].name},
            }
        )
    return rows


@pytest.fixture(scope="session")
def sft_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "sft.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in sft_rows(16)), encoding="utf-8")
    return path


WriteConfig = Callable[..., Path]


@pytest.fixture
def write_config(tmp_path: Path, tiny_model: Path, sft_data: Path) -> WriteConfig:
    """Write a small SFT config (tiny model, 16 rows) with ``overrides`` merged in."""

    def write(name: str = "train.yaml", **overrides: Any) -> Path:
        hyper = {
            "max_steps": 3,
            "per_device_batch_size": 2,
            "save_steps": 2,
            "learning_rate": 1e-3,
            "max_length": 1024,
            **overrides.pop("hyperparameters", {}),
        }
        config = {
            "stage": "sft",
            "base_model": str(tiny_model),
            "data": str(sft_data),
            "output_dir": str(tmp_path / "policy" / "v1"),
            "termination_log": str(tmp_path / "termination-log"),
            "hyperparameters": hyper,
            **overrides,
        }
        path = tmp_path / name
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        return path

    return write


def train_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "TOKENIZERS_PARALLELISM": "false"}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    env.update(extra)
    return env


def run_train(
    *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``lemon train ...`` as a real subprocess."""
    return subprocess.run(
        [str(LEMON), "train", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env or train_env(),
        timeout=timeout,
        check=False,
    )


def start_train(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "lemon_train", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env=env or train_env(),
    )
