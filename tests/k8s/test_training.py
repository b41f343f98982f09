"""LemonTraining → PyTorchJob → LemonPolicy on a real API server.

The test plays the Kubeflow training operator (it patches the PyTorchJob's status conditions),
the kubelet (it creates the Master pod and patches its status with a terminated state and the
run's result.json as termination message) and KServe (it patches the policy InferenceService's
status). Everything else is the real operator under its generated ClusterRole.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from lemon.learning.training_config import TrainingConfig
from lemon.resources.lemon_training import OUTPUT_MOUNT, produced_version
from lemon_operator import manifests
from tests.conftest import ROOT
from tests.k8s.conftest import Kubectl, Operator, wait_for
from tests.k8s.test_operator import condition, get

BASE = "hf://HuggingFaceTB/SmolLM2-135M-Instruct"
Wait = Callable[..., Any]


@pytest.fixture
def ns(kubectl: Kubectl, namespace: str) -> str:
    # Pods need the namespace's default ServiceAccount, which a controller-manager would create.
    kubectl("create", "serviceaccount", "default", "-n", namespace)
    return namespace


def waiter(kubectl: Kubectl, operator: Operator, namespace: str) -> Wait:
    def diagnose() -> str:
        kinds = "ltrain,lpol,pytorchjobs,isvc,pods,configmaps"
        objects = kubectl("get", kinds, "-n", namespace, "-o", "yaml", check=False)
        return f"{objects.stdout[-8000:]}\n--- operator log\n{operator.tail()}"

    def wait(check: Callable[[], Any], *, what: str, timeout: float = 60.0) -> Any:
        return wait_for(check, what=what, timeout=timeout, diagnose=diagnose)

    return wait


def policy_manifest(name: str, *, versions: list[dict[str, Any]], served: str | None) -> str:
    spec: dict[str, Any] = {"autoPromote": True, "versions": versions}
    if served:
        spec["servedVersion"] = served
    spec["serving"] = {"runtimeArgs": ["--max-model-len=4096"], "minReplicas": 1}
    return yaml.safe_dump(
        {"apiVersion": "lemon.ai/v1alpha1", "kind": "LemonPolicy",
         "metadata": {"name": name}, "spec": spec}
    )  # fmt: skip


def training_manifest(name: str, *, policy: str, stage: str = "sft", replicas: int = 2) -> str:
    spec = {
        "stage": stage,
        "policy": policy,
        "data": {"path": "train.jsonl", "pvc": "lemon-data"},
        "output": {"pvc": "lemon-output", "path": "policies"},
        "hyperparameters": {"learningRate": 1e-4, "maxSteps": 20, "groupSize": 4},
        "lora": {"r": 8},
        "image": "ghcr.io/example/lemon-train:0.1.0",
        "replicas": replicas,
        "resources": {"limits": {"nvidia.com/gpu": 1}},
    }
    return yaml.safe_dump(
        {"apiVersion": "lemon.ai/v1alpha1", "kind": "LemonTraining",
         "metadata": {"name": name}, "spec": spec}
    )  # fmt: skip


def stamp() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def play_job(kubectl: Kubectl, namespace: str, job: str, *states: tuple[str, str]) -> None:
    """Be the training operator: the job's conditions become ``states`` ((type, reason), ...),
    the last one True and the earlier ones as the training operator leaves them."""
    conditions = []
    for index, (kind, reason) in enumerate(states):
        last = index == len(states) - 1
        running_done = kind == "Running" and not last
        conditions.append({
            "type": kind, "status": "False" if running_done else "True", "reason": reason,
            "message": f"PyTorchJob {job} is {kind.lower()}.",
            "lastUpdateTime": stamp(), "lastTransitionTime": stamp(),
        })  # fmt: skip
    status: dict[str, Any] = {"conditions": conditions, "startTime": stamp()}
    if states[-1][0] in ("Succeeded", "Failed"):
        status["completionTime"] = stamp()
    kubectl("patch", "pytorchjob", job, "-n", namespace, "--subresource=status",
            "--type=merge", "-p", json.dumps({"status": status}))  # fmt: skip


def finish_master_pod(
    kubectl: Kubectl, namespace: str, job: str, *, message: str, exit_code: int = 0
) -> None:
    """Be the kubelet: the job's Master pod exists and its container has terminated."""
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{job}-master-0", "labels": {
            manifests.JOB_NAME_LABEL: job, manifests.REPLICA_TYPE_LABEL: "master",
            "training.kubeflow.org/replica-index": "0"}},
        "spec": {"containers": [{"name": "pytorch", "image": "lemon-train"}],
                 "restartPolicy": "OnFailure"},
    }  # fmt: skip
    kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(pod))
    terminated = {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error",
                  "message": message, "startedAt": stamp(), "finishedAt": stamp()}  # fmt: skip
    status = {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "containerStatuses": [{
            "name": "pytorch", "ready": False, "restartCount": 0, "image": "lemon-train",
            "imageID": "", "state": {"terminated": terminated}}],
    }  # fmt: skip
    kubectl("patch", "pod", pod["metadata"]["name"], "-n", namespace, "--subresource=status",
            "--type=merge", "-p", json.dumps({"status": status}))  # fmt: skip


def serve(kubectl: Kubectl, namespace: str, isvc: str) -> None:
    """Be KServe: the InferenceService's current generation is Ready."""
    found = kubectl.json("get", "isvc", isvc, "-n", namespace)
    status = {
        "url": f"http://{isvc}.{namespace}.example.com",
        "observedGeneration": found["metadata"]["generation"],
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    kubectl("patch", "isvc", isvc, "-n", namespace, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": status}))  # fmt: skip


def versions(kubectl: Kubectl, namespace: str, policy: str) -> list[str]:
    found = get(kubectl, namespace, "lpol", policy) or {}
    return [item["name"] for item in (found.get("spec") or {}).get("versions") or []]


def test_success_publishes_one_version_and_rolls_the_policy(
    kubectl: Kubectl, operator_process: Operator, ns: str
) -> None:
    wait = waiter(kubectl, operator_process, ns)
    base = {"name": "base", "checkpoint": BASE, "stage": "base"}
    kubectl("apply", "-n", ns, "-f", "-",
            stdin=policy_manifest("router", versions=[base], served="base"))  # fmt: skip
    isvc = "router-policy"

    def storage_uri() -> str | None:
        found = get(kubectl, ns, "isvc", isvc)
        return found["spec"]["predictor"]["model"].get("storageUri") if found else None

    wait(lambda: storage_uri() == BASE, what="the policy InferenceService on the base version")
    serve(kubectl, ns, isvc)
    policy = wait(
        lambda: (
            condition(p := get(kubectl, ns, "lpol", "router"), "Ready").get("status") == "True"
            and p
        ),
        what="the policy Ready",
    )
    assert policy["status"]["servedVersion"] == "base"
    assert policy["status"]["url"] == f"http://{isvc}.{ns}.example.com"

    kubectl("apply", "-n", ns, "-f", "-", stdin=training_manifest("sft-1", policy="router"))
    training = get(kubectl, ns, "ltrain", "sft-1")
    assert training is not None
    version = produced_version("sft-1", training["metadata"]["uid"])
    job = wait(lambda: get(kubectl, ns, "pytorchjob", "sft-1"), what="the PyTorchJob")
    assert job["metadata"]["ownerReferences"][0]["uid"] == training["metadata"]["uid"]
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert (replicas["Master"]["replicas"], replicas["Worker"]["replicas"]) == (1, 1)
    container = replicas["Master"]["template"]["spec"]["containers"][0]
    assert container["name"] == "pytorch"
    assert container["command"] == ["lemon", "train", "sft", "--config", "/etc/lemon/train.yaml"]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    config_map = kubectl.json("get", "configmap", "sft-1-config", "-n", ns)
    config = TrainingConfig.model_validate(yaml.safe_load(config_map["data"]["train.yaml"]))
    output = f"{OUTPUT_MOUNT}/policies/router/{version}"
    assert (config.output_dir, config.version, config.policy) == (output, version, "router")
    assert str(config.data) == "/var/lemon/data/train.jsonl"  # FileData, the typed form
    assert config.lora is not None
    assert config.lora.target_modules == "all-linear"

    def phase() -> str | None:
        return ((get(kubectl, ns, "ltrain", "sft-1") or {}).get("status") or {}).get("phase")

    play_job(kubectl, ns, "sft-1", ("Created", "PyTorchJobCreated"))
    wait(lambda: phase() == "Created", what="phase Created")
    play_job(kubectl, ns, "sft-1", ("Created", "PyTorchJobCreated"),
             ("Running", "PyTorchJobRunning"))  # fmt: skip
    wait(lambda: phase() == "Running", what="phase Running")
    assert versions(kubectl, ns, "router") == ["base"]

    result = {"policy": output, "version": version, "stage": "sft",
              "metrics": {"train_loss": 0.42, "steps": 20}}  # fmt: skip
    finish_master_pod(kubectl, ns, "sft-1", message=json.dumps(result))
    play_job(kubectl, ns, "sft-1", ("Created", "PyTorchJobCreated"),
             ("Running", "PyTorchJobRunning"), ("Succeeded", "PyTorchJobSucceeded"))  # fmt: skip
    done = wait(
        lambda: (
            condition(t := get(kubectl, ns, "ltrain", "sft-1"), "Published").get("status") == "True"
            and t
        ),
        what="the version published",
    )
    status = done["status"]
    assert status["phase"] == "Succeeded"
    assert status["producedVersion"] == version
    assert status["checkpoint"] == f"pvc://lemon-output/policies/router/{version}"
    assert status["metrics"] == {"train_loss": 0.42, "steps": 20}
    assert condition(done, "Succeeded")["reason"] == "PyTorchJobSucceeded"

    policy = get(kubectl, ns, "lpol", "router") or {}
    assert versions(kubectl, ns, "router") == ["base", version]
    published = policy["spec"]["versions"][1]
    assert published["training"] == "sft-1"
    assert published["stage"] == "sft"
    assert published["checkpoint"] == status["checkpoint"]
    assert published["metrics"] == {"train_loss": 0.42, "steps": 20}
    assert policy["spec"]["servedVersion"] == version  # autoPromote

    wait(lambda: storage_uri() == status["checkpoint"], what="the policy service rolled")
    rolled = get(kubectl, ns, "isvc", isvc) or {}
    assert rolled["metadata"]["annotations"][manifests.POLICY_VERSION_ANNOTATION] == version
    # Ready was for the previous generation: the policy waits for KServe to serve the new one.
    wait(lambda: condition(get(kubectl, ns, "lpol", "router"), "Ready").get("reason")
         == "Rolling", what="the policy rolling")  # fmt: skip
    serve(kubectl, ns, isvc)
    wait(
        lambda: (
            condition(p := get(kubectl, ns, "lpol", "router"), "Ready").get("status") == "True"
            and p["status"]["servedVersion"] == version
        ),
        what="the new version served",
    )

    # Rollback: set the older version.
    kubectl("patch", "lpol", "router", "-n", ns, "--type=merge",
            "-p", json.dumps({"spec": {"servedVersion": "base"}}))  # fmt: skip
    wait(lambda: storage_uri() == BASE, what="the policy service rolled back")
    wait(
        lambda: (
            ((get(kubectl, ns, "lpol", "router") or {}).get("status") or {}).get("servedVersion")
            == "base"
        ),
        what="status on the base version",
    )
    assert versions(kubectl, ns, "router") == ["base", version]

    table = kubectl("get", "ltrain", "-n", ns).stdout
    assert table.split("\n")[0].split()[:5] == ["NAME", "STAGE", "POLICY", "PHASE", "VERSION"]
    assert table.split("\n")[1].split()[:5] == ["sft-1", "sft", "router", "Succeeded", version]
    head, row = kubectl("get", "lpol", "-n", ns).stdout.split("\n")[:2]
    assert head.split()[:5] == ["NAME", "DEFAULT", "SERVED", "VERSIONS", "READY"]
    served, listed = head.index("SERVED"), head.index("VERSIONS")  # DEFAULT is blank here
    assert (row.split()[0], row[served:listed].strip(), row[listed:].split()[0]) == (
        "router", "base", "2",
    )  # fmt: skip

    # Deleting the policy takes its InferenceService along (without a garbage collector here).
    kubectl("delete", "lpol", "router", "-n", ns, "--timeout=60s")
    wait(lambda: get(kubectl, ns, "isvc", isvc) is None, what="the policy service deleted")


def test_failure_publishes_nothing(kubectl: Kubectl, operator_process: Operator, ns: str) -> None:
    wait = waiter(kubectl, operator_process, ns)
    kubectl("apply", "-n", ns, "-f", "-", stdin=policy_manifest("router", versions=[], served=None))
    grpo = training_manifest("grpo-1", policy="router", stage="grpo", replicas=1)
    kubectl("apply", "-n", ns, "-f", "-", stdin=grpo)
    job = wait(lambda: get(kubectl, ns, "pytorchjob", "grpo-1"), what="the PyTorchJob")
    assert "Worker" not in job["spec"]["pytorchReplicaSpecs"]
    finish_master_pod(kubectl, ns, "grpo-1", message="Traceback: CUDA out of memory", exit_code=1)
    play_job(kubectl, ns, "grpo-1", ("Created", "PyTorchJobCreated"),
             ("Running", "PyTorchJobRunning"), ("Failed", "BackoffLimitExceeded"))  # fmt: skip
    done = wait(
        lambda: (
            condition(t := get(kubectl, ns, "ltrain", "grpo-1"), "Failed").get("status") == "True"
            and t
        ),
        what="the training Failed",
    )
    failed = condition(done, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    assert "failed" in failed["message"]
    assert done["status"]["phase"] == "Failed"
    assert "producedVersion" not in done["status"]
    published = condition(done, "Published")
    assert (published["status"], published["reason"]) == ("False", "JobFailed")
    assert versions(kubectl, ns, "router") == []
    assert get(kubectl, ns, "isvc", "router-policy") is None
    policy = get(kubectl, ns, "lpol", "router") or {}
    assert condition(policy, "Ready")["reason"] == "NoServedVersion"

    # Deleting the training deletes its job and ConfigMap.
    kubectl("delete", "ltrain", "grpo-1", "-n", ns, "--timeout=60s")
    wait(lambda: get(kubectl, ns, "pytorchjob", "grpo-1") is None, what="the job deleted")
    assert get(kubectl, ns, "configmap", "grpo-1-config") is None


def test_a_policy_created_later_gets_the_version_once(
    kubectl: Kubectl, operator_process: Operator, ns: str
) -> None:
    wait = waiter(kubectl, operator_process, ns)
    kubectl("apply", "-n", ns, "-f", "-", stdin=training_manifest("sft-2", policy="late"))
    uid = wait(lambda: get(kubectl, ns, "ltrain", "sft-2"), what="the training")["metadata"]["uid"]
    version = produced_version("sft-2", uid)
    wait(lambda: get(kubectl, ns, "pytorchjob", "sft-2"), what="the PyTorchJob")
    # No termination message: the operator falls back to the deterministic location.
    play_job(kubectl, ns, "sft-2", ("Created", "PyTorchJobCreated"),
             ("Succeeded", "PyTorchJobSucceeded"))  # fmt: skip
    waiting = wait(
        lambda: (
            condition(t := get(kubectl, ns, "ltrain", "sft-2"), "Published").get("reason")
            == "PolicyNotFound"
            and t
        ),
        what="Published False (no policy yet)",
    )
    assert waiting["status"]["producedVersion"] == version
    assert waiting["status"]["checkpoint"] == f"pvc://lemon-output/policies/late/{version}"
    assert "no metrics" in condition(waiting, "Published")["message"]
    kubectl("apply", "-n", ns, "-f", "-", stdin=policy_manifest("late", versions=[], served=None))
    wait(lambda: condition(get(kubectl, ns, "ltrain", "sft-2"), "Published").get("status")
         == "True", what="published once the policy exists")  # fmt: skip
    assert versions(kubectl, ns, "late") == [version]
    wait(lambda: get(kubectl, ns, "isvc", "late-policy"), what="the new version served")


def test_from_version_waits_for_its_policy_and_an_unknown_version_fails(
    kubectl: Kubectl, operator_process: Operator, ns: str
) -> None:
    wait = waiter(kubectl, operator_process, ns)
    # Applied before its policy: it waits (no job) instead of failing.
    grpo = yaml.safe_load(training_manifest("grpo-2", policy="router", stage="grpo"))
    grpo["spec"]["fromVersion"] = "sft-a"
    kubectl("apply", "-n", ns, "-f", "-", stdin=yaml.safe_dump(grpo))
    pending = wait(
        lambda: (
            condition(t := get(kubectl, ns, "ltrain", "grpo-2"), "Published").get("reason")
            == "PolicyNotFound"
            and t
        ),
        what="the training waiting for its policy",
    )
    assert pending["status"]["phase"] == "Pending"
    assert get(kubectl, ns, "pytorchjob", "grpo-2") is None
    sft = {"name": "sft-a", "checkpoint": "pvc://lemon-output/policies/router/sft-a"}
    kubectl("apply", "-n", ns, "-f", "-",
            stdin=policy_manifest("router", versions=[sft], served=None))  # fmt: skip
    wait(lambda: get(kubectl, ns, "pytorchjob", "grpo-2"), what="the job once the policy exists")
    config_map = kubectl.json("get", "configmap", "grpo-2-config", "-n", ns)
    config = TrainingConfig.model_validate(yaml.safe_load(config_map["data"]["train.yaml"]))
    assert config.base_model == f"{OUTPUT_MOUNT}/policies/router/sft-a"

    # A version the policy does not have: nothing can start.
    manifest = yaml.safe_load(training_manifest("sft-3", policy="router"))
    manifest["spec"]["fromVersion"] = "nope"
    kubectl("apply", "-n", ns, "-f", "-", stdin=yaml.safe_dump(manifest))
    done = wait(
        lambda: (
            condition(t := get(kubectl, ns, "ltrain", "sft-3"), "Failed").get("status") == "True"
            and t
        ),
        what="the training Failed",
    )
    assert condition(done, "Failed")["reason"] == "InvalidBase"
    assert "has no version nope" in condition(done, "Failed")["message"]
    assert get(kubectl, ns, "pytorchjob", "sft-3") is None
    # The spec is immutable: a new run is a new resource.
    proc = kubectl("patch", "ltrain", "sft-3", "-n", ns, "--type=merge",
                   "-p", '{"spec": {"replicas": 3}}', check=False)  # fmt: skip
    assert proc.returncode != 0
    assert "immutable" in proc.stderr


def test_restart_during_the_job_and_between_publishing_steps(
    kubectl: Kubectl, operator_process: Operator, ns: str
) -> None:
    wait = waiter(kubectl, operator_process, ns)
    kubectl("apply", "-n", ns, "-f", "-", stdin=policy_manifest("router", versions=[], served=None))
    kubectl("apply", "-n", ns, "-f", "-", stdin=training_manifest("sft-r", policy="router"))
    wait(lambda: get(kubectl, ns, "pytorchjob", "sft-r"), what="the PyTorchJob")
    uid = (get(kubectl, ns, "ltrain", "sft-r") or {})["metadata"]["uid"]
    version = produced_version("sft-r", uid)

    def published() -> dict[str, str]:
        return condition(get(kubectl, ns, "ltrain", "sft-r"), "Published")

    # 1. The operator is down while the job runs and finishes.
    operator_process.kill()
    try:
        play_job(kubectl, ns, "sft-r", ("Created", "PyTorchJobCreated"),
                 ("Running", "PyTorchJobRunning"))  # fmt: skip
        result = {"policy": f"{OUTPUT_MOUNT}/policies/router/{version}", "version": version,
                  "stage": "sft", "metrics": {"train_loss": 0.3}}  # fmt: skip
        finish_master_pod(kubectl, ns, "sft-r", message=json.dumps(result))
        states = [("Created", "PyTorchJobCreated"), ("Running", "PyTorchJobRunning")]
        play_job(kubectl, ns, "sft-r", *states, ("Succeeded", "PyTorchJobSucceeded"))
    finally:
        operator_process.start()
    wait(lambda: published().get("status") == "True", what="published after the restart")
    assert versions(kubectl, ns, "router") == [version]
    status = (get(kubectl, ns, "ltrain", "sft-r") or {})["status"]
    assert status["metrics"] == {"train_loss": 0.3}
    policy = get(kubectl, ns, "lpol", "router") or {}
    assert policy["spec"]["servedVersion"] == version
    jobs = kubectl.json("get", "pytorchjobs", "-n", ns)["items"]
    assert [job["metadata"]["name"] for job in jobs] == ["sft-r"]

    # 2. A crash after the version reached the policy but before Published was recorded: the
    # training's status is as that crash leaves it; the restarted operator must not add another.
    operator_process.kill()
    try:
        crashed = [
            entry if entry["type"] != "Published"
            else {**entry, "status": "False", "reason": "Publishing"}
            for entry in status["conditions"]
        ]  # fmt: skip
        kubectl("patch", "ltrain", "sft-r", "-n", ns, "--subresource=status", "--type=merge",
                "-p", json.dumps({"status": {"conditions": crashed}}))  # fmt: skip
        assert published()["reason"] == "Publishing"
    finally:
        operator_process.start()
    wait(lambda: published().get("status") == "True", what="Published again after the restart")
    assert versions(kubectl, ns, "router") == [version]
    assert (get(kubectl, ns, "ltrain", "sft-r") or {})["status"]["metrics"] == {"train_loss": 0.3}

    # the restarted operator reconciles the policy's InferenceService on its own schedule (one
    # run saw none yet as Published turned True): exactly one, once it has
    def isvc_names() -> list[str]:
        return [item["metadata"]["name"] for item in kubectl.json("get", "isvc", "-n", ns)["items"]]

    assert wait(lambda: isvc_names() or None, what="the policy's InferenceService") == [
        "router-policy"
    ]


def test_examples_apply(kubectl: Kubectl, ns: str) -> None:
    for path in sorted((ROOT / "examples" / "training").glob("*.yaml")):
        kubectl("apply", "--dry-run=server", "-n", ns, "-f", str(path))
