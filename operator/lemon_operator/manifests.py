"""Pure builders of the objects the operator owns: KServe InferenceServices (one per tier, one
per policy), for a training its PyTorchJob and the ConfigMap holding its TrainingConfig, for a
run the ConfigMap holding its trace, and for a LemonSpec with a task the LemonRun of that task."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import yaml

from lemon.learning.training_config import TrainingConfig
from lemon.resources import API_VERSION, TierSpec
from lemon.resources.lemon_policy import PolicyServing, PolicyVersionEntry
from lemon.resources.lemon_training import (
    CONFIG_PATH,
    DATA_MOUNT,
    OUTPUT_MOUNT,
    TrainingSpec,
)
from lemon.spec import Capacity

__all__ = [
    "CONFIG_KEY",
    "CONTAINER",
    "JOB_NAME_LABEL",
    "MANAGED_BY",
    "POLICY_LABEL",
    "POLICY_VERSION_ANNOTATION",
    "PROFILE_LABEL",
    "REPLICA_TYPE_LABEL",
    "RUN_LABEL",
    "SPEC_GENERATION_ANNOTATION",
    "SPEC_LABEL",
    "TIER_LABEL",
    "TRAINING_LABEL",
    "build_inference_service",
    "build_policy_inference_service",
    "build_pytorch_job",
    "build_spec_run",
    "build_trace_config_map",
    "build_training_config_map",
    "config_map_name",
    "inference_service_name",
    "master_pod_selector",
    "owned_selector",
    "policy_inference_service_name",
    "spec_run_name",
    "trace_config_map_name",
    "training_command",
]

MANAGED_BY = "lemon-operator"
PROFILE_LABEL = "lemon.ai/profile"
TIER_LABEL = "lemon.ai/tier"
POLICY_LABEL = "lemon.ai/policy"
TRAINING_LABEL = "lemon.ai/training"
POLICY_VERSION_ANNOTATION = "lemon.ai/policy-version"
RUN_LABEL = "lemon.ai/run"
SPEC_LABEL = "lemon.ai/spec"
SPEC_GENERATION_ANNOTATION = "lemon.ai/spec-generation"
# Labels the Kubeflow training operator puts on the pods of a job.
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
CONTAINER = "pytorch"  # the container the training operator injects WORLD_SIZE, RANK, ... into
CONFIG_KEY = "train.yaml"
_MAX_NAME = 45  # KServe derives longer service and route names from an InferenceService's


def _short(prefix: str, suffix: str) -> str:
    """``<prefix>-<suffix>``, shortened with a hash when KServe's name limit would be passed."""
    name = f"{prefix}-{suffix}"
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(prefix.encode()).hexdigest()[:6]
    keep = _MAX_NAME - len(suffix) - len(digest) - 2
    return f"{prefix[:keep].rstrip('-')}-{digest}-{suffix}"


def inference_service_name(profile: str, tier: Capacity) -> str:
    """``<profile>-<tier>``, shortened with a hash when KServe's name limit would be passed."""
    return _short(profile, tier.value)


def owned_selector(profile: str) -> str:
    """Label selector of the InferenceServices a profile owns."""
    return f"app.kubernetes.io/managed-by={MANAGED_BY},{PROFILE_LABEL}={profile}"


def build_inference_service(
    profile: str, *, namespace: str, uid: str, tier: Capacity, spec: TierSpec
) -> dict[str, Any]:
    """The InferenceService serving ``tier`` of ``profile`` (huggingface runtime, vLLM args)."""
    predictor = _predictor(spec.model, served_as=tier.value, serving=spec)
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {
            "name": inference_service_name(profile, tier),
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/managed-by": MANAGED_BY,
                "app.kubernetes.io/part-of": "lemon",
                PROFILE_LABEL: profile,
                TIER_LABEL: tier.value,
            },
            "annotations": {
                "lemon.ai/cost-per-token": repr(spec.cost_per_token),
            },
            "ownerReferences": [_owner("LemonCapacityProfile", profile, uid)],
        },
        "spec": {"predictor": predictor},
    }


def _predictor(model_source: str, *, served_as: str, serving: TierSpec | PolicyServing) -> Any:
    """A huggingface-runtime predictor: a storage URI as ``storageUri``, a hub id as an arg."""
    uri = "://" in model_source
    args = [f"--model_name={served_as}"]
    if not uri:
        args.append(f"--model_id={model_source}")
    args += serving.runtime_args
    model: dict[str, Any] = {"modelFormat": {"name": "huggingface"}, "args": args}
    if uri:
        model["storageUri"] = model_source
    if serving.resources is not None:
        model["resources"] = serving.resources.model_dump(by_alias=True, exclude_none=True)
    predictor: dict[str, Any] = {"minReplicas": serving.min_replicas, "model": model}
    if serving.max_replicas is not None:
        predictor["maxReplicas"] = serving.max_replicas
    return predictor


def _owner(kind: str, name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _labels(**extra: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "app.kubernetes.io/part-of": "lemon",
        **extra,
    }


# ── policies ─────────────────────────────────────────────────────────────────────────────


def policy_inference_service_name(policy: str) -> str:
    """``<policy>-policy``, shortened like the tiers' names."""
    return _short(policy, "policy")


def build_policy_inference_service(
    policy: str,
    *,
    namespace: str,
    uid: str,
    version: PolicyVersionEntry,
    serving: PolicyServing,
) -> dict[str, Any]:
    """The InferenceService serving ``version`` of ``policy``. The version is also a predictor
    annotation, so moving to another version always makes a new revision (a rollout)."""
    predictor = _predictor(version.checkpoint, served_as=policy, serving=serving)
    predictor["annotations"] = {POLICY_VERSION_ANNOTATION: version.name}
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {
            "name": policy_inference_service_name(policy),
            "namespace": namespace,
            "labels": _labels(**{POLICY_LABEL: policy}),
            "annotations": {POLICY_VERSION_ANNOTATION: version.name},
            "ownerReferences": [_owner("LemonPolicy", policy, uid)],
        },
        "spec": {"predictor": predictor},
    }


# ── trainings ────────────────────────────────────────────────────────────────────────────


def config_map_name(training: str) -> str:
    return f"{training}-config"


def training_command(stage: str) -> list[str]:
    """What the training container runs; the Kubeflow training operator supplies WORLD_SIZE,
    RANK, MASTER_ADDR and MASTER_PORT."""
    return ["lemon", "train", stage, "--config", CONFIG_PATH]


def master_pod_selector(job: str) -> str:
    """The Master pod of a PyTorchJob, by the labels the training operator gives it."""
    return f"{JOB_NAME_LABEL}={job},{REPLICA_TYPE_LABEL}=master"


def build_training_config_map(
    training: str, *, namespace: str, uid: str, config: TrainingConfig
) -> dict[str, Any]:
    """The ConfigMap mounted at ``/etc/lemon``: the full TrainingConfig the pods run with."""
    text = yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": config_map_name(training),
            "namespace": namespace,
            "labels": _labels(**{TRAINING_LABEL: training, POLICY_LABEL: config.policy}),
            "ownerReferences": [_owner("LemonTraining", training, uid)],
        },
        "data": {CONFIG_KEY: text},
    }


def _pod_template(training: str, spec: TrainingSpec) -> dict[str, Any]:
    mounts: list[dict[str, Any]] = [
        {"name": "config", "mountPath": CONFIG_PATH.rsplit("/", 1)[0], "readOnly": True},
        {"name": "output", "mountPath": OUTPUT_MOUNT},
        {"name": "shm", "mountPath": "/dev/shm"},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": config_map_name(training)}},
        {"name": "output", "persistentVolumeClaim": {"claimName": spec.output.pvc}},
        {"name": "shm", "emptyDir": {"medium": "Memory"}},  # NCCL needs more than 64 MiB
    ]
    if spec.data.pvc is not None:
        mounts.append({"name": "data", "mountPath": DATA_MOUNT, "readOnly": True})
        volumes.append(
            {
                "name": "data",
                "persistentVolumeClaim": {"claimName": spec.data.pvc, "readOnly": True},
            }
        )
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": spec.image,
        "command": training_command(spec.stage),
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}],
        "volumeMounts": mounts,
        # result.json (checkpoint path and metrics) is how the operator learns what was made
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    if spec.image_pull_policy is not None:
        container["imagePullPolicy"] = spec.image_pull_policy
    if spec.resources is not None:
        container["resources"] = spec.resources.model_dump(by_alias=True, exclude_none=True)
    pod: dict[str, Any] = {"containers": [container], "volumes": volumes}
    if spec.service_account_name is not None:
        pod["serviceAccountName"] = spec.service_account_name
    return {
        "metadata": {"labels": _labels(**{TRAINING_LABEL: training})},
        "spec": pod,
    }


def build_pytorch_job(
    training: str, *, namespace: str, uid: str, spec: TrainingSpec
) -> dict[str, Any]:
    """The Kubeflow PyTorchJob running ``training``: one Master and ``replicas - 1`` Workers.

    ``cleanPodPolicy: None`` keeps finished pods, so the Master's termination message (the
    run's result.json) is still there when the operator reads it.
    """
    replica_specs: dict[str, Any] = {
        "Master": {
            "replicas": 1,
            "restartPolicy": "OnFailure",
            "template": _pod_template(training, spec),
        }
    }
    if spec.replicas > 1:
        replica_specs["Worker"] = {
            "replicas": spec.replicas - 1,
            "restartPolicy": "OnFailure",
            "template": _pod_template(training, spec),
        }
    run_policy: dict[str, Any] = {"cleanPodPolicy": "None", "backoffLimit": spec.backoff_limit}
    if spec.active_deadline_seconds is not None:
        run_policy["activeDeadlineSeconds"] = spec.active_deadline_seconds
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": training,
            "namespace": namespace,
            "labels": _labels(**{TRAINING_LABEL: training, POLICY_LABEL: spec.policy}),
            "ownerReferences": [_owner("LemonTraining", training, uid)],
        },
        "spec": {"runPolicy": run_policy, "pytorchReplicaSpecs": replica_specs},
    }


# ── runs ─────────────────────────────────────────────────────────────────────────────────


def trace_config_map_name(run: str) -> str:
    return f"{run}-trace"


def build_trace_config_map(run: str, *, namespace: str, uid: str, text: str) -> dict[str, Any]:
    """The ConfigMap holding a finished run's trace (JSONL under ``trace``), owned by the run:
    ``kubectl get configmap <run>-trace -o jsonpath={.data.trace} | lemon trace -``."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": trace_config_map_name(run),
            "namespace": namespace,
            "labels": _labels(**{RUN_LABEL: run}),
            "ownerReferences": [_owner("LemonRun", run, uid)],
        },
        "data": {"trace": text},
    }


def spec_run_name(spec: str, generation: int) -> str:
    """The run of a LemonSpec's task for one generation of the spec: ``<spec>-task-<g>``."""
    return f"{spec}-task-{generation}"


def build_spec_run(
    spec: str,
    *,
    namespace: str,
    uid: str,
    generation: int,
    task: str,
    body: Mapping[str, Any],
    profile: str,
) -> dict[str, Any]:
    """The LemonRun of a LemonSpec's ``task``: the spec's agents and output inline (the run
    keeps what this generation said, whatever later edits do), owned by the spec."""
    inline = {key: body[key] for key in ("agents", "output") if body.get(key) is not None}
    return {
        "apiVersion": API_VERSION,
        "kind": "LemonRun",
        "metadata": {
            "name": spec_run_name(spec, generation),
            "namespace": namespace,
            "labels": _labels(**{SPEC_LABEL: spec}),
            "annotations": {SPEC_GENERATION_ANNOTATION: str(generation)},
            "ownerReferences": [_owner("LemonSpec", spec, uid)],
        },
        "spec": {"task": task, "spec": inline, "profile": profile},
    }
