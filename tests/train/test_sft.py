"""SFT on a tiny real model: completion-only loss, a real `lemon train sft` subprocess, resume
after a kill, LoRA, and the published version loading back."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, require_extra
from tests.train.conftest import WriteConfig, run_train, start_train, train_env

pytestmark = pytest.mark.model

require_extra("train", "torch", "trl", "peft", "datasets")

import torch  # noqa: E402

from lemon.learning.training_config import load_config  # noqa: E402
from lemon.policy.version import read_policy  # noqa: E402
from lemon_train.errors import TrainingError  # noqa: E402
from lemon_train.loading import load_model_and_tokenizer  # noqa: E402
from lemon_train.sft import build_trainer, run  # noqa: E402

COMPLETE = ("model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json")


def _metrics(version: Path) -> list[dict[str, object]]:
    lines = (version / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_loss_is_on_completion_tokens_only(write_config: WriteConfig, tmp_path: Path) -> None:
    config = load_config(write_config())
    trainer, _, tokenizer = build_trainer(config, metrics_path=tmp_path / "m.jsonl")
    dataset = trainer.train_dataset
    assert dataset is not None
    for example in dataset:
        ids, labels = example["input_ids"], example["labels"]
        start = next(i for i, label in enumerate(labels) if label != -100)
        assert all(label == -100 for label in labels[:start])
        assert labels[start:] == ids[start:]
        # the prompt ends with the assistant header; the loss covers the YAML and the stop token
        assert tokenizer.decode(ids[:start]).endswith("<|im_start|>assistant\n")
        completion = example["completion"][0]["content"]
        assert tokenizer.decode(ids[start:]) == completion + "<|im_end|>\n"

    batch = trainer.data_collator([dataset[0], dataset[1]])
    model = trainer.model
    model.eval()
    with torch.no_grad():
        loss = trainer.compute_loss(model, dict(batch))
        logits = model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
        ).logits.float()
    shifted, targets = logits[:, :-1], batch["labels"][:, 1:]
    completion_only = torch.nn.functional.cross_entropy(
        shifted.reshape(-1, shifted.size(-1)), targets.reshape(-1), ignore_index=-100
    )
    every_token = batch["input_ids"][:, 1:].masked_fill(batch["attention_mask"][:, 1:] == 0, -100)
    whole_sequence = torch.nn.functional.cross_entropy(
        shifted.reshape(-1, shifted.size(-1)), every_token.reshape(-1), ignore_index=-100
    )
    # a tiny random model predicts nearly uniformly, so the two means lie close together (about
    # 4e-5 apart here): the trainer's loss must be far closer to the completion-only mean
    off_completion = abs(loss.item() - completion_only.item())
    off_whole = abs(loss.item() - whole_sequence.item())
    assert off_completion < off_whole / 10


def test_lemon_train_sft_publishes_a_version(
    write_config: WriteConfig, tmp_path: Path, tiny_model: Path
) -> None:
    config_path = write_config()
    (tmp_path / "termination-log").write_text("")
    out = tmp_path / "elsewhere" / "v2"
    result = run_train(
        "sft",
        "--config",
        str(config_path),
        "--output-dir",
        str(out),
        "--max-steps",
        "3",
        env=train_env(WORLD_SIZE="1", RANK="0", LOCAL_RANK="0"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == str(out)
    meta = read_policy(out)
    assert (meta.stage, meta.adapter, meta.base_model) == ("sft", False, str(tiny_model))
    assert meta.data_sha256 is not None
    assert len(meta.data_sha256) == 64
    assert meta.metrics["steps"] == 3
    rows = _metrics(out)
    losses = [row for row in rows if "loss" in row]
    assert [row["step"] for row in losses] == [1, 2, 3]
    assert all(row["num_tokens"] > 0 and row["learning_rate"] > 0 for row in losses)
    result_json = json.loads((out / "result.json").read_text())
    assert result_json["policy"] == str(out)
    assert result_json["stage"] == "sft"
    assert json.loads((tmp_path / "termination-log").read_text()) == result_json
    assert not out.with_name("v2.partial").exists()
    assert sorted(p.name for p in out.with_name("v2.checkpoints").glob("checkpoint-*")) == [
        "checkpoint-2",
        "checkpoint-3",
    ]

    trained, _ = load_model_and_tokenizer(str(out))
    base, _ = load_model_and_tokenizer(str(tiny_model))
    changed = [
        name
        for (name, a), (_, b) in zip(
            trained.state_dict().items(), base.state_dict().items(), strict=True
        )
        if not torch.equal(a, b)
    ]
    assert changed  # the published weights are the trained ones


def test_resume_after_kill(write_config: WriteConfig, tmp_path: Path) -> None:
    config_path = write_config(hyperparameters={"max_steps": 6, "save_steps": 1})
    out = tmp_path / "policy" / "v1"
    checkpoints = out.with_name("v1.checkpoints")
    process = start_train("sft", "--config", str(config_path))
    seen: set[str] = set()
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and process.poll() is None:
            for folder in checkpoints.glob("checkpoint-*"):
                # every checkpoint that is visible at all is complete (they appear by rename)
                if folder.name not in seen:
                    assert all((folder / name).is_file() for name in COMPLETE), folder
                    seen.add(folder.name)
            if "checkpoint-2" in seen:
                break
            time.sleep(0.05)
        assert process.poll() is None, process.communicate()[0][-3000:]
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        process.communicate()
    assert "checkpoint-2" in seen
    assert not out.exists()

    result = run_train("sft", "--config", str(config_path))
    assert result.returncode == 0, result.stderr[-3000:]
    meta = read_policy(out)
    resumed = meta.metrics["resumed_from_step"]
    assert isinstance(resumed, int)
    assert resumed >= 2
    assert meta.metrics["steps"] == 6
    steps = [row["step"] for row in _metrics(out) if "loss" in row]
    assert steps == [1, 2, 3, 4, 5, 6]  # nothing logged twice, nothing missing
    state = json.loads((checkpoints / "checkpoint-6" / "trainer_state.json").read_text())
    assert state["global_step"] == 6


def test_lora_adapter_version(write_config: WriteConfig, tmp_path: Path, tiny_model: Path) -> None:
    lora = {"r": 4, "alpha": 8, "merge": False, "target_modules": ["q_proj", "v_proj"]}
    config = load_config(write_config(lora=lora, hyperparameters={"max_steps": 2, "save_steps": 5}))
    version = run(config)
    meta = read_policy(version)
    assert meta.adapter
    assert (version / "adapter_config.json").is_file()
    assert not (version / "model.safetensors").exists()
    adapter_config = json.loads((version / "adapter_config.json").read_text())
    assert adapter_config["r"] == 4
    assert sorted(adapter_config["target_modules"]) == ["q_proj", "v_proj"]

    merged, tokenizer = load_model_and_tokenizer(str(version))
    base, _ = load_model_and_tokenizer(str(tiny_model))
    assert type(merged).__name__ == "LlamaForCausalLM"
    weights, original = merged.state_dict(), base.state_dict()
    differ = {name for name in weights if not torch.equal(weights[name], original[name])}
    assert differ
    assert all("q_proj" in name or "v_proj" in name for name in differ)
    assert tokenizer.chat_template


def test_lora_top_layers_over_an_adapter_version(write_config: WriteConfig, tmp_path: Path) -> None:
    """A warm start that is itself an adapter version (no config.json of its own) takes a new
    adapter on its top layers: the layers are counted on the loaded model."""
    lora = {"r": 4, "alpha": 8, "merge": False, "target_modules": ["q_proj", "v_proj"]}
    warm = run(load_config(write_config(lora=lora, hyperparameters={"max_steps": 1})))
    assert not (warm / "config.json").exists()
    second = write_config(
        "second.yaml",
        base_model=str(warm),
        output_dir=str(tmp_path / "policy" / "v2"),
        lora={**lora, "top_layers": 1},
        hyperparameters={"max_steps": 1},
    )
    version = run(load_config(second))
    adapter_config = json.loads((version / "adapter_config.json").read_text())
    layers = json.loads((warm / "adapter_config.json").read_text())
    assert layers["layers_to_transform"] is None
    assert adapter_config["layers_to_transform"] == [1]  # the tiny model's 2 layers: the top one
    assert read_policy(version).parent is not None


def test_sft_on_a_pinned_gguf_base_and_serving_it(
    write_config: WriteConfig, tmp_path: Path
) -> None:
    """``base_model: gguf:qwen2.5-coder-0.5b-instruct`` (the medium tier's fetched GGUF,
    dequantized once to a cached directory) trains a LoRA adapter, and the in-process backend
    serves the version on that same base."""
    import asyncio

    from lemon.backends.base import Decoding, GenerationRequest, Message
    from lemon.backends.fetching import fetch
    from lemon.backends.ggufs import GGUF_MODELS
    from lemon.backends.local import LocalBackend, ModelSource

    fetch(GGUF_MODELS["qwen2.5-coder-0.5b-instruct"])
    config = write_config(
        base_model="gguf:qwen2.5-coder-0.5b-instruct",
        lora={"r": 4, "alpha": 8, "merge": False, "top_layers": 1},
        hyperparameters={"max_steps": 1, "per_device_batch_size": 1},
    )
    version = run(load_config(config))
    meta = read_policy(version)
    assert meta.adapter
    assert meta.base_model == "gguf:qwen2.5-coder-0.5b-instruct"
    layers = json.loads((version / "adapter_config.json").read_text())["layers_to_transform"]
    assert layers == [23]  # Qwen2.5-0.5B has 24 layers: the top one
    backend = LocalBackend(ModelSource(str(version), "float32", "cpu"), tier="policy")
    request = GenerationRequest((Message("user", "Say hi."),), Decoding(max_tokens=3))
    try:
        out = asyncio.run(backend.generate(request))
    finally:
        asyncio.run(backend.aclose())
    assert out.completion_tokens >= 1


def test_an_unknown_gguf_base_is_a_located_error(write_config: WriteConfig) -> None:
    config = load_config(write_config(base_model="gguf:no-such-model"))
    with pytest.raises(TrainingError, match=r"base_model: 'no-such-model': not a pinned GGUF"):
        run(config)


def test_two_stacked_adapters_compose_into_one(
    write_config: WriteConfig, tmp_path: Path, tiny_model: Path
) -> None:
    """An adapter trained on top of an adapter version (GRPO from an SFT warm start) is summed
    into one adapter of rank r1 + r2 over the first one's base: the same merged weights, and a
    version that loads without the first."""
    from lemon_train.compose import ComposeError, compose

    lower = run(
        load_config(
            write_config(
                lora={"r": 4, "alpha": 8, "merge": False, "target_modules": ["q_proj", "v_proj"]},
                hyperparameters={"max_steps": 2},
            )
        )
    )
    upper = run(
        load_config(
            write_config(
                "upper.yaml",
                base_model=str(lower),
                output_dir=str(tmp_path / "policy" / "v2"),
                lora={"r": 2, "alpha": 8, "merge": False, "target_modules": ["q_proj", "o_proj"]},
                hyperparameters={"max_steps": 2, "learning_rate": 1e-2},
            )
        )
    )
    stacked, _ = load_model_and_tokenizer(str(upper))  # base + lower, merged, + upper
    expected = {name: value.clone() for name, value in stacked.state_dict().items()}
    # what inference loads (lemon eval, --policy DIR): the same stack, merged the same way
    from lemon.backends.local import _merged_adapter

    served = _merged_adapter(Path(upper), stacked.dtype).state_dict()
    for name, value in expected.items():
        torch.testing.assert_close(served[name], value, rtol=0, atol=1e-5, msg=name)
    one = compose(lower, upper, tmp_path / "one")
    config = json.loads((one / "adapter_config.json").read_text())
    assert config["r"] == 6
    assert read_policy(one).base_model == str(tiny_model)
    shutil.rmtree(lower)  # the composed version stands alone
    merged, _ = load_model_and_tokenizer(str(one))
    got = merged.state_dict()
    base = load_model_and_tokenizer(str(tiny_model))[0].state_dict()
    changed = {name for name in got if not torch.equal(got[name], base[name])}
    assert {n.rsplit(".", 2)[-2] for n in changed} == {"q_proj", "v_proj", "o_proj"}
    for name, value in expected.items():
        torch.testing.assert_close(got[name], value, rtol=0, atol=1e-5, msg=name)
    with pytest.raises(ComposeError, match="not stacked on it"):
        compose(upper, one, tmp_path / "bad")


def test_python_m_entry_point_matches_cli(write_config: WriteConfig, tmp_path: Path) -> None:
    config_path = write_config(hyperparameters={"max_steps": 1, "save_steps": 5})
    process = start_train("sft", "--config", str(config_path))
    output, _ = process.communicate(timeout=400)
    assert process.returncode == 0, output[-3000:]
    assert output.strip().splitlines()[-1] == str(tmp_path / "policy" / "v1")
    assert read_policy(tmp_path / "policy" / "v1").stage == "sft"


def test_torchrun_two_processes_on_cpu(write_config: WriteConfig, tmp_path: Path) -> None:
    """DDP over gloo: both ranks train, rank 0 alone publishes and prints the version."""
    config_path = write_config(hyperparameters={"max_steps": 2, "save_steps": 1})
    torchrun = Path(sys.executable).with_name("torchrun")
    result = subprocess.run(
        [
            str(torchrun),
            "--nproc-per-node",
            "2",
            "--master-port",
            str(_free_port()),
            "-m",
            "lemon_train",
            "sft",
            "--config",
            str(config_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=train_env(),
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "policy" / "v1"
    assert result.stdout.splitlines() == [str(out)]  # printed once, by rank 0
    meta = read_policy(out)
    assert meta.metrics["steps"] == 2
    # two ranks of batch 2 share the 16 rows: a step is a quarter epoch (an eighth alone)
    assert [row["epoch"] for row in _metrics(out) if "loss" in row] == [0.25, 0.5]
    last = out.with_name("v1.checkpoints") / "checkpoint-2"
    assert {"rng_state_0.pth", "rng_state_1.pth", "trainer_state.json"} <= {
        p.name for p in last.iterdir()
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_rows_whose_prompt_fills_max_length(write_config: WriteConfig) -> None:
    config = load_config(write_config(hyperparameters={"max_length": 64}))
    with pytest.raises(TrainingError, match=r"every row's prompt fills max_length \(64 tokens\)"):
        build_trainer(config)


@pytest.mark.parametrize(
    ("schedule", "last"), [("linear", 0.0), ("constant", 1e-3), ("cosine", 0.0)]
)
def test_the_learning_rate_follows_the_configured_schedule(
    write_config: WriteConfig, tmp_path: Path, schedule: str, last: float
) -> None:
    """``hyperparameters.lr_scheduler`` reaches the trainer: its scheduler, stepped to the end of
    ``max_steps``, leaves the rate where that schedule puts it (linear and cosine at zero)."""
    config = load_config(write_config(hyperparameters={"max_steps": 4, "lr_scheduler": schedule}))
    trainer, _, _ = build_trainer(config, metrics_path=tmp_path / "m.jsonl")
    trainer.create_optimizer_and_scheduler(num_training_steps=4)
    rates = []
    for _ in range(4):
        rates.append(trainer.lr_scheduler.get_last_lr()[0])
        trainer.optimizer.step()
        trainer.lr_scheduler.step()
    assert rates[0] == pytest.approx(1e-3)
    assert trainer.lr_scheduler.get_last_lr()[0] == pytest.approx(last, abs=1e-12)
    if schedule != "constant":
        assert rates == sorted(rates, reverse=True)
        assert rates[1] < rates[0]


def test_an_unknown_schedule_is_refused_with_its_field(write_config: WriteConfig) -> None:
    with pytest.raises(ValueError, match=r"lr_scheduler|lrScheduler"):
        load_config(write_config(hyperparameters={"lr_scheduler": "warm-restarts"}))


def test_a_checkpoint_is_published_as_a_version(
    write_config: WriteConfig, tmp_path: Path, tiny_model: Path
) -> None:
    """``lemon train sft --config F --checkpoint N``: the run's step-N adapter, as saved, with
    its logs up to N; every checkpoint kept with keep_checkpoints null; an absent one named."""
    lora = {"r": 4, "alpha": 8, "merge": False, "target_modules": ["q_proj", "v_proj"]}
    config_path = write_config(
        lora=lora,
        version="v1",
        hyperparameters={"max_steps": 3, "save_steps": 1, "keep_checkpoints": None},
    )
    done = run_train("sft", "--config", str(config_path))
    assert done.returncode == 0, done.stderr[-3000:]
    checkpoints = tmp_path / "policy" / "v1.checkpoints"
    assert sorted(p.name for p in checkpoints.glob("checkpoint-*")) == [
        "checkpoint-1", "checkpoint-2", "checkpoint-3",
    ]  # fmt: skip
    published = run_train("sft", "--config", str(config_path), "--checkpoint", "2")
    assert published.returncode == 0, published.stderr[-3000:]
    version = tmp_path / "policy" / "v1-at2"
    assert published.stdout.strip().splitlines()[-1] == str(version.resolve())
    meta = read_policy(version)
    assert (meta.version, meta.stage, meta.adapter) == ("v1-at2", "sft", True)
    assert meta.metrics["steps"] == 2
    assert meta.metrics["published_from"] == str((checkpoints / "checkpoint-2").resolve())
    adapter = "adapter_model.safetensors"
    saved = (checkpoints / "checkpoint-2" / adapter).read_bytes()
    assert (version / adapter).read_bytes() == saved
    assert (checkpoints / "checkpoint-3" / adapter).read_bytes() != saved
    assert not (version / "optimizer.pt").exists()
    assert [row["step"] for row in _metrics(version) if "loss" in row] == [1, 2]
    # it loads as the policy it is: base weights plus that step's adapter
    model, _ = load_model_and_tokenizer(str(version))
    base, _ = load_model_and_tokenizer(str(tiny_model))
    assert any(
        not torch.equal(weight, base.state_dict()[name])
        for name, weight in model.state_dict().items()
    )
    # with lora.merge on, the step's adapter is merged into the base weights, as a run's is
    merging = write_config(
        "merge.yaml",
        lora={**lora, "merge": True},
        version="v1",
        hyperparameters={"max_steps": 3, "save_steps": 1, "keep_checkpoints": None},
    )
    out = tmp_path / "merged"
    done = run_train("sft", "--config", str(merging), "--checkpoint", "2", "--output-dir", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert not read_policy(out).adapter
    assert (out / "model.safetensors").is_file()
    merged, _ = load_model_and_tokenizer(str(out))
    for name, weight in model.state_dict().items():
        assert torch.allclose(weight, merged.state_dict()[name], atol=1e-5), name
    missing = run_train("sft", "--config", str(config_path), "--checkpoint", "7")
    assert missing.returncode == 2
    assert "checkpoint-7: no such checkpoint (kept: [1, 2, 3]" in missing.stderr
    alone = run_train("sft", "--config", str(config_path), "--version", "x")
    assert alone.returncode == 2
    assert "--version needs --checkpoint" in alone.stderr
