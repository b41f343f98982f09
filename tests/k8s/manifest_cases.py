"""The KServe and Kubeflow objects the operator writes, and objects their real CRDs refuse.

Shared by the offline check of the manifests against the vendored schemas
(``tests/unit/test_vendored_crds.py``) and the check on the real API server
(``tests/k8s/test_real_schemas.py``). The cases cover every branch of the pure builders in
``lemon_operator.manifests``: each tier of the example profile (hub id and storage URI, with and
without an autoscaling ceiling), a bare tier, a tier scaled to zero with string quantities, the
example policy and a trained version on a claim, and PyTorchJobs with and without Workers, a
data claim, a deadline, a service account and a pull policy.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from lemon.resources import CapacityProfileSpec, TierSpec
from lemon.resources.lemon_policy import PolicyServing, PolicySpec, PolicyVersionEntry
from lemon.resources.lemon_training import TrainingSpec
from lemon.spec import Capacity
from lemon_operator import manifests
from tests.conftest import ROOT

__all__ = ["REFUSED", "Refused", "operator_manifests"]

UID = "00000000-0000-0000-0000-000000000001"
Manifest = dict[str, Any]


def _example(path: str) -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "examples" / path).read_text(encoding="utf-8"))["spec"])


def _training(**spec: Any) -> TrainingSpec:
    base = {
        "stage": "sft",
        "policy": "router",
        "data": {"path": "/data/rows.jsonl"},
        "output": {"pvc": "out"},
        "image": "lemon-train:1",
    }
    return TrainingSpec.model_validate({**base, **spec})


def operator_manifests(namespace: str) -> dict[str, Manifest]:
    """Every shape of InferenceService and PyTorchJob the operator builds, by case name."""
    built: dict[str, Manifest] = {}
    profile = CapacityProfileSpec.model_validate(_example("k8s/01-capacity-profile.yaml"))
    tiers: list[tuple[str, Capacity, TierSpec]] = [
        (f"isvc-{tier.value}", tier, spec) for tier, spec in profile.tiers().items()
    ]
    tiers.append(("isvc-bare", Capacity.SMALL, TierSpec(model="org/model")))
    zero = {"requests": {"cpu": "500m", "memory": "1.5Gi"}, "limits": {"cpu": "1"}}
    tiers.append(
        (
            "isvc-scale-to-zero",
            Capacity.MEDIUM,
            TierSpec.model_validate(
                {"model": "s3://bucket/m", "minReplicas": 0, "maxReplicas": 3, "resources": zero}
            ),
        )
    )
    for case, tier, spec in tiers:
        built[case] = manifests.build_inference_service(
            case.removeprefix("isvc-"), namespace=namespace, uid=UID, tier=tier, spec=spec
        )
    policy = PolicySpec.model_validate(_example("training/01-policy.yaml"))
    version = policy.version("base")
    assert version is not None
    built["isvc-policy"] = manifests.build_policy_inference_service(
        "router", namespace=namespace, uid=UID, version=version, serving=policy.serving
    )
    trained = PolicyVersionEntry(
        name="router-sft-0a1b2c3d",
        checkpoint="pvc://lemon-output/policies/router/router-sft-0a1b2c3d",
        stage="sft",
    )
    built["isvc-policy-trained"] = manifests.build_policy_inference_service(
        "trained", namespace=namespace, uid=UID, version=trained, serving=PolicyServing()
    )
    jobs = {
        "pytorchjob-sft": TrainingSpec.model_validate(_example("training/02-sft.yaml")),
        "pytorchjob-grpo": TrainingSpec.model_validate(_example("training/03-grpo.yaml")),
        "pytorchjob-minimal": _training(),
        "pytorchjob-every-option": _training(
            data={"path": "rows.jsonl", "pvc": "data"},
            replicas=4,
            imagePullPolicy="IfNotPresent",
            activeDeadlineSeconds=3600,
            serviceAccountName="trainer",
            backoffLimit=0,
            resources={"requests": {"cpu": "250m"}, "limits": {"nvidia.com/gpu": 1}},
        ),
    }
    for case, spec in jobs.items():
        built[case] = manifests.build_pytorch_job(case, namespace=namespace, uid=UID, spec=spec)
    return built


@dataclass(frozen=True, slots=True)
class Refused:
    """A manifest the real schema forbids: ``base`` (an operator case) changed by ``change``;
    the API server's answer names ``field``."""

    case: str
    base: str
    change: Callable[[Manifest], None]
    field: str

    def manifest(self, namespace: str) -> Manifest:
        body = copy.deepcopy(operator_manifests(namespace)[self.base])
        body["metadata"]["name"] = self.case
        self.change(body)
        return body


def _set(path: str, value: Any) -> Callable[[Manifest], None]:
    """Set the dotted ``path`` (``[n]`` indexes a list) to ``value``; ``None`` deletes it."""

    def change(body: Manifest) -> None:
        node: Any = body
        keys: list[str | int] = []
        for part in path.split("."):
            name, _, index = part.partition("[")
            keys.append(name)
            if index:
                keys.append(int(index.rstrip("]")))
        for key in keys[:-1]:
            node = node[key]
        if value is None:
            del node[keys[-1]]
        else:
            node[keys[-1]] = value

    return change


_MASTER = "spec.pytorchReplicaSpecs.Master"
_CONTAINER = f"{_MASTER}.template.spec.containers[0]"
REFUSED = (
    Refused("no-predictor", "isvc-small", _set("spec.predictor", None), "spec.predictor"),
    Refused(
        "replicas-not-integer",
        "isvc-small",
        _set("spec.predictor.minReplicas", "one"),
        "spec.predictor.minReplicas",
    ),
    Refused(
        "model-format-unnamed",
        "isvc-small",
        _set("spec.predictor.model.modelFormat", {"version": "1"}),
        "spec.predictor.model.modelFormat.name",
    ),
    Refused(
        "args-not-strings",
        "isvc-small",
        _set("spec.predictor.model.args", [1]),
        "spec.predictor.model.args[0]",
    ),
    Refused(
        "bad-quantity",
        "isvc-large",
        _set("spec.predictor.model.resources.limits.memory", "lots"),
        "spec.predictor.model.resources.limits.memory",
    ),
    Refused(
        "unknown-predictor-field",
        "isvc-small",
        _set("spec.predictor.model.replicas", 2),
        "spec.predictor.model.replicas",
    ),
    Refused(
        "no-replica-specs",
        "pytorchjob-minimal",
        _set("spec.pytorchReplicaSpecs", None),
        "spec.pytorchReplicaSpecs",
    ),
    Refused(
        "job-replicas-not-integer",
        "pytorchjob-minimal",
        _set(f"{_MASTER}.replicas", "one"),
        f"{_MASTER}.replicas",
    ),
    Refused("container-unnamed", "pytorchjob-minimal", _set(f"{_CONTAINER}.name", None), "name"),
    Refused(
        "mount-without-path",
        "pytorchjob-minimal",
        _set(f"{_CONTAINER}.volumeMounts[0].mountPath", None),
        "mountPath",
    ),
    Refused(
        "unknown-run-policy-field",
        "pytorchjob-minimal",
        _set("spec.runPolicy.cleanPods", "All"),
        "spec.runPolicy.cleanPods",
    ),
)
