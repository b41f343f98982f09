"""The local cluster's pure parts, without a cluster: what the KServe stand-in reads from an
InferenceService and where it finds that model; how the training stand-in runs a PyTorchJob
the operator's own builder made; the state directory's conditions; the commands' help."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from lemon.resources.lemon_training import CONFIG_PATH, OUTPUT_MOUNT, TrainingSpec, training_config
from lemon_cluster import serving, training
from lemon_cluster.state import StateDir
from lemon_operator import manifests
from tests.conftest import ROOT, run_lemon

GOLDEN = ROOT / "tests" / "unit" / "golden"


def _golden(name: str) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((GOLDEN / f"inferenceservice-{name}.yaml").read_text())
    return body


@pytest.mark.parametrize(
    ("name", "source", "served_as"),
    [
        ("small", "HuggingFaceTB/SmolLM2-135M-Instruct", "small"),
        ("large", "hf://Qwen/Qwen2.5-Coder-1.5B-Instruct", "large"),
        ("policy", "hf://HuggingFaceTB/SmolLM2-135M-Instruct", "router"),
    ],
)
def test_the_model_and_name_an_inference_service_asks_for(
    name: str, source: str, served_as: str
) -> None:
    wanted = serving.wanted(_golden(name))
    assert (wanted.source, wanted.served_as, wanted.namespace) == (source, served_as, "team-a")


def test_embedded_models_resolve_to_their_pinned_ggufs_or_say_they_are_not_fetched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEMON_CACHE_DIR", str(tmp_path / "empty-cache"))
    for source in ("Qwen/Qwen2.5-Coder-0.5B-Instruct", "hf://qwen/qwen2.5-coder-0.5b-instruct",
                   "qwen2.5-coder-0.5b-instruct"):  # fmt: skip
        missing = serving.resolve(source, volumes=tmp_path)
        assert isinstance(missing, serving.Missing), source
        assert missing.reason == "ModelNotFetched"
        assert "lemon models fetch qwen2.5-coder-0.5b-instruct" in missing.message
    # Once fetched (locate checks the file's header; here it is told the file is there), the
    # hub id maps to the pinned GGUF's name, which serve-model loads.
    located: list[str] = []

    def fetched(model: Any) -> Path:
        located.append(model.name)
        return tmp_path / model.filename

    monkeypatch.setattr(serving, "locate", fetched)
    model = serving.resolve("Qwen/Qwen2.5-Coder-0.5B-Instruct", volumes=tmp_path)
    assert model == serving.Model(
        ("--model", "qwen2.5-coder-0.5b-instruct", "--threads", str(serving.tier_threads())),
        "Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) on llama.cpp",
    )
    assert located == ["qwen2.5-coder-0.5b-instruct"]


def test_the_tiers_servers_split_the_cpus_between_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three llama.cpp servers with every core each oversubscribe them (ggml spins at its
    barriers): each gets its share, at least one thread, unless told otherwise."""
    monkeypatch.delenv("LEMON_CLUSTER_THREADS", raising=False)
    for cpus, threads in ((1, 1), (2, 1), (6, 2), (16, 5)):
        monkeypatch.setattr(serving, "_cpus", lambda cpus=cpus: cpus)
        assert serving.tier_threads() == threads
    monkeypatch.setenv("LEMON_CLUSTER_THREADS", "4")
    assert serving.tier_threads() == 4


def test_policy_versions_on_claims_and_what_is_not_here(tmp_path: Path) -> None:
    version = tmp_path / "lemon-output" / "policies" / "router" / "v1"
    version.mkdir(parents=True)
    (version / "config.json").write_text("{}")
    model = serving.resolve("pvc://lemon-output/policies/router/v1", volumes=tmp_path)
    assert model == serving.Model(("--model", str(version)), f"{version} on transformers")
    cases = {
        "pvc://lemon-output/policies/router/v2": "ModelNotFound",
        "pvc://lemon-output/../../etc": "InvalidStorageUri",
        "s3://bucket/model": "StorageNotOnThisMachine",
        "meta-llama/Llama-3.1-70B-Instruct": "ModelNotOnThisMachine",
        "": "ModelNotOnThisMachine",
    }
    for source, reason in cases.items():
        missing = serving.resolve(source, volumes=tmp_path)
        assert isinstance(missing, serving.Missing), source
        assert missing.reason == reason, (source, missing)
    other = serving.resolve("meta-llama/Llama-3.1-70B-Instruct", volumes=tmp_path)
    assert isinstance(other, serving.Missing)
    assert "Qwen/Qwen2.5-Coder-1.5B-Instruct" in other.message  # says what it does serve


def _job_and_config(replicas: int) -> tuple[dict[str, Any], dict[str, str]]:
    spec = TrainingSpec.model_validate(
        {
            "stage": "sft",
            "policy": "router",
            "baseModel": "packaged",
            "data": {"pvc": "lemon-data", "path": "sft/rows.jsonl"},
            "output": {"pvc": "lemon-output", "path": "policies"},
            "image": "ghcr.io/example/lemon-train:0.1.0",
            "replicas": replicas,
        }
    )
    job = manifests.build_pytorch_job("sft-1", namespace="team-a", uid="uid-1", spec=spec)
    config = training_config(spec, version="sft-1-0a1b2c3d")
    config_map = manifests.build_training_config_map(
        "sft-1", namespace="team-a", uid="uid-1", config=config
    )
    return job, config_map["data"]


def test_a_pytorch_job_the_operator_builds_runs_here_with_its_mounts_as_folders(
    tmp_path: Path,
) -> None:
    job, data = _job_and_config(replicas=2)
    asked: list[str] = []

    def config_maps(name: str) -> dict[str, str] | None:
        asked.append(name)
        return data if name == "sft-1-config" else None

    volumes, workdir = tmp_path / "volumes", tmp_path / "jobs" / "team-a" / "sft-1"
    local = training.plan(job, config_maps=config_maps, volumes=volumes, workdir=workdir)
    assert asked == ["sft-1-config"]
    config_file = workdir / "volumes" / "config" / Path(CONFIG_PATH).name
    assert local.argv[1:] == ("train", "sft", "--config", str(config_file))
    assert Path(local.argv[0]).name == "lemon"
    written = yaml.safe_load(local.files[config_file])
    assert written["data"] == str(volumes / "lemon-data" / "sft" / "rows.jsonl")
    assert written["output_dir"] == str(volumes / "lemon-output" / "policies/router/sft-1-0a1b2c3d")
    assert written["termination_log"] == str(local.termination_log)
    assert OUTPUT_MOUNT not in local.files[config_file]
    assert set(local.folders) >= {volumes / "lemon-output", volumes / "lemon-data"}
    assert local.env["WORLD_SIZE"] == "1"
    assert local.env["RANK"] == "0"
    assert local.env["PYTHONUNBUFFERED"] == "1"  # the container's own environment
    assert (local.workers, local.image, local.container) == (1, "ghcr.io/example/lemon-train:0.1.0",
                                                              "pytorch")  # fmt: skip


def test_jobs_it_cannot_run_here_are_refused_saying_why(tmp_path: Path) -> None:
    job, _ = _job_and_config(replicas=1)
    with pytest.raises(training.JobRefused, match="ConfigMap sft-1-config does not exist"):
        training.plan(job, config_maps=lambda _: None, volumes=tmp_path, workdir=tmp_path)
    pod = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    pod["volumes"].append({"name": "host", "hostPath": {"path": "/data"}})
    pod["containers"][0]["volumeMounts"].append({"name": "host", "mountPath": "/data"})
    with pytest.raises(training.JobRefused, match="volume host is a hostPath volume"):
        training.plan(job, config_maps=lambda _: {}, volumes=tmp_path, workdir=tmp_path)


def test_the_state_directory_conditions(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    assert state.condition() == "absent"
    state.root.mkdir()
    assert state.condition() == "empty"
    (state.root / "notes.txt").write_text("x")
    assert state.condition() == "foreign"
    (state.root / "notes.txt").unlink()
    lock = state.claim()
    state.write({"pid": 1})
    assert state.condition() == "running"  # the lock is held (here, by this process)
    lock.close()
    assert state.condition() == "stale"
    assert state.read() == {"pid": 1}
    state.remove()
    assert state.condition() == "absent"


def test_the_cluster_commands_have_help() -> None:
    for args in (("cluster",), ("cluster", "up"), ("cluster", "status"), ("cluster", "down")):
        done = run_lemon(*args, "--help")
        assert done.returncode == 0, done.stderr
    assert "--state-dir" in run_lemon("cluster", "down", "--help").stdout
    assert "KServe" in run_lemon("cluster", "--help").stdout
    shown = json.loads(
        run_lemon("cluster", "status", "--json", "--state-dir", "/nonexistent/x").stdout
    )
    assert shown == {"stateDir": "/nonexistent/x", "condition": "absent"}
