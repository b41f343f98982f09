"""``lemon_operator.kube`` on the real API server: 404 and 409 become outcomes, not crashes;
owned objects converge with server-side apply."""

from __future__ import annotations

import functools

import pytest

from lemon.resources import TierSpec
from lemon.spec import Capacity
from lemon_operator import kube, manifests, reconciling
from lemon_operator.reconciling import Converged
from tests.k8s.conftest import Kubectl


@pytest.fixture
def client(kubectl: Kubectl) -> kube.Client:
    return kube.connect(kubeconfig=kubectl.kubeconfig)


def test_conflicts_and_absences_are_outcomes(client: kube.Client, namespace: str) -> None:
    body = manifests.build_inference_service(
        "p", namespace=namespace, uid="uid-1", tier=Capacity.SMALL, spec=TierSpec(model="a/b")
    )
    name = body["metadata"]["name"]
    assert client.get(kube.ISVC, namespace=namespace, name=name) is None
    assert client.create(kube.ISVC, body=body) is True
    assert client.create(kube.ISVC, body=body) is False  # 409 AlreadyExists
    found = client.get(kube.ISVC, namespace=namespace, name=name)
    assert found is not None
    assert found["spec"] == body["spec"]
    selector = manifests.owned_selector("p")
    assert [i["metadata"]["name"] for i in client.list(kube.ISVC, namespace=namespace,
                                                        labels=selector)] == [name]  # fmt: skip
    assert client.patch_status(kube.ISVC, namespace=namespace, name=name, status={"url": "u"})
    assert client.get(kube.ISVC, namespace=namespace, name=name)["status"] == {"url": "u"}  # type: ignore[index]
    assert client.delete(kube.ISVC, namespace=namespace, name=name) is True
    assert client.delete(kube.ISVC, namespace=namespace, name=name) is False
    assert client.patch(kube.ISVC, namespace=namespace, name=name, patch={"spec": {}}) is False
    assert client.patch_status(kube.ISVC, namespace=namespace, name=name, status={}) is False


def test_converge_applies_the_operators_fields_and_keeps_everyone_elses(
    client: kube.Client, namespace: str, kubectl: Kubectl
) -> None:
    """Server-side apply on the real API server: created once, unchanged when it matches, a
    field the operator stops setting goes, a field another manager set (KServe's defaulting,
    here kubectl) stays."""
    spec = TierSpec(model="a/b", runtime_args=["--max-model-len=4096"])
    build = functools.partial(
        manifests.build_inference_service,
        "q",
        namespace=namespace,
        uid="uid-2",
        tier=Capacity.SMALL,
    )
    body = build(spec=spec)
    name = body["metadata"]["name"]
    assert reconciling.converge(client, kube.ISVC, manifest=body, current=None) is Converged.CREATED
    found = client.get(kube.ISVC, namespace=namespace, name=name)
    assert found is not None
    managers = {entry["manager"] for entry in found["metadata"]["managedFields"]}
    assert kube.FIELD_MANAGER in managers
    assert reconciling.converge(client, kube.ISVC, manifest=body, current=found) is (
        Converged.UNCHANGED
    )
    kubectl("label", "isvc", name, "-n", namespace, "someone-else=keeps-this")
    found = client.get(kube.ISVC, namespace=namespace, name=name)
    plain = build(spec=TierSpec(model="a/b"))  # no runtime args any more
    assert reconciling.converge(client, kube.ISVC, manifest=plain, current=found) is (
        Converged.UPDATED
    )
    after = client.get(kube.ISVC, namespace=namespace, name=name)
    assert after is not None
    assert after["spec"] == plain["spec"]
    assert after["metadata"]["labels"]["someone-else"] == "keeps-this"
    assert after["metadata"]["generation"] == found["metadata"]["generation"] + 1  # type: ignore[index]
