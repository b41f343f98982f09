"""Following every object of a kind as the API server changes it: list, then watch from the
list's resourceVersion, and list again whenever the server ends a watch (the benchmarks'
timestamps of "Ready" or "Succeeded" come from here)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["custom_objects", "follow"]


def custom_objects(kubeconfig: Path, *, pool: int = 32) -> Any:
    """A ``kubernetes.client.CustomObjectsApi`` for ``kubeconfig``, ``pool`` connections wide."""
    from kubernetes import client, config

    config.load_kube_config(config_file=str(kubeconfig))
    configuration = client.Configuration.get_default_copy()
    configuration.connection_pool_maxsize = pool
    return client.CustomObjectsApi(client.ApiClient(configuration))


def follow(
    custom: Any,
    *,
    group: str,
    version: str,
    namespace: str,
    plural: str,
    seen: Callable[[dict[str, Any]], None],
    done: Callable[[], bool],
    timeout: float = 600.0,
) -> None:
    """Call ``seen`` with each object (listed, then as watched) until ``done()`` or ``timeout``
    seconds; ``custom`` is a ``kubernetes.client.CustomObjectsApi``."""
    from kubernetes import watch

    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        listed = custom.list_namespaced_custom_object(group, version, namespace, plural)
        for obj in listed["items"]:
            seen(obj)
        stream = watch.Watch().stream(
            custom.list_namespaced_custom_object, group, version, namespace, plural,
            resource_version=listed["metadata"]["resourceVersion"], timeout_seconds=60,
        )  # fmt: skip
        for event in stream:
            seen(event["object"])
            if done():
                break
