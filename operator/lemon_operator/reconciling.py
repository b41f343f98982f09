"""The handler kit: what every reconcile starts from and the one way to converge what it owns.

A reconcile reads its object afresh under the object's lock (:func:`reconcile`, through
:func:`lemon_operator.locking.latest`) and works on an :class:`Observed`: the object's names,
uid, generation, spec and status as read, the time of the reconcile, the reference its events
name, and a :class:`~lemon_operator.statuses.Conditions` builder stamped with that generation
and time. :func:`converge` makes an owned object (an InferenceService of a profile or a policy)
match its manifest with one server-side apply, the Kubernetes way: the API server merges what
the operator manages and leaves everyone else's fields (KServe's defaults, for one) alone.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lemon_operator import kube, locking, statuses

__all__ = ["Converged", "Observed", "converge", "reconcile"]


@dataclass(frozen=True, slots=True)
class Observed:
    """One object as a reconcile found it."""

    resource: kube.Resource
    namespace: str
    name: str
    uid: str
    generation: int
    spec: Mapping[str, Any]
    status: Mapping[str, Any]
    at: str
    """When the reconcile started (every condition it records carries this time)."""

    @classmethod
    def of(cls, resource: kube.Resource, body: Mapping[str, Any]) -> Observed:
        metadata = body["metadata"]
        return cls(
            resource=resource,
            namespace=str(metadata["namespace"]),
            name=str(metadata["name"]),
            uid=str(metadata["uid"]),
            generation=int(metadata.get("generation", 1)),
            spec=body.get("spec") or {},
            status=body.get("status") or {},
            at=statuses.now(),
        )

    @property
    def ref(self) -> kube.ObjectRef:
        """The object, as its events name it."""
        return kube.ObjectRef(self.resource, self.namespace, self.name, self.uid)

    @property
    def label(self) -> str:
        """``namespace/name``, as log lines name it."""
        return f"{self.namespace}/{self.name}"

    @property
    def conditions(self) -> statuses.Conditions:
        return statuses.Conditions(self.generation, self.at)


def reconcile(
    client: kube.Client,
    resource: kube.Resource,
    *,
    namespace: str,
    name: str,
    handler: Callable[[kube.Client, Observed], None],
) -> None:
    """``handler`` on the object as the API server has it now, under its lock; nothing when
    it is gone or being deleted (its delete handler has it)."""
    with locking.latest(client, resource, namespace=namespace, name=name) as found:
        if found is not None:
            handler(client, Observed.of(resource, found))


class Converged(enum.Enum):
    """What :func:`converge` did."""

    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


def _differs(current: Mapping[str, Any], manifest: Mapping[str, Any]) -> bool:
    """Whether ``current`` lacks something of ``manifest``: its spec, or one of its labels or
    annotations."""
    if current.get("spec") != manifest.get("spec"):
        return True
    have, want = current.get("metadata") or {}, manifest.get("metadata") or {}
    for key in ("labels", "annotations"):
        present = have.get(key) or {}
        if any(present.get(k) != v for k, v in (want.get(key) or {}).items()):
            return True
    return False


def converge(
    client: kube.Client,
    resource: kube.Resource,
    *,
    manifest: Mapping[str, Any],
    current: Mapping[str, Any] | None,
) -> Converged:
    """Make the owned object ``manifest`` names match it: nothing when ``current`` (the object
    as last read, None when absent) already does, else one server-side apply (which creates
    it, or updates only what the operator manages; a field the operator stopped setting goes)."""
    if current is not None and not _differs(current, manifest):
        return Converged.UNCHANGED
    applied = client.apply(resource, body=manifest)
    if current is None:
        return Converged.CREATED
    version = (current.get("metadata") or {}).get("resourceVersion")
    unchanged = version is not None and applied["metadata"].get("resourceVersion") == version
    return Converged.UNCHANGED if unchanged else Converged.UPDATED
