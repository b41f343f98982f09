"""Fixtures of the ``k8s`` tier: a real kube-apiserver + etcd, kubectl, and the operator.

The control plane is built once (``tests/k8s/controlplane.py``; cached under ``~/.cache``) and
started once per session. If it cannot be built or started the tests fail with the reason; they
never skip. The operator runs as a real ``kopf run`` subprocess under the generated least-
privilege ClusterRole, authenticated by its own client certificate.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.k8s.controlplane import ControlPlane, ControlPlaneError, ensure_binaries, ensure_tools
from tests.k8s.vendored_crds import INFERENCESERVICE_CRD, PYTORCHJOB_CRD
from tests.service.conftest import ServeProcess

BIN = Path(sys.executable).parent
OPERATOR_USER = "lemon-operator"
INFERENCESERVICES = "inferenceservices.serving.kserve.io"
PYTORCHJOBS = "pytorchjobs.kubeflow.org"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.k8s)


class Kubectl:
    """``kubectl`` against the test control plane."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig

    def __call__(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [
                str(BIN / "kubectl"),
                f"--kubeconfig={self.kubeconfig}",
                f"--cache-dir={self.kubeconfig.parent / 'kube-cache'}",
                *args,
            ],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{proc.stderr}")
        return proc

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "-o", "json").stdout)

    def wait_established(self, *crds: str, timeout: float = 60.0) -> None:
        """Poll until every CRD is Established (``kubectl wait`` fails outright when it looks
        before the API server has written the CRD's first conditions)."""
        deadline = time.monotonic() + timeout
        for crd in crds:
            while True:
                found = self("get", "crd", crd, "-o", "json", check=False)
                conditions = json.loads(found.stdout or "{}").get("status", {}).get("conditions")
                if any(c["type"] == "Established" and c["status"] == "True"
                       for c in conditions or []):  # fmt: skip
                    break
                if time.monotonic() > deadline:
                    pytest.fail(f"crd/{crd} not Established: {conditions}", pytrace=False)
                time.sleep(0.25)


_prepared: dict[str, Path | ControlPlaneError] = {}


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the control plane and install the tools (once; the build takes minutes) after
    collection, outside any test's timeout, when k8s tests are about to run."""
    if session.config.option.collectonly:
        return
    if not any(item.get_closest_marker("k8s") for item in session.items):
        return
    try:
        _prepared["binaries"] = ensure_binaries()
        ensure_tools(bin_dir=BIN)
    except ControlPlaneError as error:
        _prepared["error"] = error


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    try:
        error = _prepared.get("error")
        if isinstance(error, ControlPlaneError):
            raise error
        binaries = _prepared.get("binaries")
        plane = ControlPlane(binaries if isinstance(binaries, Path) else ensure_binaries())
        plane.start()
    except ControlPlaneError as error:
        pytest.fail(f"the k8s tier needs a control plane: {error}", pytrace=False)
    try:
        yield plane
    finally:
        plane.cleanup()


@pytest.fixture(scope="session")
def kubectl(control_plane: ControlPlane) -> Kubectl:
    """kubectl on a control plane holding LEMON's CRDs, the real CRDs of KServe's
    InferenceService and Kubeflow's PyTorchJob (installed first, as on a cluster where LEMON's
    prerequisites come before it: kopf only watches kinds that discovery serves when it looks),
    and the operator's ClusterRole bound to its user."""
    kubectl = Kubectl(control_plane.kubeconfig)
    kubectl("apply", "-f", str(ROOT / "crds"))
    # KServe's CRD (1 MB) is over the 256 kB annotation of a client-side apply: apply the real
    # CRDs server-side, as KServe's and Kubeflow's install instructions do.
    kubectl("apply", "--server-side", "-f", str(INFERENCESERVICE_CRD), "-f", str(PYTORCHJOB_CRD))
    kubectl("apply", "-f", str(ROOT / "operator" / "rbac" / "clusterrole.yaml"))
    kubectl(
        "create", "clusterrolebinding", "lemon-operator",
        "--clusterrole=lemon-operator", f"--user={OPERATOR_USER}",
    )  # fmt: skip
    plurals = (
        "lemonspecs",
        "lemoncapacityprofiles",
        "lemontrainings",
        "lemonpolicies",
        "lemonruns",
        "lemonbudgets",
    )
    lemon = [f"{plural}.lemon.ai" for plural in plurals]
    kubectl.wait_established(*lemon, INFERENCESERVICES, PYTORCHJOBS)
    # Established comes before discovery and the OpenAPI document serve the new kinds.
    deadline = time.monotonic() + 60
    for kind in ("lemonspec", "lemontraining", "inferenceservice", "pytorchjob"):
        while kubectl("explain", f"{kind}.spec", check=False).returncode != 0:
            if time.monotonic() > deadline:
                pytest.fail(f"the API server never published the {kind} schema", pytrace=False)
            time.sleep(0.5)
    return kubectl


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Operator:
    """``kopf run -m lemon_operator.main`` as a subprocess, as the operator's own user, handing
    LemonRuns to the orchestration service at ``service`` (host:port)."""

    def __init__(self, kubeconfig: Path, log: Path, *, service: str | None = None) -> None:
        self.kubeconfig = kubeconfig
        self.log = log
        self.service = service
        self.proc: subprocess.Popen[bytes] | None = None
        self.metrics_port = _free_port()
        """Where the operator serves its Prometheus metrics (``/metrics``)."""

    def start(self) -> None:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "PYTHONUNBUFFERED": "1",
            "LEMON_OPERATOR_METRICS_PORT": str(self.metrics_port),
        }
        if self.service is not None:
            env["LEMON_SERVICE_TARGET"] = self.service
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [str(BIN / "kopf"), "run", "-m", "lemon_operator.main", "--all-namespaces",
                 "--standalone"],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True,
            )  # fmt: skip

    def kill(self) -> None:
        """SIGKILL: no cleanup, as a crash or an evicted pod."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def tail(self) -> str:
        return self.log_text()[-6000:]


@pytest.fixture(scope="session")
def orchestration_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """``lemon serve`` as a real process: the service the operator hands LemonRuns to. Its own
    profile is the scripted test double, which no LemonRun uses: runs bring their tiers. Its runs
    are journaled, as the Helm chart's are, so a test may kill and restart it."""
    logs = tmp_path_factory.mktemp("orchestration")
    server = ServeProcess(
        "--profile", "scripted", "--max-concurrency", "128", "--max-waiting", "128",
        "--run-journal", str(logs / "runs.sqlite"),
        log_dir=logs,
    )  # fmt: skip
    yield server
    server.stop()


@pytest.fixture(scope="session")
def operator_process(
    control_plane: ControlPlane,
    kubectl: Kubectl,
    orchestration_service: ServeProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Operator]:
    kubeconfig = control_plane.kubeconfig_for(user=OPERATOR_USER)
    operator = Operator(
        kubeconfig,
        tmp_path_factory.mktemp("operator") / "operator.log",
        service=orchestration_service.target,
    )
    operator.start()
    yield operator
    operator.stop()
    forbidden = [line for line in operator.log_text().splitlines() if "forbidden" in line.lower()]
    assert not forbidden, f"the operator hit RBAC denials:\n{forbidden[:5]}"


@pytest.fixture
def namespace(kubectl: Kubectl) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    kubectl("create", "namespace", name)
    return name


def wait_for(
    check: Callable[[], Any], *, timeout: float = 60.0, what: str, diagnose: Callable[[], str]
) -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``diagnose()`` otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.25)
    pytest.fail(f"timed out waiting for {what}\n{diagnose()}")
