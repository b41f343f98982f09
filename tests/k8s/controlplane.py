"""The real Kubernetes control plane (kube-apiserver + etcd) the ``k8s`` tier runs on.

It lives in :mod:`lemon_cluster.controlplane`, which ``lemon cluster up`` starts too; this
module keeps the names the tests and benchmarks import and the command
``python -m tests.k8s.controlplane build|install-tools|start`` (``build`` builds both binaries
once through the Go module proxy into ``~/.cache/lemon/controlplane/<version>/``;
``install-tools`` puts static ``kubectl`` and ``helm`` into ``.venv/bin/``).
"""

from __future__ import annotations

from lemon_cluster.controlplane import (
    ETCD_VERSION,
    KUBE_VERSION,
    ControlPlane,
    ControlPlaneError,
    cache_dir,
    ensure_binaries,
    ensure_tools,
)
from lemon_cluster.controlplane import main as _main

__all__ = [
    "ETCD_VERSION",
    "KUBE_VERSION",
    "ControlPlane",
    "ControlPlaneError",
    "cache_dir",
    "ensure_binaries",
    "ensure_tools",
    "main",
]


def main(argv: list[str] | None = None) -> int:
    return _main(argv, prog="python -m tests.k8s.controlplane")


if __name__ == "__main__":
    raise SystemExit(main())
