"""``lemon cluster up|status|down`` (the k8s tier: the real control plane, no model loads).

The refusals: a missing control-plane build (and one that cannot be built), a port in use, a
stale state directory (``down`` stops what it left, and only that), a directory that is not a
cluster's, a second ``up`` while one runs. Then, on a running cluster: an InferenceService for a
model this machine lacks is marked not ready, saying so (nothing else is served in its place),
a LemonRun on a tier its profile lacks fails naming it, and Ctrl-C on ``up`` stops every
process it started and removes the state directory.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lemon_cluster.state import MARKER_ENV
from tests.conftest import run_lemon
from tests.k8s.local_cluster import LocalCluster, recorded_pids, still_alive


def _up(
    state: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_lemon("cluster", "up", "--state-dir", str(state), *args, env=env, timeout=120)


def test_a_missing_control_plane_build_is_refused(tmp_path: Path) -> None:
    cache = tmp_path / "empty-cache"
    cache.mkdir()
    state = tmp_path / "state"
    refused = _up(state, "--no-build", env={"XDG_CACHE_HOME": str(cache)})
    assert refused.returncode == 1
    assert "no control-plane build: etcd, kube-apiserver missing under" in refused.stderr
    assert str(cache / "lemon" / "controlplane") in refused.stderr
    # Without --no-build it would build, but a machine without Go cannot: it says so at once.
    bare = {"XDG_CACHE_HOME": str(cache), "PATH": "/usr/bin:/bin"}
    cannot = _up(state, env=bare)
    assert cannot.returncode == 1
    assert "cannot be built here" in cannot.stderr
    assert "the Go toolchain (`go`)" in cannot.stderr
    assert not state.exists()  # refused before anything was started or written


def test_a_port_in_use_is_refused(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = _up(tmp_path / "state", "--port", str(port))
        refused_service = _up(tmp_path / "state", "--service-port", str(port))
    assert refused.returncode == 1
    assert f"port {port} on 127.0.0.1 is in use (--port)" in refused.stderr
    assert f"port {port} on 127.0.0.1 is in use (--service-port)" in refused_service.stderr
    assert not (tmp_path / "state").exists()


def _sleeper(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        env={**os.environ, **env},
        start_new_session=True,
    )


def test_a_stale_state_directory_is_refused_and_down_stops_only_what_it_left(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = _sleeper({MARKER_ENV: str(state)})  # a process the crashed cluster started
    stranger = _sleeper({})  # a process that reuses a recorded pid: not the cluster's
    try:
        record = {"pid": dead.pid, "processes": {"lemon-operator": left.pid,
                                                 "lemon serve": stranger.pid}}  # fmt: skip
        (state / "cluster.json").write_text(json.dumps(record))
        refused = _up(state)
        assert refused.returncode == 1
        assert f"{state} is a stale state directory" in refused.stderr
        assert f"(pid {dead.pid}) is no longer running" in refused.stderr
        assert "`lemon cluster down` stops what it left and removes it" in refused.stderr
        shown = run_lemon("cluster", "status", "--state-dir", str(state))
        assert shown.returncode == 1
        assert "stale" in shown.stdout

        down = run_lemon("cluster", "down", "--state-dir", str(state))
        assert down.returncode == 0, down.stderr
        assert f"stopping lemon-operator (pid {left.pid})" in down.stdout
        assert left.wait(timeout=30) is not None
        assert stranger.poll() is None  # never signalled: not one of the cluster's
        assert not state.exists()
    finally:
        for process in (left, stranger):
            process.kill()
            process.wait()


def test_a_directory_that_is_not_a_clusters_is_neither_used_nor_removed(tmp_path: Path) -> None:
    state = tmp_path / "mine"
    state.mkdir()
    (state / "notes.txt").write_text("keep me")
    refused = _up(state)
    assert refused.returncode == 1
    assert "not a local cluster's state directory" in refused.stderr
    down = run_lemon("cluster", "down", "--state-dir", str(state))
    assert down.returncode == 1
    assert "not removing it" in down.stderr
    assert (state / "notes.txt").read_text() == "keep me"
    nothing = run_lemon("cluster", "down", "--state-dir", str(tmp_path / "never"))
    assert nothing.returncode == 0
    assert "nothing to stop" in nothing.stdout


MISSING_PROFILE = """\
apiVersion: lemon.ai/v1alpha1
kind: LemonCapacityProfile
metadata: {name: default}
spec:
  small: {model: example-org/not-on-this-machine}
"""
LARGE_RUN = """\
apiVersion: lemon.ai/v1alpha1
kind: LemonRun
metadata: {name: needs-large}
spec:
  task: What is 2 + 3?
  spec:
    agents:
    - {name: solver, role: math_solver, capacity: large}
"""


@pytest.fixture
def running(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path / "state")
    try:
        yield cluster
    finally:
        cluster.kill()


def _condition(obj: dict[str, object] | None, kind: str) -> dict[str, str]:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []  # type: ignore[attr-defined]
    return next((c for c in conditions if c["type"] == kind), {})


def test_a_running_cluster_refuses_a_second_up_reports_what_it_lacks_and_stops_on_ctrl_c(
    running: LocalCluster, tmp_path: Path
) -> None:
    report = running.status()
    assert report["condition"] == "running"
    assert report["kubeconfig"] == str(running.kubeconfig)
    assert report["apiserver"].startswith("https://127.0.0.1:")
    assert {"etcd", "kube-apiserver", "lemon serve", "lemon-operator"} <= set(report["processes"])
    assert all(process["alive"] for process in report["processes"].values())
    # the service journals its runs, so a restart of it never runs a LemonRun twice
    assert f"runs journaled in {running.state / 'runs.journal'}" in running.output()
    assert (running.state / "runs.journal").exists()

    second = _up(running.state)
    assert second.returncode == 1
    assert f"a local cluster is already running (lemon cluster up, pid {report['pid']}" in (
        second.stderr
    )
    assert "lemon cluster down" in second.stderr

    # A model this machine lacks: not ready, saying which and what it serves; no substitute.
    running.kubectl("apply", "-f", "-", stdin=MISSING_PROFILE)
    isvc = running.wait(
        lambda: (
            _condition(found := running.get("isvc", "default-small"), "Ready").get("reason")
            and found
        ),
        what="the InferenceService's condition",
        timeout=60,
    )
    ready = _condition(isvc, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ModelNotOnThisMachine")
    assert "example-org/not-on-this-machine is not a model this machine has" in ready["message"]
    assert "Qwen/Qwen2.5-Coder-1.5B-Instruct" in ready["message"]
    assert not isvc["status"].get("url")
    assert "NOT served" in running.output()
    assert not any(name.startswith("serve-model") for name in running.status()["processes"])

    # A run on a tier the profile lacks fails at once, naming the tier.
    running.kubectl("apply", "-f", "-", stdin=LARGE_RUN)
    run = running.wait(
        lambda: (
            (found := running.get("lrun", "needs-large"))
            and (found.get("status") or {}).get("phase") == "Failed"
            and found
        ),
        what="the run to fail",
        timeout=90,
    )
    assert _condition(run, "Succeeded")["reason"] == "TierNotInProfile"
    assert "profile default has no large tier" in run["status"]["message"]

    pids = recorded_pids(running.status())
    started = time.monotonic()
    assert running.interrupt() == 0
    assert time.monotonic() - started < 60
    assert "stopped everything it started" in running.output()
    assert still_alive(pids) == []
    assert not running.state.exists()
