"""An in-memory :class:`~lemon_operator.kube.Client`, for unit tests of the handlers.

Like httpx's ``MockTransport``: the same interface as the real client, no server behind it.
It keeps what the handlers rely on from the API server: names unique per kind and namespace
(a second create is a conflict), ``uid``, ``resourceVersion`` (bumped by every write, and
checked by :meth:`FakeClient.patch_unless_changed`), ``generation`` (bumped when ``spec``
changes), merge patches (RFC 7386: ``null`` deletes a key), a status that only the status
subresource writes, and deletion that waits for finalizers (``deletionTimestamp``). Label
selectors are equality lists (``k=v,k2=v2``), the only form the operator uses.

Server-side apply (:meth:`FakeClient.apply`) is modelled for one field manager, the operator,
owning what it applies: the applied ``spec`` replaces the stored one, applied labels,
annotations and owner references are merged in. Not modelled: other managers' fields,
admission, schema validation, watches, garbage collection through owner references. The k8s
test tier runs the same handlers against a real kube-apiserver.
"""

from __future__ import annotations

import copy
import datetime as dt
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lemon_operator.kube import Bodies, Body, ObjectRef, PatchOutcome, Resource

if TYPE_CHECKING:
    from lemon_operator.kube import Client

__all__ = ["FakeClient", "RecordedEvent", "merge_patch"]

_CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap")
_PODS = Resource("", "v1", "pods", "Pod")


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    ref: ObjectRef
    reason: str
    message: str
    warning: bool


def merge_patch(target: Any, patch: Any) -> Any:
    """``target`` with ``patch`` applied as a JSON merge patch (RFC 7386)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    merged = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def _matches(body: Body, labels: str | None) -> bool:
    have = body.get("metadata", {}).get("labels") or {}
    for term in filter(None, (labels or "").split(",")):
        key, _, value = term.partition("=")
        if have.get(key) != value:
            return False
    return True


class FakeClient:
    """:class:`~lemon_operator.kube.Client` over dictionaries, one per kind and namespace."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], Body] = {}
        """Every object by (plural, namespace, name)."""
        self.events: list[RecordedEvent] = []
        self.writes = 0
        """Writes that changed something (creates, patches, deletes)."""
        self._version = 0

    # ── what tests use to arrange the world ────────────────────────────────────────────────

    def put(self, resource: Resource, body: Mapping[str, Any]) -> Body:
        """Store ``body`` (its status included) as if the API server had it; returns it."""
        stored = self._admit(resource, body)
        self.objects[self._key(resource, stored)] = stored
        return copy.deepcopy(stored)

    def add_pod(self, body: Mapping[str, Any]) -> Body:
        return self.put(_PODS, body)

    def set_status(
        self, resource: Resource, *, namespace: str, name: str, status: Mapping[str, Any]
    ) -> None:
        """Replace the object's status, as its own controller would."""
        found = self.objects[(resource.plural, namespace, name)]
        found["status"] = copy.deepcopy(dict(status))
        self._touch(found)

    def replace_spec(
        self, resource: Resource, *, namespace: str, name: str, spec: Mapping[str, Any]
    ) -> bool:
        """Replace ``spec`` wholesale, as ``kubectl replace`` or an edit would."""
        found = self.objects.get((resource.plural, namespace, name))
        if found is None:
            return False
        if found.get("spec") != spec:
            found["spec"] = copy.deepcopy(dict(spec))
            found["metadata"]["generation"] += 1
            self._touch(found)
        return True

    def stored(self, resource: Resource, *, namespace: str, name: str) -> Body | None:
        """The object as stored (not a copy), or None."""
        return self.objects.get((resource.plural, namespace, name))

    def all(self, resource: Resource, *, namespace: str) -> Bodies:
        return [
            copy.deepcopy(body)
            for (plural, ns, _), body in sorted(self.objects.items())
            if plural == resource.plural and ns == namespace
        ]

    def event_reasons(self) -> list[str]:
        return [event.reason for event in self.events]

    # ── kube.Client ────────────────────────────────────────────────────────────────────────

    def get(self, resource: Resource, *, namespace: str, name: str) -> Body | None:
        found = self.objects.get((resource.plural, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def list(self, resource: Resource, *, namespace: str, labels: str | None = None) -> Bodies:
        return [body for body in self.all(resource, namespace=namespace) if _matches(body, labels)]

    def create(self, resource: Resource, *, body: Mapping[str, Any]) -> bool:
        key = (resource.plural, body["metadata"]["namespace"], body["metadata"]["name"])
        if key in self.objects:
            return False
        stored = self._admit(resource, {k: v for k, v in body.items() if k != "status"})
        self.objects[key] = stored
        self.writes += 1
        return True

    def apply(self, resource: Resource, *, body: Mapping[str, Any]) -> Body:
        key = self._key(resource, body)
        found = self.objects.get(key)
        if found is None:
            self.create(resource, body=body)
            return copy.deepcopy(self.objects[key])
        metadata = {
            field: body["metadata"][field]
            for field in ("labels", "annotations", "ownerReferences")
            if field in body["metadata"]
        }
        merged = merge_patch(found, {"metadata": metadata})
        merged["spec"] = copy.deepcopy(body.get("spec"))
        if merged != found:
            if merged["spec"] != found.get("spec"):
                merged["metadata"]["generation"] = found["metadata"]["generation"] + 1
            found.clear()
            found.update(merged)
            self._touch(found)
        return copy.deepcopy(found)

    def patch(
        self, resource: Resource, *, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> bool:
        found = self.objects.get((resource.plural, namespace, name))
        if found is None:
            return False
        self._write(found, {k: v for k, v in patch.items() if k != "status"})
        return True

    def patch_unless_changed(
        self,
        resource: Resource,
        *,
        namespace: str,
        name: str,
        resource_version: str,
        patch: Mapping[str, Any],
    ) -> PatchOutcome:
        found = self.objects.get((resource.plural, namespace, name))
        if found is None:
            return "gone"
        if found["metadata"]["resourceVersion"] != resource_version:
            return "conflict"
        metadata = {
            k: v for k, v in (patch.get("metadata") or {}).items() if k != "resourceVersion"
        }
        rest = {k: v for k, v in patch.items() if k not in ("metadata", "status")}
        self._write(found, {**rest, **({"metadata": metadata} if metadata else {})})
        return "patched"

    def create_config_map(self, *, body: Mapping[str, Any]) -> bool:
        return self.create(_CONFIG_MAPS, body=body)

    def delete_config_map(self, *, namespace: str, name: str) -> bool:
        return self.delete(_CONFIG_MAPS, namespace=namespace, name=name)

    def list_pods(self, *, namespace: str, labels: str) -> Bodies:
        return self.list(_PODS, namespace=namespace, labels=labels)

    def patch_status(
        self, resource: Resource, *, namespace: str, name: str, status: Mapping[str, Any]
    ) -> bool:
        found = self.objects.get((resource.plural, namespace, name))
        if found is None:
            return False
        merged = merge_patch(found.get("status") or {}, dict(status))
        if merged != found.get("status"):
            found["status"] = merged
            self._touch(found)
        return True

    def delete(self, resource: Resource, *, namespace: str, name: str) -> bool:
        key = (resource.plural, namespace, name)
        found = self.objects.get(key)
        if found is None:
            return False
        if found["metadata"].get("finalizers"):
            found["metadata"].setdefault("deletionTimestamp", _now())
            self._touch(found)
        else:
            del self.objects[key]
            self.writes += 1
        return True

    def emit_event(
        self, ref: ObjectRef, *, reason: str, message: str, warning: bool = False
    ) -> None:
        self.events.append(RecordedEvent(ref, reason, message[:1024], warning))

    # ── the API server's bookkeeping ───────────────────────────────────────────────────────

    @staticmethod
    def _key(resource: Resource, body: Mapping[str, Any]) -> tuple[str, str, str]:
        return resource.plural, body["metadata"]["namespace"], body["metadata"]["name"]

    def _admit(self, resource: Resource, body: Mapping[str, Any]) -> Body:
        stored: Body = copy.deepcopy(dict(body))
        metadata = stored.setdefault("metadata", {})
        metadata.setdefault("uid", str(uuid.uuid4()))
        metadata.setdefault("generation", 1)
        metadata.setdefault("creationTimestamp", _now())
        if resource.group:
            stored.setdefault("apiVersion", f"{resource.group}/{resource.version}")
        else:
            stored.setdefault("apiVersion", resource.version)
        stored.setdefault("kind", resource.kind)
        self._version += 1
        metadata["resourceVersion"] = str(self._version)
        return stored

    def _write(self, found: Body, patch: Mapping[str, Any]) -> None:
        merged = merge_patch(found, dict(patch))
        if merged == found:
            return
        if merged.get("spec") != found.get("spec"):
            merged["metadata"]["generation"] = found["metadata"]["generation"] + 1
        found.clear()
        found.update(merged)
        self._touch(found)

    def _touch(self, found: Body) -> None:
        self._version += 1
        found["metadata"]["resourceVersion"] = str(self._version)
        self.writes += 1


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


if TYPE_CHECKING:
    _implements: Client = FakeClient()
