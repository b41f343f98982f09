"""The installed kubectl and helm talk to the test control plane."""

from __future__ import annotations

import subprocess

from tests.k8s.conftest import BIN, Kubectl


def test_kubectl_and_helm_reach_the_api_server(kubectl: Kubectl) -> None:
    assert "Server Version: v1.35.4" in kubectl("version").stdout
    helm = subprocess.run(
        [str(BIN / "helm"), "list", "--all-namespaces", f"--kubeconfig={kubectl.kubeconfig}"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert helm.returncode == 0, helm.stderr
    assert helm.stdout.split()[:2] == ["NAME", "NAMESPACE"]
