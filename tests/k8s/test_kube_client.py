"""``lemon_operator.kube`` on the real API server: 404 and 409 become outcomes, not crashes."""

from __future__ import annotations

import pytest

from lemon.resources import TierSpec
from lemon.spec import Capacity
from lemon_operator import kube, manifests
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
