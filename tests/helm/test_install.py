"""``helm install`` of both charts into a real kube-apiserver (its own control plane, so the
CRDs and roles the chart creates do not meet the k8s tier's hand-applied ones).

There are no nodes: Deployments are stored but no pod runs. What is checked is what the API
server accepted and holds: the CRDs Established, the default LemonCapacityProfile accepted by its
CRD's schema (and a bad one refused), the Deployments' security contexts and probes, the gRPC
Service, and the RBAC decisions the real authorizer makes for both service accounts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT
from tests.helm.charts import APP, CRDS, VALUES, helm, operator_rules, render
from tests.k8s.conftest import Kubectl
from tests.k8s.controlplane import ControlPlane, ControlPlaneError, ensure_binaries
from tests.k8s.vendored_crds import INFERENCESERVICE_CRD

pytestmark = pytest.mark.k8s

NAMESPACE = "lemon"
OPERATOR_SA = f"system:serviceaccount:{NAMESPACE}:lemon-operator"
SERVICE_SA = f"system:serviceaccount:{NAMESPACE}:lemon-service"


def _crd_names() -> list[str]:
    return sorted(
        yaml.safe_load(path.read_text(encoding="utf-8"))["metadata"]["name"]
        for path in (ROOT / "crds").glob("*.yaml")
    )


@pytest.fixture(scope="module")
def cluster() -> Iterator[Kubectl]:
    try:
        plane = ControlPlane(ensure_binaries())
        plane.start()
    except ControlPlaneError as error:
        pytest.fail(f"the chart install tests need a control plane: {error}", pytrace=False)
    try:
        yield Kubectl(plane.kubeconfig)
    finally:
        plane.cleanup()


@pytest.fixture(scope="module")
def installed(cluster: Kubectl) -> Kubectl:
    """Both charts installed as a user would: the CRDs first, then the app into ``lemon``.
    KServe, a prerequisite, is stood for by its real InferenceService CRD (no controller)."""
    config = cluster.kubeconfig
    cluster("apply", "--server-side", "-f", str(INFERENCESERVICE_CRD))
    helm("install", "lemon-crds", str(CRDS), "--namespace=default", kubeconfig=config)
    cluster.wait_established(*_crd_names(), "inferenceservices.serving.kserve.io")
    deadline = time.monotonic() + 60  # Established comes before discovery serves the kind
    while cluster("explain", "lemoncapacityprofile.spec", check=False).returncode != 0:
        if time.monotonic() > deadline:
            pytest.fail("the API server never published the LemonCapacityProfile schema")
        time.sleep(0.5)
    helm(
        "install", "lemon", str(APP), f"--namespace={NAMESPACE}", "--create-namespace",
        kubeconfig=config,
    )  # fmt: skip
    return cluster


def _get(kubectl: Kubectl, *args: str) -> Any:
    return kubectl.json("get", *args)


def _can(kubectl: Kubectl, user: str, *args: str) -> bool:
    proc = kubectl("auth", "can-i", *args, f"--as={user}", check=False)
    assert proc.stdout.strip() in {"yes", "no"}, proc.stdout + proc.stderr
    return proc.stdout.strip() == "yes"


def test_crds_are_established_and_kept_by_the_release(installed: Kubectl) -> None:
    for name in _crd_names():
        crd = _get(installed, "crd", name)
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions["Established"] == "True", name
        annotations = crd["metadata"]["annotations"]
        assert annotations["meta.helm.sh/release-name"] == "lemon-crds"
        assert annotations["helm.sh/resource-policy"] == "keep"


def test_default_capacity_profile_was_accepted_as_rendered(installed: Kubectl) -> None:
    stored = _get(installed, "lemoncapacityprofile", "default", f"--namespace={NAMESPACE}")
    rendered = next(obj for obj in render(APP) if obj["kind"] == "LemonCapacityProfile")
    assert stored["spec"] == json.loads(json.dumps(rendered["spec"]))
    assert set(stored["spec"]) == {"small", "medium", "large"}


def test_default_lemon_policy_was_accepted_as_rendered(installed: Kubectl) -> None:
    stored = _get(installed, "lemonpolicy", "lemon-default", f"--namespace={NAMESPACE}")
    rendered = next(obj for obj in render(APP) if obj["kind"] == "LemonPolicy")
    assert stored["spec"] == json.loads(json.dumps(rendered["spec"]))
    assert stored["spec"]["default"] is True
    assert stored["spec"]["servedVersion"] == "best-fixed-team"
    listed = installed("get", "lpol", f"--namespace={NAMESPACE}").stdout.splitlines()
    assert listed[0].split()[:2] == ["NAME", "DEFAULT"]
    assert listed[1].split()[:2] == ["lemon-default", "true"]


def test_a_profile_its_crd_rules_refuse_fails_the_install(installed: Kubectl) -> None:
    proc = helm(
        "install", "refused", str(APP), "--namespace=refused", "--create-namespace",
        "--set=operator.enabled=false", "--set=service.enabled=false",
        "--set=capacityProfile.spec.small.minReplicas=3",
        "--set=capacityProfile.spec.small.maxReplicas=1",
        kubeconfig=installed.kubeconfig, check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "maxReplicas must be at least minReplicas" in proc.stderr, proc.stderr
    assert not installed.json("get", "lemoncapacityprofiles", "--namespace=refused")["items"]


def test_deployments_hold_the_security_context_probes_and_images(installed: Kubectl) -> None:
    deployments = {
        d["metadata"]["name"]: d
        for d in _get(installed, "deployments", f"--namespace={NAMESPACE}")["items"]
    }
    assert set(deployments) == {"lemon-operator", "lemon-service"}
    for name, deployment in deployments.items():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["serviceAccountName"] == name
        (container,) = pod["containers"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
        assert container["image"].endswith(":0.1.0")
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            assert probe in container, f"{name}: no {probe}"
    (service,) = deployments["lemon-service"]["spec"]["template"]["spec"]["containers"]
    assert service["livenessProbe"]["grpc"]["port"] == 50051
    (operator,) = deployments["lemon-operator"]["spec"]["template"]["spec"]["containers"]
    assert operator["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_service_exposes_the_grpc_and_metrics_ports(installed: Kubectl) -> None:
    service = _get(installed, "service", "lemon-service", f"--namespace={NAMESPACE}")
    port, metrics = service["spec"]["ports"]
    assert (port["name"], port["port"], port["targetPort"]) == ("grpc", 50051, "grpc")
    assert port["appProtocol"] == "grpc"
    assert (metrics["name"], metrics["port"], metrics["targetPort"]) == ("metrics", 9090, "metrics")
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "service"


def test_operator_role_is_the_generated_least_privilege_role(installed: Kubectl) -> None:
    role = _get(installed, "clusterrole", "lemon-operator")
    assert role["rules"] == operator_rules()
    allowed = [
        ("patch", "lemonspecs.lemon.ai", "--all-namespaces"),
        ("patch", "lemonspecs.lemon.ai", "--subresource=status", "--all-namespaces"),
        ("create", "inferenceservices.serving.kserve.io", "--namespace=team-a"),
        ("create", "events", "--namespace=team-a"),
        ("watch", "customresourcedefinitions.apiextensions.k8s.io"),
        ("create", "lemonruns.lemon.ai", "--namespace=team-a"),  # a LemonSpec's task
        ("patch", "lemonruns.lemon.ai", "--subresource=status", "--all-namespaces"),
        ("create", "configmaps", "--namespace=team-a"),  # a run's trace
    ]
    denied = [
        ("delete", "lemonspecs.lemon.ai", "--all-namespaces"),
        ("update", "lemonruns.lemon.ai", "--all-namespaces"),
        ("get", "secrets", "--namespace=team-a"),
        ("create", "deployments.apps", f"--namespace={NAMESPACE}"),
        ("create", "customresourcedefinitions.apiextensions.k8s.io"),
    ]
    for check in allowed:
        assert _can(installed, OPERATOR_SA, *check), f"operator may not {check}"
    for check in denied:
        assert not _can(installed, OPERATOR_SA, *check), f"operator may {check}"


def test_service_account_only_reads_profiles_in_its_namespace(installed: Kubectl) -> None:
    for verb in ("get", "list", "watch"):
        assert _can(installed, SERVICE_SA, verb, "lemoncapacityprofiles.lemon.ai",
                    f"--namespace={NAMESPACE}")  # fmt: skip
    denied = [
        ("get", "lemoncapacityprofiles.lemon.ai", "--namespace=team-a"),
        ("patch", "lemoncapacityprofiles.lemon.ai", f"--namespace={NAMESPACE}"),
        ("get", "lemonspecs.lemon.ai", f"--namespace={NAMESPACE}"),
        ("get", "secrets", f"--namespace={NAMESPACE}"),
        ("list", "pods", f"--namespace={NAMESPACE}"),
    ]
    for check in denied:
        assert not _can(installed, SERVICE_SA, *check), f"service may {check}"


def test_secure_values_install_beside_the_default_release(installed: Kubectl) -> None:
    """A second release (token, TLS, mTLS, watched namespaces) is accepted by the API server."""
    helm(
        "install", "secure", str(APP), "--namespace=secure", "--create-namespace",
        "--values", str(VALUES[1]), kubeconfig=installed.kubeconfig,
    )  # fmt: skip
    deployment = _get(installed, "deployment", "secure-lemon-service", "--namespace=secure")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "--tls-client-ca=/var/run/lemon/client-ca/ca.crt" in container["args"]
    assert container["livenessProbe"]["tcpSocket"]["port"] == "grpc"
    profile = _get(installed, "lemoncapacityprofile", "gpu-pool", "--namespace=secure")
    assert profile["metadata"]["labels"]["team"] == "platform"


def test_uninstall_removes_the_app_and_keeps_the_crds(installed: Kubectl) -> None:
    config = installed.kubeconfig
    helm("uninstall", "lemon", f"--namespace={NAMESPACE}", "--wait", kubeconfig=config)
    left = _get(installed, "deployments,services,roles", f"--namespace={NAMESPACE}")["items"]
    assert [obj for obj in left if obj["kind"] != "Service" or
            obj["metadata"]["name"] != "kubernetes"] == []  # fmt: skip
    assert installed("get", "clusterrole", "lemon-operator", check=False).returncode != 0
    helm("uninstall", "lemon-crds", "--namespace=default", kubeconfig=config)
    for name in _crd_names():
        assert _get(installed, "crd", name)["metadata"]["name"] == name
