"""Pure builders of the objects the operator owns: KServe InferenceServices, one per tier."""

from __future__ import annotations

import hashlib
from typing import Any

from lemon.resources import TierSpec
from lemon.spec import Capacity

__all__ = [
    "MANAGED_BY",
    "PROFILE_LABEL",
    "TIER_LABEL",
    "build_inference_service",
    "inference_service_name",
    "owned_selector",
]

MANAGED_BY = "lemon-operator"
PROFILE_LABEL = "lemon.ai/profile"
TIER_LABEL = "lemon.ai/tier"
_MAX_NAME = 45  # KServe derives longer service and route names from an InferenceService's


def inference_service_name(profile: str, tier: Capacity) -> str:
    """``<profile>-<tier>``, shortened with a hash when KServe's name limit would be passed."""
    name = f"{profile}-{tier.value}"
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(profile.encode()).hexdigest()[:6]
    keep = _MAX_NAME - len(tier.value) - len(digest) - 2
    return f"{profile[:keep].rstrip('-')}-{digest}-{tier.value}"


def owned_selector(profile: str) -> str:
    """Label selector of the InferenceServices a profile owns."""
    return f"app.kubernetes.io/managed-by={MANAGED_BY},{PROFILE_LABEL}={profile}"


def build_inference_service(
    profile: str, *, namespace: str, uid: str, tier: Capacity, spec: TierSpec
) -> dict[str, Any]:
    """The InferenceService serving ``tier`` of ``profile`` (huggingface runtime, vLLM args)."""
    uri = "://" in spec.model
    args = [f"--model_name={tier.value}"]
    if not uri:
        args.append(f"--model_id={spec.model}")
    args += spec.runtime_args
    model: dict[str, Any] = {"modelFormat": {"name": "huggingface"}, "args": args}
    if uri:
        model["storageUri"] = spec.model
    if spec.resources is not None:
        model["resources"] = spec.resources.model_dump(by_alias=True, exclude_none=True)
    predictor: dict[str, Any] = {"minReplicas": spec.min_replicas, "model": model}
    if spec.max_replicas is not None:
        predictor["maxReplicas"] = spec.max_replicas
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
            "ownerReferences": [
                {
                    "apiVersion": "lemon.ai/v1alpha1",
                    "kind": "LemonCapacityProfile",
                    "name": profile,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"predictor": predictor},
    }
