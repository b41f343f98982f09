"""The whole loop with a real training run: the operator's PyTorchJob command runs locally.

The operator creates the PyTorchJob and ConfigMap for a LemonTraining on the real API server;
the test then does what the cluster would: it mounts the ConfigMap and the two claims (as
directories, so the config's mount paths are rewritten to where those directories are, exactly
what a bind mount does), runs the Master container's command as a subprocess with the
environment the Kubeflow training operator gives it (WORLD_SIZE=1, RANK=0, MASTER_ADDR/PORT),
with a tiny real model, and hands the run's termination log to the Master pod's status. The
operator publishes the version; its weights are the trained ones (they differ from the base
model's), and ``lemon run --policy`` loads it and asks it for the spec. Two training steps on a
random model teach no spec, so the run falls back to the template: this checks the loop, not
what the policy learned (tests/train and ``lemon bench learning`` cover that).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from lemon.policy.version import read_policy
from lemon.resources.lemon_training import CONFIG_PATH, DATA_MOUNT, OUTPUT_MOUNT, produced_version
from tests.conftest import LEMON, ROOT
from tests.k8s.conftest import Kubectl, Operator
from tests.k8s.test_operator import condition, get
from tests.k8s.test_training import (  # noqa: F401 (fixtures)
    finish_master_pod,
    ns,
    play_job,
    policy_manifest,
    waiter,
)

pytestmark = [pytest.mark.model, pytest.mark.usefixtures("ns")]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_job_command_trains_a_version_lemon_run_loads(
    kubectl: Kubectl, operator_process: Operator, namespace: str, tmp_path: Path
) -> None:
    import torch

    from lemon_testing.tiny_models import tiny_test_model
    from tests.train.conftest import sft_rows

    wait = waiter(kubectl, operator_process, namespace)
    tiny = tiny_test_model(tmp_path / "tiny-llama")
    data, output = tmp_path / "claims" / "lemon-data", tmp_path / "claims" / "lemon-output"
    data.mkdir(parents=True)
    output.mkdir(parents=True)
    (data / "sft.jsonl").write_text("".join(json.dumps(row) + "\n" for row in sft_rows(8)))

    kubectl("apply", "-n", namespace, "-f", "-",
            stdin=policy_manifest("local", versions=[], served=None))  # fmt: skip
    training = {
        "apiVersion": "lemon.ai/v1alpha1",
        "kind": "LemonTraining",
        "metadata": {"name": "sft-local"},
        "spec": {
            "stage": "sft",
            "policy": "local",
            "baseModel": str(tiny),  # a path in the training image
            "data": {"pvc": "lemon-data", "path": "sft.jsonl"},
            "output": {"pvc": "lemon-output", "path": "policies"},
            "hyperparameters": {
                "maxSteps": 2,
                "perDeviceBatchSize": 2,
                "saveSteps": 2,
                "learningRate": 1e-3,
                "maxLength": 1024,
            },
            "image": "lemon-train:local",
        },
    }
    kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(training))
    job = wait(lambda: get(kubectl, namespace, "pytorchjob", "sft-local"), what="the PyTorchJob")
    uid = (get(kubectl, namespace, "ltrain", "sft-local") or {})["metadata"]["uid"]
    version = produced_version("sft-local", uid)
    container = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    config_map = kubectl.json("get", "configmap", "sft-local-config", "-n", namespace)

    # Mount the ConfigMap and the claims where this machine has them.
    termination_log = tmp_path / "termination-log"
    termination_log.write_text("")  # the kubelet creates it
    text = config_map["data"]["train.yaml"]
    for mount, local in ((DATA_MOUNT, data), (OUTPUT_MOUNT, output),
                         ("/dev/termination-log", termination_log)):  # fmt: skip
        text = text.replace(mount, str(local))
    config_file = tmp_path / "etc-lemon" / Path(CONFIG_PATH).name
    config_file.parent.mkdir()
    config_file.write_text(text)
    assert yaml.safe_load(text)["base_model"] == str(tiny)

    command = list(container["command"])
    assert command[:3] == ["lemon", "train", "sft"]
    argv = [str(LEMON), *command[1:]]
    argv[argv.index(CONFIG_PATH)] = str(config_file)
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "TOKENIZERS_PARALLELISM": "false",
           "WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}  # fmt: skip
    for entry in container.get("env") or []:
        env[entry["name"]] = entry["value"]
    play_job(kubectl, namespace, "sft-local", ("Created", "PyTorchJobCreated"),
             ("Running", "PyTorchJobRunning"))  # fmt: skip
    run = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900,
                         check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    message = termination_log.read_text()
    assert json.loads(message)["version"] == version

    finish_master_pod(kubectl, namespace, "sft-local", message=message)
    play_job(kubectl, namespace, "sft-local", ("Created", "PyTorchJobCreated"),
             ("Running", "PyTorchJobRunning"), ("Succeeded", "PyTorchJobSucceeded"))  # fmt: skip
    done = wait(
        lambda: (
            condition(t := get(kubectl, namespace, "ltrain", "sft-local"), "Published").get(
                "status"
            )
            == "True"
            and t
        ),
        what="the version published",
    )
    checkpoint = done["status"]["checkpoint"]
    assert checkpoint == f"pvc://lemon-output/policies/local/{version}"
    local_version = output / checkpoint.removeprefix("pvc://lemon-output/")
    meta = read_policy(local_version)
    assert (meta.policy, meta.version, meta.stage) == ("local", version, "sft")
    reported = json.loads(message)["metrics"]  # those with a value (null is no measurement)
    assert done["status"]["metrics"] == {k: v for k, v in reported.items() if v is not None}
    assert done["status"]["metrics"]["steps"] == 2
    policy = get(kubectl, namespace, "lpol", "local") or {}
    assert [v["name"] for v in policy["spec"]["versions"]] == [version]

    # The version is the trained model, not a copy of the base: training changed its weights.
    trained, base = _weights(local_version), _weights(tiny)
    assert trained.keys() == base.keys()
    assert any(not torch.equal(trained[name], base[name]) for name in base)

    # `lemon run --policy` loads that version and asks it for the spec. Two steps on a random
    # model teach no spec, so what is checked is the path, not the policy's quality: both
    # attempts come from the published version and are refused with located errors, and the
    # run falls back to the template's team and succeeds.
    answer = subprocess.run(
        [str(LEMON), "run", "--policy", str(local_version), "--profile", "scripted", "--json",
         "--policy-attempts", "2", "--policy-max-tokens", "32", "--task", "What is 2 + 3?"],
        capture_output=True, text=True, cwd=ROOT, timeout=600, check=False,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )  # fmt: skip
    assert answer.returncode == 0, answer.stderr[-3000:]
    result = json.loads(answer.stdout)
    policy = result["policy"]
    assert str(local_version) in policy["origin"]
    assert f"learned policy local@{version} (sft)" in policy["origin"]
    assert len(policy["attempts"]) == 2
    assert all(not a["valid"] and a["errors"] for a in policy["attempts"]), policy["attempts"]
    assert policy["fallback"] is True
    assert result["spec_origin"].startswith("template policy (math): fallback")
    assert result["status"] == "succeeded"


def _weights(directory: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(directory / "model.safetensors"))
