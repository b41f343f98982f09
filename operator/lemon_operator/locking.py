"""How a reconcile reads its object: afresh, under a lock of its own, and only while it lives.

Several triggers can reconcile one object at once (its own events, a resume after a restart,
an InferenceService or PyTorchJob of it changing). Each reads the object again under a lock per
kind, namespace and name, so a slower one never records a stale view over a fresher one; an
object being deleted is left to its delete handler.
"""

from __future__ import annotations

import contextlib
import threading
from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import Any, TypeGuard, TypeVar

from lemon_operator import kube

__all__ = ["latest", "live"]

B = TypeVar("B", bound=Mapping[str, Any])
_locks: defaultdict[tuple[str, str, str], threading.Lock] = defaultdict(threading.Lock)


def live(body: B | None) -> TypeGuard[B]:
    """True when the object exists and is not being deleted."""
    return body is not None and not body.get("metadata", {}).get("deletionTimestamp")


@contextlib.contextmanager
def latest(
    client: kube.Client, resource: kube.Resource, *, namespace: str, name: str
) -> Iterator[kube.Body | None]:
    """The object as the API server has it now, held under its lock for the block; None when
    it is gone or being deleted."""
    with _locks[(resource.plural, namespace, name)]:
        found = client.get(resource, namespace=namespace, name=name)
        yield found if live(found) else None
