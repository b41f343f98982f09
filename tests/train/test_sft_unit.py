"""SFT pieces that need no model: row checking, config errors, checkpoints, the result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lemon.learning.training_config import TrainingConfig
from lemon_train.checkpoints import checkpoints_dir, latest_checkpoint, staging_dir
from lemon_train.distributed import DistributedError, current, init_from_env
from lemon_train.errors import TrainingError
from lemon_train.publishing import TERMINATION_LIMIT, data_sha256, termination_message
from lemon_train.sft import load_rows
from tests.train.conftest import run_train, sft_rows, train_env


def _write(path: Path, *lines: str) -> str:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_load_rows_keeps_prompt_and_completion(tmp_path: Path) -> None:
    rows = sft_rows(3)
    path = _write(tmp_path / "rows.jsonl", *(json.dumps(row) for row in rows), "")
    loaded = load_rows(path)
    assert len(loaded) == 3
    assert all(set(row) == {"prompt", "completion"} for row in loaded)
    assert loaded[1]["completion"] == rows[1]["completion"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"prompt": [{"role": "user", "content": "t"}]}', ":2: missing 'completion'"),
        ("{not json", ":2:2: not JSON"),
        ("[1, 2]", ":2: a row is an object, got list"),
        (
            '{"prompt": [{"role": "robot", "content": "t"}], "completion": '
            '[{"role": "assistant", "content": "x"}]}',
            ":2: prompt[0].role: 'robot' is not one of",
        ),
        (
            '{"prompt": [{"role": "user", "content": "t"}], "completion": '
            '[{"role": "user", "content": "x"}]}',
            ":2: completion: one assistant message expected",
        ),
        (
            '{"prompt": [{"role": "user", "content": "t"}], "completion": '
            '[{"role": "assistant", "content": "  "}]}',
            ":2: completion: empty",
        ),
        ('{"prompt": "t", "completion": [{"role": "assistant", "content": "x"}]}', ":2: prompt"),
    ],
)
def test_bad_rows_are_located(tmp_path: Path, line: str, message: str) -> None:
    good = json.dumps(sft_rows(1)[0])
    path = _write(tmp_path / "rows.jsonl", good, line)
    with pytest.raises(TrainingError) as caught:
        load_rows(path)
    assert f"{path}{message}" in str(caught.value)


def test_empty_missing_and_synthetic_data(tmp_path: Path) -> None:
    with pytest.raises(TrainingError, match="no rows"):
        load_rows(_write(tmp_path / "empty.jsonl", ""))
    with pytest.raises(TrainingError, match="cannot read"):
        load_rows(str(tmp_path / "absent.jsonl"))
    with pytest.raises(TrainingError, match="synthetic:4: SFT reads JSONL rows"):
        load_rows("synthetic:4")


def test_bad_config_exits_2_with_located_message(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(
        "stage: sft\ndata: rows.jsonl\noutput_dir: out\nhyperparameters:\n  learning_rate: -1\n"
        "  bogus: 3\n",
        encoding="utf-8",
    )
    result = run_train("sft", "--config", str(config))
    assert result.returncode == 2, result.stderr
    assert f"{config}: hyperparameters.learning_rate: Input should be greater than 0" in (
        result.stderr
    )
    assert f"{config}: hyperparameters.bogus: Extra inputs are not permitted" in result.stderr
    assert result.stdout == ""


def test_config_yaml_error_stage_mismatch_and_overrides(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("stage: sft\ndata: [unclosed\n", encoding="utf-8")
    result = run_train("sft", "--config", str(broken))
    assert result.returncode == 2
    assert f"{broken}:3:1: not YAML" in result.stderr

    grpo = tmp_path / "grpo.yaml"
    grpo.write_text("stage: grpo\ndata: synthetic:4\noutput_dir: out\n", encoding="utf-8")
    result = run_train("sft", "--config", str(grpo))
    assert result.returncode == 2
    assert "stage: the file says 'grpo', the command is `train sft`" in result.stderr

    result = run_train("grpo", "--config", str(grpo), "--max-steps", "0")
    assert result.returncode == 2
    assert "--max-steps: 0: must be at least 1" in result.stderr


def test_missing_data_file_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "sft.yaml"
    config.write_text(f"stage: sft\ndata: rows.jsonl\noutput_dir: {tmp_path}/out\n")
    missing = tmp_path / "nowhere.jsonl"
    result = run_train("sft", "--config", str(config), "--data", str(missing))
    assert result.returncode == 2, result.stderr
    assert f"data: {missing}: cannot read" in result.stderr
    assert not (tmp_path / "out").exists()


def _config(tmp_path: Path, **extra: object) -> TrainingConfig:
    return TrainingConfig.model_validate(
        {"stage": "sft", "data": "synthetic:2", "output_dir": str(tmp_path / "v1"), **extra}
    )


def test_output_locations_and_latest_checkpoint(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert staging_dir(config) == tmp_path / "v1.partial"
    assert checkpoints_dir(config) == tmp_path / "v1.checkpoints"
    assert latest_checkpoint(config) is None
    root = checkpoints_dir(config)
    for name in ("checkpoint-9", "checkpoint-10", ".staging/checkpoint-12", "checkpoint-x"):
        (root / name).mkdir(parents=True)
    assert latest_checkpoint(config) == root / "checkpoint-10"  # numeric, .staging ignored
    assert latest_checkpoint(_config(tmp_path, resume=False)) is None


def test_data_hash_and_termination_message(tmp_path: Path) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_bytes(b"abc")
    assert data_sha256(str(data)) == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )
    assert data_sha256("synthetic:3") != data_sha256("synthetic:4")
    small = {"policy": "/p", "stage": "sft", "metrics": {"loss": 1.5}}
    assert json.loads(termination_message(small)) == small
    big = {"policy": "/p", "stage": "sft", "metrics": {"loss": 1.5, "curve": list(range(2000))}}
    text = termination_message(big)
    assert len(text.encode()) <= TERMINATION_LIMIT
    assert json.loads(text)["metrics"] == {"loss": 1.5}  # the largest metric went first


def test_distributed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in train_env(WORLD_SIZE="1", RANK="0").items():
        monkeypatch.setenv(name, value)
    info = init_from_env()
    assert (info.rank, info.world_size, info.is_main, info.distributed) == (0, 1, True, False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "2")
    with pytest.raises(DistributedError, match=r"\$RANK=2 is not in \[0, \$WORLD_SIZE=2\)"):
        current()
    monkeypatch.setenv("RANK", "1")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with pytest.raises(DistributedError, match=r"\$MASTER_ADDR is unset"):
        init_from_env()
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(DistributedError, match=r"\$WORLD_SIZE='two': not an integer"):
        current()


def test_base_model_errors_are_located(tmp_path: Path) -> None:
    from lemon_train.loading import resolve_base

    with pytest.raises(TrainingError, match=r"base_model: \./nowhere: no such directory"):
        resolve_base("./nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TrainingError, match=r"without config\.json or policy\.json"):
        resolve_base(str(tmp_path / "empty"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(TrainingError, match="not a directory"):
        resolve_base(str(tmp_path / "file"))
    broken = tmp_path / "version"
    broken.mkdir()
    (broken / "policy.json").write_text('{"version": "1", "stage": "sft", "base_model": "x"}')
    with pytest.raises(TrainingError, match=r"base_model: .*no model\.safetensors"):
        resolve_base(str(broken))
    assert resolve_base("HuggingFaceTB/SmolLM2-135M-Instruct") == (
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        None,
    )
