"""Killing the operator mid-reconcile and starting it again converges, with no duplicates."""

from __future__ import annotations

from lemon_operator import kube
from tests.conftest import ROOT
from tests.k8s.conftest import Kubectl, Operator
from tests.k8s.test_operator import condition, waiter

SPECS = 120
SPEC = """\
apiVersion: lemon.ai/v1alpha1
kind: LemonSpec
metadata:
  name: team-{i}
spec:
  agents:
  - {{name: planner, role: planner, capacity: small}}
  - {{name: solver, role: math_solver, capacity: large, depends_on: [planner]}}
"""


def test_killed_mid_reconcile_then_restarted_converges(
    kubectl: Kubectl, operator_process: Operator, namespace: str
) -> None:
    wait = waiter(kubectl, operator_process, namespace)
    client = kube.connect(kubeconfig=kubectl.kubeconfig)

    def validated() -> int:  # through the client: a kubectl call is too slow to catch the middle
        items = client.list(kube.SPECS, namespace=namespace)
        return sum(condition(item, "Validated").get("status") == "True" for item in items)

    # The whole backlog is there when the operator starts, so killing it as soon as the first
    # spec is validated lands in the middle of the batch (and of the profile's creations).
    operator_process.kill()
    try:
        kubectl("apply", "-n", namespace, "-f", str(ROOT / "examples/k8s/01-capacity-profile.yaml"))
        kubectl("apply", "-n", namespace, "-f", "-",
                stdin="---\n".join(SPEC.format(i=i) for i in range(SPECS)))  # fmt: skip
        operator_process.start()
        wait(lambda: validated() > 0, what="the first spec validated", timeout=60)
        operator_process.kill()
        done_at_kill = validated()
    finally:
        operator_process.start()
    assert done_at_kill < SPECS, "the operator finished before it was killed; raise SPECS"

    wait(lambda: validated() == SPECS, what="every spec validated after the restart", timeout=120)
    isvcs = kubectl.json("get", "isvc", "-n", namespace)["items"]
    assert sorted(item["metadata"]["name"] for item in isvcs) == [
        "default-large", "default-medium", "default-small",
    ]  # fmt: skip
    profile = kubectl.json("get", "lcap", "default", "-n", namespace)
    assert profile["metadata"]["finalizers"] == ["lemon.ai/finalizer"]
    specs = kubectl.json("get", "lspec", "-n", namespace)["items"]
    assert all(not item["metadata"].get("finalizers") for item in specs)
    kubectl("delete", "lcap", "default", "-n", namespace, "--timeout=60s")
    wait(lambda: not kubectl.json("get", "isvc", "-n", namespace)["items"], what="cleanup")
