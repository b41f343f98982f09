"""The one door to the API server for the local cluster: what the stand-ins for KServe and the
Kubeflow training operator read and write (InferenceServices, PyTorchJobs, their ConfigMaps,
the Master pod), and whether the API serves a kind yet. Official ``kubernetes`` client, as the
cluster's admin (the stand-ins play cluster components, not the operator)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

__all__ = ["ISVC", "PYTORCHJOBS", "Body", "GroupVersionResource", "Kube", "KubeError"]

Body = dict[str, Any]
_MERGE = "application/merge-patch+json"


@dataclass(frozen=True, slots=True)
class GroupVersionResource:
    """A kind's API as the client addresses it: group, version and plural (its GVR)."""

    group: str
    version: str
    plural: str


ISVC = GroupVersionResource("serving.kserve.io", "v1beta1", "inferenceservices")
PYTORCHJOBS = GroupVersionResource("kubeflow.org", "v1", "pytorchjobs")


class KubeError(RuntimeError):
    """An API call failed; the message names the call and the API server's answer."""


def _failed(what: str, error: ApiException) -> KubeError:
    return KubeError(f"{what}: {error.status} {error.reason}: {str(error.body or '')[:300]}")


class Kube:
    """The API server the kubeconfig names."""

    def __init__(self, kubeconfig: Path) -> None:
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)  # type: ignore[no-untyped-call]
        api = client.ApiClient(configuration)
        self._custom = client.CustomObjectsApi(api)
        self._core = client.CoreV1Api(api)

    def served(self, resource: GroupVersionResource) -> bool:
        """Whether the API serves ``resource`` yet (its CRD established and discoverable)."""
        try:
            self._custom.list_cluster_custom_object(
                resource.group, resource.version, resource.plural, limit=1
            )
        except ApiException as error:
            if error.status == 404:
                return False
            raise _failed(f"list {resource.plural}", error) from None
        return True

    def list_all(self, resource: GroupVersionResource) -> list[Body]:
        """Every object of ``resource`` in every namespace."""
        try:
            answer = self._custom.list_cluster_custom_object(
                resource.group, resource.version, resource.plural
            )
        except ApiException as error:
            raise _failed(f"list {resource.plural}", error) from None
        items: list[Body] = cast(Body, answer).get("items", [])
        return items

    def patch_status(
        self,
        resource: GroupVersionResource,
        *,
        namespace: str,
        name: str,
        status: Mapping[str, Any],
    ) -> bool:
        """Merge-patch the status subresource; False when the object is gone."""
        try:
            self._custom.patch_namespaced_custom_object_status(
                resource.group,
                resource.version,
                namespace,
                resource.plural,
                name,
                {"status": dict(status)},
            )
        except ApiException as error:
            if error.status == 404:
                return False
            raise _failed(f"patch {resource.plural}/{name} status", error) from None
        return True

    def config_map(self, *, namespace: str, name: str) -> dict[str, str] | None:
        """A ConfigMap's data; None when there is no such ConfigMap."""
        try:
            found = self._core.read_namespaced_config_map(name, namespace)
        except ApiException as error:
            if error.status == 404:
                return None
            raise _failed(f"read configmap {namespace}/{name}", error) from None
        return dict(found.data or {})

    def record_pod(self, body: Mapping[str, Any], *, status: Mapping[str, Any]) -> None:
        """Create the pod ``body`` (replacing one of that name) with ``status``, as a kubelet
        reports a pod that ran; the namespace's ``default`` ServiceAccount, which a
        controller-manager would have made, is created when missing."""
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            self._ensure_service_account(namespace)
            try:
                self._core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
            except ApiException as error:
                if error.status != 404:
                    raise
            self._core.create_namespaced_pod(namespace, cast(Any, dict(body)))
            self._core.patch_namespaced_pod_status(
                name, namespace, {"status": dict(status)}, _content_type=_MERGE
            )
        except ApiException as error:
            raise _failed(f"record pod {namespace}/{name}", error) from None

    def _ensure_service_account(self, namespace: str) -> None:
        try:
            self._core.read_namespaced_service_account("default", namespace)
        except ApiException as error:
            if error.status != 404:
                raise
            account = {"apiVersion": "v1", "kind": "ServiceAccount"}
            account["metadata"] = {"name": "default", "namespace": namespace}  # type: ignore[assignment]
            try:
                self._core.create_namespaced_service_account(namespace, cast(Any, account))
            except ApiException as again:
                if again.status != 409:
                    raise
