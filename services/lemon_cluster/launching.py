"""Start, watch, report and stop a local cluster (``lemon cluster up|status|down``).

``up`` runs in the foreground: it refuses a state directory another ``up`` holds, a stale one
and a foreign one, and a port that is taken; builds the control plane on first use (saying so);
starts etcd and kube-apiserver; installs LEMON's CRDs with ``helm`` (``helm/lemon-crds``) and
the pinned KServe InferenceService and Kubeflow PyTorchJob CRDs (``tests/k8s/fixtures``, checked
against their recorded sha256); binds the operator's generated ClusterRole to its own user;
starts ``lemon serve`` (the orchestration service) and ``lemon-operator`` as processes; prints
the ``KUBECONFIG`` line; then runs the two stand-ins (:mod:`lemon_cluster.serving`,
:mod:`lemon_cluster.training`) once a second until Ctrl-C or ``down`` (SIGTERM), and stops
everything it started, the last first, and removes the state directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from lemon.resources.crds import GROUP, PLURALS, VERSION
from lemon_cluster import kube
from lemon_cluster.controlplane import (
    ETCD_VERSION,
    KUBE_VERSION,
    ControlPlane,
    ControlPlaneError,
    cache_dir,
    ensure_binaries,
    ensure_tools,
    missing_binaries,
)
from lemon_cluster.processes import (
    Children,
    free_port,
    is_ours,
    log_tail,
    port_in_use,
    script,
    stop_group,
    wait_gone,
)
from lemon_cluster.serving import Servers
from lemon_cluster.state import StateDir, StateError
from lemon_cluster.training import Trainings

__all__ = ["ClusterError", "UpOptions", "checkout", "down", "status", "up"]

ROOT = Path(__file__).resolve().parents[2]
OPERATOR_USER = "lemon-operator"
CALL_TIMEOUT_S = 600.0
"""The service's per-call timeout here: the tiers decode on this machine's CPUs, where one
large agent's 300 tokens beside another tier's call can take minutes (the service's default,
120 s, is for accelerators)."""
Say = Callable[[str], None]


class ClusterError(RuntimeError):
    """``up`` or ``down`` cannot go on; the message says why and what to do."""


class _Stopped(BaseException):
    """Ctrl-C or SIGTERM (``lemon cluster down``) reached ``up``."""


@dataclass(frozen=True, slots=True)
class UpOptions:
    state_dir: Path
    port: int = 0
    """The API server's port; 0: a free one."""
    service_port: int = 0
    """The orchestration service's port; 0: a free one."""
    build: bool = True
    """Build the control plane when it is not built yet (else refuse)."""


def checkout() -> Path:
    """The repository the cluster reads its charts, RBAC rules and vendored CRDs from."""
    needed = ("helm/lemon-crds/Chart.yaml", "operator/rbac/clusterrole.yaml", "tests/k8s/fixtures")
    missing = [path for path in needed if not (ROOT / path).exists()]
    if missing:
        raise ClusterError(
            f"lemon cluster runs from a checkout of the repository (an editable install); "
            f"{ROOT} lacks {', '.join(missing)}"
        )
    return ROOT


def vendored_crds(root: Path) -> list[Path]:
    """KServe's InferenceService and Kubeflow's PyTorchJob CRDs as released, each checked
    against the sha256 ``SOURCES.json`` records for it."""
    fixtures = root / "tests" / "k8s" / "fixtures"
    sources = json.loads((fixtures / "SOURCES.json").read_text(encoding="utf-8"))
    wanted = ("serving.kserve.io_inferenceservices.yaml", "kubeflow.org_pytorchjobs.yaml")
    paths = []
    for entry in sources:
        if entry["file"] not in wanted:
            continue
        path = fixtures / entry["file"]
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != entry["sha256"]:
            raise ClusterError(
                f"{path} is not the pinned {entry['module']} {entry['version']} file "
                f"(sha256 {digest}, recorded {entry['sha256']}): "
                "python -m tests.k8s.vendored_crds vendor restores it"
            )
        paths.append(path)
    if len(paths) != len(wanted):
        raise ClusterError(f"{fixtures / 'SOURCES.json'} does not list {', '.join(wanted)}")
    return paths


def _refuse_state(state: StateDir) -> None:
    condition = state.condition()
    record = state.read()
    if condition == "running":
        raise ClusterError(
            f"a local cluster is already running (lemon cluster up, pid {record.get('pid', '?')}; "
            f"KUBECONFIG={record.get('kubeconfig', state.kubeconfig)}): `lemon cluster down` "
            "stops it, or give this one another --state-dir"
        )
    if condition == "stale":
        raise ClusterError(
            f"{state.root} is a stale state directory: the `lemon cluster up` that wrote it "
            f"(pid {record.get('pid', '?')}) is no longer running. `lemon cluster down` stops "
            "what it left and removes it"
        )
    if condition == "foreign":
        raise ClusterError(
            f"{state.root} holds files but no local cluster's record (cluster.json): not a "
            "local cluster's state directory. Give --state-dir an empty or new directory"
        )


def _check_ports(options: UpOptions) -> None:
    ports = [("--port", options.port), ("--service-port", options.service_port)]
    chosen = [port for _, port in ports if port]
    if len(chosen) != len(set(chosen)):
        raise ClusterError("--port and --service-port must differ")
    for flag, port in ports:
        if port and port_in_use(port):
            raise ClusterError(
                f"port {port} on 127.0.0.1 is in use ({flag}): choose another, or leave "
                f"{flag} out for a free one"
            )


def _binaries(*, build: bool, say: Say) -> Path:
    missing = missing_binaries()
    if not missing:
        return cache_dir()
    names = ", ".join(path.name for path in missing)
    if not build:
        raise ClusterError(
            f"no control-plane build: {names} missing under {cache_dir()}. `lemon cluster up` "
            "without --no-build builds it once (minutes), as does "
            "`python -m tests.k8s.controlplane build`"
        )
    if shutil.which("go") is None:
        raise ClusterError(
            f"the control plane is not built ({names} missing under {cache_dir()}) and cannot "
            "be built here: building kube-apiserver and etcd needs the Go toolchain (`go`) and "
            "the Go module proxy"
        )
    say(
        f"lemon cluster: building the control plane once (kube-apiserver {KUBE_VERSION}, etcd "
        f"{ETCD_VERSION}) through the Go module proxy into {cache_dir()}: about 5 minutes on "
        "two cores; later runs reuse it"
    )
    try:
        return ensure_binaries()
    except ControlPlaneError as exc:
        raise ClusterError(f"building the control plane failed: {exc}") from None


def _tools(say: Say) -> tuple[Path, Path]:
    try:
        return script("kubectl"), script("helm")
    except FileNotFoundError:
        say("lemon cluster: installing kubectl and helm (static binaries, once)")
    try:
        ensure_tools()
        return script("kubectl"), script("helm")
    except (ControlPlaneError, FileNotFoundError) as exc:
        raise ClusterError(f"kubectl and helm are needed: {exc}") from None


def _models_note(say: Say) -> None:
    from lemon.backends.ggufs import GGUF_MODELS, ModelNotFetched, locate
    from lemon.backends.packaged import PackagedModelMissing

    for model in GGUF_MODELS.values():
        try:
            locate(model)
        except (ModelNotFetched, PackagedModelMissing) as exc:
            say(f"lemon cluster: note: {exc} (InferenceServices naming it will be not ready)")


class LocalCluster:
    """What one ``up`` started, in order."""

    def __init__(self, state: StateDir, *, root: Path, say: Say) -> None:
        self.state = state
        self.root = root
        self.say = say
        self.record: dict[str, Any] = {"pid": os.getpid(), "stage": "starting"}
        self.children = Children(marker=str(state.root), logs=state.logs, on_change=self._processes)
        self.plane: ControlPlane | None = None
        self.servers: Servers | None = None
        self.trainings: Trainings | None = None
        self.core: list[Any] = []
        self._served: list[dict[str, Any]] = []

    def _processes(self, running: dict[str, int]) -> None:
        self.record["processes"] = running
        self.state.write(self.record)

    def save(self, **fields: Any) -> None:
        self.record.update(fields)
        self.state.write(self.record)

    def start(self, options: UpOptions, *, binaries: Path, kubectl: Path, helm: Path) -> None:
        started = time.monotonic()
        self.save(started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        plane = self.plane = ControlPlane(
            binaries,
            workdir=self.state.controlplane,
            port=options.port,
            env=self.children.env(),
            name="lemon-local",
            cert_days=30,
        )
        self.state.controlplane.mkdir(exist_ok=True)
        try:
            plane.start()
        except ControlPlaneError as exc:
            raise ClusterError(f"the control plane did not start: {exc}") from None
        finally:
            self.children.extra = plane.pids()
            self._processes(self.children.running())
        shutil.copyfile(plane.kubeconfig, self.state.kubeconfig)
        self.state.kubeconfig.chmod(0o600)
        apiserver = f"https://127.0.0.1:{plane.port}"
        self.save(kubeconfig=str(self.state.kubeconfig), apiserver=apiserver)
        self.say(f"lemon cluster: kube-apiserver {KUBE_VERSION} and etcd at {apiserver}")
        self._install(kubectl=kubectl, helm=helm)
        self._services(options, plane)
        api = kube.Kube(self.state.kubeconfig)
        self.servers = Servers(api, self.children, self.state.volumes, self.say, self._table)
        self.trainings = Trainings(
            api, self.children, self.state.volumes, self.state.jobs, self.say
        )
        self.save(stage="ready")
        self.say(f"lemon cluster: ready in {time.monotonic() - started:.0f} s")

    def _kubectl(self, kubectl: Path, *args: str) -> str:
        return _run([str(kubectl), f"--kubeconfig={self.state.kubeconfig}", *args], what="kubectl")

    def _install(self, *, kubectl: Path, helm: Path) -> None:
        helm_home = self.state.root / "helm"
        env = {
            **os.environ,
            "HELM_CACHE_HOME": str(helm_home / "cache"),
            "HELM_CONFIG_HOME": str(helm_home / "config"),
            "HELM_DATA_HOME": str(helm_home / "data"),
        }
        chart = self.root / "helm" / "lemon-crds"
        _run(
            [
                str(helm),
                "install",
                "lemon-crds",
                str(chart),
                "--namespace=default",
                f"--kubeconfig={self.state.kubeconfig}",
            ],
            what="helm",
            env=env,
        )
        crds = vendored_crds(self.root)
        # KServe's CRD (1 MB) is over a client-side apply's annotation limit: server-side, as
        # KServe's and Kubeflow's install instructions apply them
        self._kubectl(kubectl, "apply", "--server-side", *(f"-f={path}" for path in crds))
        self._kubectl(kubectl, "apply", f"-f={self.root / 'operator/rbac/clusterrole.yaml'}")
        self._kubectl(
            kubectl,
            "create",
            "clusterrolebinding",
            OPERATOR_USER,
            f"--clusterrole={OPERATOR_USER}",
            f"--user={OPERATOR_USER}",
        )
        self._served_kinds()
        self.say(
            f"lemon cluster: CRDs installed: helm release lemon-crds ({chart}), KServe "
            "InferenceService and Kubeflow PyTorchJob (pinned releases, tests/k8s/fixtures)"
        )

    def _served_kinds(self, timeout: float = 90.0) -> None:
        """Wait until the API serves every kind the operator watches (kopf watches only what
        discovery lists when it starts)."""
        api = kube.Kube(self.state.kubeconfig)
        kinds = [kube.GroupVersionResource(GROUP, VERSION, plural) for plural in PLURALS.values()]
        deadline = time.monotonic() + timeout
        for resource in [*kinds, kube.ISVC, kube.PYTORCHJOBS]:
            while not api.served(resource):
                if time.monotonic() > deadline:
                    raise ClusterError(f"the API server never served {resource.plural}")
                time.sleep(0.3)

    def _services(self, options: UpOptions, plane: ControlPlane) -> None:
        port = options.service_port or free_port()
        target = f"127.0.0.1:{port}"
        # the run journal makes the service's runs survive its restart: a LemonRun is never
        # executed twice (docs/runs.md)
        journal = self.state.root / "runs.journal"
        service = self.children.start(
            "lemon serve",
            [str(script("lemon")), "serve", "--host=127.0.0.1", f"--port={port}",
             f"--run-journal={journal}", f"--call-timeout-s={CALL_TIMEOUT_S:g}"],
        )  # fmt: skip
        self.core.append(service)
        _wait_port(port, alive=service.alive, what="lemon serve", log=service.log)
        self.save(service=target)
        self.say(
            f"lemon cluster: orchestration service (lemon serve) at {target}, runs journaled "
            f"in {journal}"
        )
        operator_config = plane.kubeconfig_for(user=OPERATOR_USER)
        operator = self.children.start(
            "lemon-operator",
            [str(script("lemon-operator"))],
            env={"KUBECONFIG": str(operator_config), "LEMON_SERVICE_TARGET": target},
        )
        self.core.append(operator)
        time.sleep(2.0)
        if not operator.alive():
            raise ClusterError(f"lemon-operator exited at once:\n{operator.tail()}")
        self.say(
            f"lemon cluster: operator (lemon-operator, as user {OPERATOR_USER} under its "
            "generated ClusterRole) watching every namespace"
        )

    def _table(self, rows: list[dict[str, Any]]) -> None:
        if rows != self._served:
            self._served = rows
            self.save(served=rows)

    def watch(self) -> None:
        """Run the stand-ins once a second until stopped (by a signal); ClusterError when a
        process the cluster cannot do without exits."""
        said: set[str] = set()
        while True:
            self._check_core()
            for stand_in in (self.servers, self.trainings):
                if stand_in is None:
                    continue
                try:
                    stand_in.reconcile()
                except (kube.KubeError, OSError, ValueError) as exc:
                    if str(exc) not in said:
                        said.add(str(exc))
                        self.say(f"lemon cluster: {type(stand_in).__name__}: {exc}")
            time.sleep(1.0)

    def _check_core(self) -> None:
        exited = self.plane.exited() if self.plane is not None else None
        if exited is not None:
            raise ClusterError(f"the control plane stopped: {exited}")
        for child in self.core:
            if not child.alive():
                raise ClusterError(
                    f"{child.name} exited ({child.process.returncode}):\n{child.tail()}"
                )

    def stop(self) -> None:
        self.children.stop_all()  # the stand-ins' processes, the operator and the service
        if self.plane is not None:
            self.plane.stop()
            self.children.extra = {}


def _run(argv: list[str], *, what: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
    if proc.returncode != 0:
        raise ClusterError(f"{what} {' '.join(argv[1:3])} failed:\n{proc.stderr.strip()[-2000:]}")
    return proc.stdout


def _wait_port(port: int, *, alive: Callable[[], bool], what: str, log: Path) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if not alive():
            raise ClusterError(f"{what} exited at start:\n{log_tail(log)}")
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.3)
    raise ClusterError(f"{what} did not listen on 127.0.0.1:{port} within 180 s")


@contextmanager
def _signals_stop() -> Iterator[None]:
    """Ctrl-C and SIGTERM raise :class:`_Stopped` (once); the cleanup after them runs with
    both ignored, so a second Ctrl-C cannot leave processes behind."""

    def stop(_signum: int, _frame: FrameType | None) -> None:
        raise _Stopped

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)


def up(options: UpOptions, *, say: Say) -> int:
    """Start a local cluster and run it until Ctrl-C or ``down``; 0 when stopped that way."""
    state = StateDir(options.state_dir)
    _refuse_state(state)
    _check_ports(options)
    root = checkout()
    kubectl, helm = _tools(say)
    binaries = _binaries(build=options.build, say=say)
    try:
        lock = state.claim()
    except StateError as exc:
        raise ClusterError(str(exc)) from None
    cluster = LocalCluster(state, root=root, say=say)
    code = 0
    try:
        with _signals_stop():
            try:
                cluster.save()
                say(f"lemon cluster: state in {state.root}")
                _models_note(say)
                cluster.start(options, binaries=binaries, kubectl=kubectl, helm=helm)
                say(f"export KUBECONFIG={state.kubeconfig}")
                say(
                    "lemon cluster: then e.g. `kubectl apply -f examples/k8s/` and "
                    "`kubectl get lrun -w`; Ctrl-C here (or `lemon cluster down`) stops "
                    "everything"
                )
                cluster.watch()
            except _Stopped:
                say("lemon cluster: stopping")
            except ClusterError as exc:
                say(f"lemon cluster: error: {exc}")
                code = 1
    except _Stopped:  # a signal while an error was being reported
        code = code or 1
    finally:  # signals are ignored by now: a second Ctrl-C cannot cut the cleanup short
        cluster.stop()
        state.remove()
        lock.close()
        say(f"lemon cluster: stopped everything it started; removed {state.root}")
    return code


def down(state_dir: Path, *, say: Say, timeout: float = 120.0) -> int:
    """Stop the cluster at ``state_dir`` (its ``up``, then anything of it left) and remove the
    state directory; 0 also when there is nothing to stop."""
    state = StateDir(state_dir)
    condition = state.condition()
    if condition == "absent":
        say(f"lemon cluster: no local cluster at {state.root}: nothing to stop")
        return 0
    if condition == "foreign":
        raise ClusterError(
            f"{state.root} is not a local cluster's state directory (no cluster.json): "
            "not removing it"
        )
    record = state.read()
    processes = dict(record.get("processes") or {})
    pid = record.get("pid")
    if condition == "running" and isinstance(pid, int):
        say(f"lemon cluster: stopping the local cluster (lemon cluster up, pid {pid})")
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while state.condition() == "running" and time.monotonic() < deadline:
            time.sleep(0.2)
        if state.condition() == "running":
            say(f"lemon cluster: pid {pid} did not stop within {timeout:.0f} s: killing it")
            os.kill(pid, signal.SIGKILL)
        wait_gone(pid, timeout=10.0)
    for name, child in processes.items():  # what a crashed or killed `up` left running
        if isinstance(child, int) and is_ours(child, marker=str(state.root)):
            say(f"lemon cluster: stopping {name} (pid {child}), left by the cluster")
            stop_group(child)
    if state.root.exists():
        state.remove()
    say(f"lemon cluster: down; removed {state.root}")
    return 0


def status(state_dir: Path) -> dict[str, Any]:
    """What ``lemon cluster status`` reports: the state directory's condition, and for a
    running cluster its addresses, processes and InferenceServices."""
    state = StateDir(state_dir)
    condition = state.condition()
    report: dict[str, Any] = {"stateDir": str(state.root), "condition": condition}
    if condition not in ("running", "stale"):
        return report
    record = state.read()
    for key in ("pid", "stage", "started", "kubeconfig", "apiserver", "service"):
        if key in record:
            report[key] = record[key]
    processes = record.get("processes") or {}
    report["processes"] = {
        name: {"pid": pid, "alive": is_ours(pid, marker=str(state.root))}
        for name, pid in processes.items()
        if isinstance(pid, int)
    }
    report["inferenceServices"] = record.get("served") or []
    report["volumes"] = str(state.volumes)
    return report
