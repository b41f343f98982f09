"""The one door to the API server: every read and write the operator makes goes through here.

:class:`Client` is the interface the handlers use; :class:`RestClient` implements it on the
official ``kubernetes`` client (synchronous; kopf runs sync handlers in threads), and
:class:`lemon_testing.fake_kube.FakeClient` in memory, for unit tests of the handlers.
``Conflict`` (409) and ``NotFound`` (404) are turned into outcomes the handlers can reason
about, in one place (:func:`_tolerating`); any other API error propagates and kopf retries the
handler. Owned objects are written with server-side apply (:meth:`Client.apply`, field manager
:data:`FIELD_MANAGER`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, cast

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from lemon.resources.crds import GROUP, PLURALS, VERSION

__all__ = [
    "BUDGETS",
    "FIELD_MANAGER",
    "ISVC",
    "POLICIES",
    "PROFILES",
    "PYTORCHJOBS",
    "RUNS",
    "SPECS",
    "TRAININGS",
    "Body",
    "Client",
    "ObjectRef",
    "PatchOutcome",
    "Resource",
    "RestClient",
    "connect",
]


@dataclass(frozen=True, slots=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


def _lemon(kind: str) -> Resource:
    return Resource(GROUP, VERSION, PLURALS[kind], kind)


SPECS = _lemon("LemonSpec")
PROFILES = _lemon("LemonCapacityProfile")
TRAININGS = _lemon("LemonTraining")
POLICIES = _lemon("LemonPolicy")
RUNS = _lemon("LemonRun")
BUDGETS = _lemon("LemonBudget")
ISVC = Resource("serving.kserve.io", "v1beta1", "inferenceservices", "InferenceService")
PYTORCHJOBS = Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob")

Body = dict[str, Any]
Bodies = list[Body]  # spelled once here: inside Client, ``list`` is a method
# Every write asks the API server to refuse fields its schema does not know, instead of pruning
# them silently (the default): a manifest KServe's or Kubeflow's CRD does not describe fails
# loudly at the write, with the field's path.
_STRICT = "Strict"
PatchOutcome = Literal["patched", "conflict", "gone"]
FIELD_MANAGER = "lemon-operator"
"""Who owns the fields the operator applies (``metadata.managedFields``)."""


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """Enough of an object to name it in an event."""

    resource: Resource
    namespace: str
    name: str
    uid: str


class Client(Protocol):
    """What the handlers ask of the API server (custom objects, InferenceServices, PyTorchJobs,
    ConfigMaps, pods and events), with 404 and 409 as outcomes."""

    def get(self, resource: Resource, *, namespace: str, name: str) -> Body | None:
        """The object, or None when it does not exist."""
        ...

    def list(self, resource: Resource, *, namespace: str, labels: str | None = None) -> Bodies:
        """The objects in ``namespace`` matching the label selector ``labels`` (``k=v,...``)."""
        ...

    def create(self, resource: Resource, *, body: Mapping[str, Any]) -> bool:
        """Create ``body``; False when an object of that name already exists (409)."""
        ...

    def apply(self, resource: Resource, *, body: Mapping[str, Any]) -> Body:
        """Server-side apply ``body`` (a full manifest) as :data:`FIELD_MANAGER`, taking over
        conflicting fields: created if absent, else its managed fields made to match (one the
        manifest no longer sets is removed). The object as stored afterwards."""
        ...

    def patch(
        self, resource: Resource, *, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> bool:
        """Merge-patch the object; False when it is gone."""
        ...

    def patch_unless_changed(
        self,
        resource: Resource,
        *,
        namespace: str,
        name: str,
        resource_version: str,
        patch: Mapping[str, Any],
    ) -> PatchOutcome:
        """Merge-patch the object only if it is still at ``resource_version``."""
        ...

    def create_config_map(self, *, body: Mapping[str, Any]) -> bool:
        """Create a ConfigMap; False when one of that name already exists (409)."""
        ...

    def delete_config_map(self, *, namespace: str, name: str) -> bool:
        """Delete a ConfigMap; False when it was already gone."""
        ...

    def list_pods(self, *, namespace: str, labels: str) -> Bodies:
        """The pods matching ``labels``, as plain JSON objects (camelCase keys)."""
        ...

    def patch_status(
        self, resource: Resource, *, namespace: str, name: str, status: Mapping[str, Any]
    ) -> bool:
        """Merge-patch the status subresource; False when the object is gone."""
        ...

    def delete(self, resource: Resource, *, namespace: str, name: str) -> bool:
        """Delete the object; False when it was already gone."""
        ...

    def emit_event(
        self, ref: ObjectRef, *, reason: str, message: str, warning: bool = False
    ) -> None:
        """Record a core/v1 Event on the object (``kubectl describe`` shows it)."""
        ...


def connect(*, kubeconfig: Path | None = None, pool_size: int = 32) -> RestClient:
    """A client from ``kubeconfig`` if given, else the in-cluster service account, else the
    kubeconfig named by ``KUBECONFIG`` (or ``~/.kube/config``)."""
    configuration = client.Configuration()
    if kubeconfig is None:
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except config.ConfigException:
            kubeconfig = Path(os.environ.get("KUBECONFIG", "~/.kube/config")).expanduser()
    if kubeconfig is not None:
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)  # type: ignore[no-untyped-call]
    configuration.connection_pool_maxsize = pool_size
    return RestClient(client.ApiClient(configuration))


class _Answer:
    """What a tolerated call came to: ``status`` None when it succeeded, else the tolerated
    HTTP status it failed with."""

    status: int | None = None

    @property
    def ok(self) -> bool:
        return self.status is None


@contextlib.contextmanager
def _tolerating(*statuses: int) -> Iterator[_Answer]:
    """Run the block; an ``ApiException`` with one of ``statuses`` (404 gone, 409 taken or
    changed) is an answer, any other error propagates."""
    answer = _Answer()
    try:
        yield answer
    except ApiException as error:
        if int(error.status or 0) not in statuses:
            raise
        answer.status = int(error.status or 0)


_GONE, _TAKEN = 404, 409


class RestClient:
    """:class:`Client` over the API server's REST API (the official ``kubernetes`` client)."""

    def __init__(self, api: client.ApiClient) -> None:
        self._custom = client.CustomObjectsApi(api)
        self._core = client.CoreV1Api(api)

    def get(self, resource: Resource, *, namespace: str, name: str) -> Body | None:
        """The object, or None when it does not exist."""
        found: Body | None = None
        with _tolerating(_GONE) as answer:
            found = cast(
                Body,
                self._custom.get_namespaced_custom_object(
                    resource.group, resource.version, namespace, resource.plural, name
                ),
            )
        return found if answer.ok else None

    def list(self, resource: Resource, *, namespace: str, labels: str | None = None) -> list[Body]:
        answer: Body = self._custom.list_namespaced_custom_object(  # type: ignore[assignment]
            resource.group,
            resource.version,
            namespace,
            resource.plural,
            label_selector=labels or "",
        )
        items: list[Body] = answer.get("items", [])
        return items

    def create(self, resource: Resource, *, body: Mapping[str, Any]) -> bool:
        """Create ``body``; False when an object of that name already exists (409)."""
        with _tolerating(_TAKEN) as answer:
            self._custom.create_namespaced_custom_object(
                resource.group,
                resource.version,
                body["metadata"]["namespace"],
                resource.plural,
                dict(body),
                field_validation=_STRICT,
            )
        return answer.ok

    def apply(self, resource: Resource, *, body: Mapping[str, Any]) -> Body:
        """Server-side apply (``application/apply-patch+yaml``; JSON is YAML), forced."""
        metadata = body["metadata"]
        applied = self._custom.patch_namespaced_custom_object(
            resource.group,
            resource.version,
            metadata["namespace"],
            resource.plural,
            metadata["name"],
            dict(body),
            field_manager=FIELD_MANAGER,
            force=True,
            field_validation=_STRICT,
            _content_type="application/apply-patch+yaml",
        )
        return cast(Body, applied)

    def patch(
        self, resource: Resource, *, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> bool:
        """Merge-patch the object; False when it is gone."""
        with _tolerating(_GONE) as answer:
            self._custom.patch_namespaced_custom_object(
                resource.group,
                resource.version,
                namespace,
                resource.plural,
                name,
                dict(patch),
                field_validation=_STRICT,
            )
        return answer.ok

    def patch_unless_changed(
        self,
        resource: Resource,
        *,
        namespace: str,
        name: str,
        resource_version: str,
        patch: Mapping[str, Any],
    ) -> PatchOutcome:
        """Merge-patch the object only if it is still at ``resource_version`` (optimistic
        concurrency: the API server answers 409 when someone wrote it in between)."""
        guarded = {
            **patch,
            "metadata": {**patch.get("metadata", {}), "resourceVersion": resource_version},
        }
        with _tolerating(_GONE, _TAKEN) as answer:
            self._custom.patch_namespaced_custom_object(
                resource.group,
                resource.version,
                namespace,
                resource.plural,
                name,
                guarded,
                field_validation=_STRICT,
            )
        outcomes: dict[int | None, PatchOutcome] = {
            None: "patched",
            _GONE: "gone",
            _TAKEN: "conflict",
        }
        return outcomes[answer.status]

    def create_config_map(self, *, body: Mapping[str, Any]) -> bool:
        """Create a ConfigMap; False when one of that name already exists (409)."""
        with _tolerating(_TAKEN) as answer:
            self._core.create_namespaced_config_map(
                body["metadata"]["namespace"], cast(Any, dict(body)), field_validation=_STRICT
            )
        return answer.ok

    def delete_config_map(self, *, namespace: str, name: str) -> bool:
        """Delete a ConfigMap; False when it was already gone."""
        with _tolerating(_GONE) as answer:
            self._core.delete_namespaced_config_map(name, namespace)
        return answer.ok

    def list_pods(self, *, namespace: str, labels: str) -> Bodies:
        """The pods matching ``labels``, as plain JSON objects (camelCase keys)."""
        answer = self._core.list_namespaced_pod(namespace, label_selector=labels)
        items: Bodies = self._core.api_client.sanitize_for_serialization(answer.items)
        return items

    def patch_status(
        self, resource: Resource, *, namespace: str, name: str, status: Mapping[str, Any]
    ) -> bool:
        """Merge-patch the status subresource; False when the object is gone."""
        with _tolerating(_GONE) as answer:
            self._custom.patch_namespaced_custom_object_status(
                resource.group,
                resource.version,
                namespace,
                resource.plural,
                name,
                {"status": dict(status)},
                field_validation=_STRICT,
            )
        return answer.ok

    def delete(self, resource: Resource, *, namespace: str, name: str) -> bool:
        """Delete the object; False when it was already gone."""
        with _tolerating(_GONE) as answer:
            self._custom.delete_namespaced_custom_object(
                resource.group, resource.version, namespace, resource.plural, name
            )
        return answer.ok

    def emit_event(
        self, ref: ObjectRef, *, reason: str, message: str, warning: bool = False
    ) -> None:
        """Record a core/v1 Event on the object (``kubectl describe`` shows it)."""
        now = dt.datetime.now(dt.UTC)
        event = client.CoreV1Event(
            metadata=client.V1ObjectMeta(
                name=f"{ref.name}.{uuid.uuid4().hex[:12]}", namespace=ref.namespace
            ),
            involved_object=client.V1ObjectReference(
                api_version=ref.resource.api_version,
                kind=ref.resource.kind,
                name=ref.name,
                namespace=ref.namespace,
                uid=ref.uid,
            ),
            reason=reason,
            message=message[:1024],
            type="Warning" if warning else "Normal",
            first_timestamp=now,
            last_timestamp=now,
            count=1,
            source=client.V1EventSource(component="lemon-operator"),
            reporting_component="lemon-operator",
        )
        self._core.create_namespaced_event(ref.namespace, event)
