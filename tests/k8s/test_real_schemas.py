"""The operator's InferenceServices and PyTorchJobs on an API server holding KServe's and
Kubeflow's real CRDs (``tests/k8s/fixtures/SOURCES.json``): every shape the builders produce is
accepted and stored as built (nothing pruned or changed; the only additions are the defaults the
schemas declare, listed here), and what the
schemas forbid is refused with the offending field's path, through the operator's own client
(``lemon_operator.kube``, which asks for strict field validation on every write)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from lemon_operator import kube
from tests.k8s.conftest import Kubectl
from tests.k8s.manifest_cases import REFUSED, Refused, operator_manifests

RESOURCES = {"InferenceService": kube.ISVC, "PyTorchJob": kube.PYTORCHJOBS}
# What the API server adds from the schemas' ``default:`` keywords to what the operator writes.
DEFAULTED = {"InferenceService": {}, "PyTorchJob": {"spec.runPolicy.suspend": False}}


def _leaves(node: Any, path: str) -> dict[str, Any]:
    if isinstance(node, dict) and node:
        found: dict[str, Any] = {}
        for key, value in node.items():
            found.update(_leaves(value, f"{path}.{key}"))
        return found
    if isinstance(node, list) and node:
        found = {}
        for index, value in enumerate(node):
            found.update(_leaves(value, f"{path}[{index}]"))
        return found
    return {path: node}


@pytest.fixture(scope="module")
def client(kubectl: Kubectl) -> kube.Client:
    return kube.connect(kubeconfig=kubectl.kubeconfig)


@pytest.fixture(scope="module")
def shared_namespace(kubectl: Kubectl) -> str:
    kubectl("create", "namespace", "real-schemas")
    return "real-schemas"


@pytest.mark.parametrize("case", sorted(operator_manifests("real-schemas")))
def test_operator_manifests_are_stored_as_built(
    client: kube.Client, shared_namespace: str, case: str
) -> None:
    body = operator_manifests(shared_namespace)[case]
    resource = RESOURCES[body["kind"]]
    assert client.create(resource, body=body) is True
    stored = client.get(resource, namespace=shared_namespace, name=body["metadata"]["name"])
    assert stored is not None
    built, kept = _leaves(body["spec"], "spec"), _leaves(stored["spec"], "spec")
    assert {path: kept.get(path, "<pruned>") for path in built} == built
    assert {path: kept[path] for path in kept.keys() - built} == DEFAULTED[body["kind"]]
    for key in ("labels", "annotations", "ownerReferences"):
        assert stored["metadata"].get(key) == body["metadata"].get(key), key


@pytest.mark.parametrize("refused", REFUSED, ids=lambda refused: refused.case)
def test_what_the_real_schemas_forbid_is_refused(
    client: kube.Client, shared_namespace: str, refused: Refused
) -> None:
    body = refused.manifest(shared_namespace)
    resource = RESOURCES[body["kind"]]
    with pytest.raises(ApiException) as raised:
        client.create(resource, body=body)
    assert raised.value.status in (400, 422), raised.value.body  # strict decoding, invalid
    assert refused.field in _k8s_paths(str(raised.value.body)), raised.value.body
    assert client.get(resource, namespace=shared_namespace, name=refused.case) is None


def _k8s_paths(message: str) -> str:
    """The API server writes a map key as ``[Master]``; the cases use dotted paths."""
    return message.replace("[Master]", ".Master")


def test_without_strict_validation_an_unknown_field_is_silently_dropped(
    kubectl: Kubectl, shared_namespace: str
) -> None:
    """Why the operator's writes are strict: by default the API server prunes what a structural
    schema does not know and stores the rest, so a misspelt field would go unnoticed."""
    unknown = next(r for r in REFUSED if r.case == "unknown-predictor-field")
    body: dict[str, Any] = unknown.manifest(shared_namespace)
    body["metadata"]["name"] = "pruned"
    api = k8s_config.new_client_from_config(config_file=str(kubectl.kubeconfig))
    custom = k8s.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(
        "serving.kserve.io", "v1beta1", shared_namespace, "inferenceservices", body,
        field_validation="Ignore",
    )  # fmt: skip
    stored = kubectl.json("get", "isvc", "pruned", "-n", shared_namespace)
    assert "replicas" not in stored["spec"]["predictor"]["model"]
    del body["spec"]["predictor"]["model"]["replicas"]
    assert stored["spec"] == body["spec"]
