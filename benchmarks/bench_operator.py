"""Operator latency on a real control plane: create → Validated / Ready, one spec and a burst.

Starts kube-apiserver + etcd (``tests/k8s/controlplane.py``; built and cached once), installs
the CRDs, runs the ``lemon-operator`` console script as a subprocess, creates a capacity profile
and marks its InferenceServices Ready (standing in for KServe). Then:

* latency: one spec created ``--repeats`` times in sequence (each a new object); a watch from
  the create's resourceVersion timestamps the first status with ``Validated=True`` and
  ``Ready=True``. ``p50_s`` / ``p99_s`` are for Validated, ``ready_p50_s`` / ``ready_p99_s``
  for Ready.
* burst: ``--burst`` specs created at once (16 client threads); ``burst_s`` is the time from the
  first create to the last spec Ready, ``burst_validated_s`` to the last Validated, and
  ``burst_ready_p50_s`` / ``burst_ready_p99_s`` the spread of the specs' Ready times.

The tiers are Ready before the specs are created, so a spec's Validated and Ready land in the
same status write and the two latencies coincide; what they measure is the operator's reaction
(watch event → validate → compile → check tiers → status patch) on this machine.
``control_plane_start_s`` is the cached control plane's start (certificates, etcd, API server
ready), before the CRDs (KServe's real InferenceService CRD included) are applied.

Run: ``lemon bench operator --json`` (or ``python benchmarks/bench_operator.py --json``).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import harness
from lemon.resources.crds import GROUP, PLURALS, VERSION
from lemon_cluster.controlplane import ControlPlane, ensure_binaries, ensure_tools
from lemon_testing.watching import custom_objects
from lemon_testing.watching import follow as follow_kind

ROOT = harness.ROOT

PLURAL = PLURALS["LemonSpec"]
NAMESPACE = "bench"
SPEC = {
    "agents": [
        {"name": "planner", "role": "planner", "capacity": "small"},
        {"name": "solver", "role": "math_solver", "capacity": "medium", "depends_on": ["planner"]},
        {"name": "checker", "role": "verifier", "capacity": "large", "depends_on": ["solver"]},
    ],
    "output": "checker",
}


def _true(obj: dict[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)


class Bench:
    def __init__(self, kubeconfig: Path) -> None:
        self.custom = custom_objects(kubeconfig)

    def create(self, name: str) -> str:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "LemonSpec",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"profile": "default", **SPEC},
        }
        made = self.custom.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, body)
        return str(made["metadata"]["resourceVersion"])

    def one(self, name: str) -> tuple[float, float]:
        from kubernetes import watch

        started = time.perf_counter()
        version = self.create(name)
        validated = ready = 0.0
        stream = watch.Watch().stream(
            self.custom.list_namespaced_custom_object, GROUP, VERSION, NAMESPACE, PLURAL,
            field_selector=f"metadata.name={name}", resource_version=version, timeout_seconds=60,
        )  # fmt: skip
        for event in stream:
            now = time.perf_counter() - started
            if not validated and _true(event["object"], "Validated"):
                validated = now
            if not ready and _true(event["object"], "Ready"):
                ready = now
            if validated and ready:
                break
        if not (validated and ready):
            raise RuntimeError(f"{name} did not become Validated and Ready within 60 s")
        return validated, ready

    def burst(self, count: int) -> tuple[float, list[float]]:
        names = {f"burst-{i}" for i in range(count)}
        validated: dict[str, float] = {}
        ready: dict[str, float] = {}
        started = time.perf_counter()
        done = threading.Event()

        def seen(obj: dict[str, Any]) -> None:
            name = obj["metadata"]["name"]
            now = time.perf_counter() - started
            if name in names and _true(obj, "Validated"):
                validated.setdefault(name, now)
            if name in names and _true(obj, "Ready"):
                ready.setdefault(name, now)

        def follow() -> None:
            follow_kind(
                self.custom, group=GROUP, version=VERSION, namespace=NAMESPACE, plural=PLURAL,
                seen=seen, done=lambda: len(ready) == count,
            )  # fmt: skip
            done.set()

        started = time.perf_counter()
        follower = threading.Thread(target=follow, daemon=True)
        follower.start()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(self.create, sorted(names)))
        if not done.wait(610) or len(ready) < count:
            raise RuntimeError(f"only {len(ready)} of {count} specs Ready within 600 s")
        return max(validated.values()), sorted(ready.values())


def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> None:
    kubectl = Path(sys.executable).with_name("kubectl")
    subprocess.run(
        [str(kubectl), f"--kubeconfig={kubeconfig}", f"--cache-dir={kubeconfig.parent / 'kc'}",
         *args],
        input=stdin, text=True, check=True, capture_output=True,
    )  # fmt: skip


def _kubectl_ok(kubeconfig: Path, *args: str) -> bool:
    try:
        _kubectl(kubeconfig, *args)
    except subprocess.CalledProcessError:
        return False
    return True


def _prepare(kubeconfig: Path) -> None:
    kserve = ROOT / "tests/k8s/fixtures/serving.kserve.io_inferenceservices.yaml"  # KServe's own
    _kubectl(kubeconfig, "apply", "-f", str(ROOT / "crds"))
    _kubectl(kubeconfig, "apply", "--server-side", "-f", str(kserve))
    for crd in ("lemonspecs.lemon.ai", "lemoncapacityprofiles.lemon.ai"):
        _kubectl(kubeconfig, "wait", "--for=condition=Established", f"crd/{crd}")
    deadline = time.monotonic() + 60  # `kubectl wait` fails if it looks before any condition
    isvc = "crd/inferenceservices.serving.kserve.io"
    while not _kubectl_ok(kubeconfig, "wait", "--for=condition=Established", isvc, "--timeout=9s"):
        if time.monotonic() > deadline:
            raise RuntimeError("KServe's InferenceService CRD was never Established")
        time.sleep(0.5)
    _kubectl(kubeconfig, "create", "namespace", NAMESPACE)
    profile = ROOT / "examples/k8s/01-capacity-profile.yaml"
    _kubectl(kubeconfig, "apply", "-n", NAMESPACE, "-f", str(profile))


def _mark_tiers_ready(bench: Bench) -> None:
    deadline = time.monotonic() + 60
    pending = {"default-small", "default-medium", "default-large"}
    while pending and time.monotonic() < deadline:
        for name in sorted(pending):
            status = {
                "status": {
                    "url": f"http://{name}.{NAMESPACE}",
                    "conditions": [{"type": "Ready", "status": "True"}],
                }
            }
            try:
                bench.custom.patch_namespaced_custom_object_status(
                    "serving.kserve.io", "v1beta1", NAMESPACE, "inferenceservices", name, status
                )
                pending.discard(name)
            except Exception:  # not created yet
                time.sleep(0.2)
    if pending:
        raise RuntimeError(f"the operator did not create {sorted(pending)}")


def run(*, repeats: int, burst: int) -> dict[str, Any]:
    plane = ControlPlane(ensure_binaries())
    ensure_tools(bin_dir=Path(sys.executable).parent)
    operator: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    try:
        started = time.monotonic()
        kubeconfig = plane.start()
        start_s = time.monotonic() - started
        _prepare(kubeconfig)
        log = Path(tempfile.mkdtemp(prefix="lemon-bench-")) / "operator.log"
        with log.open("wb") as sink:
            operator = subprocess.Popen(
                [str(Path(sys.executable).with_name("lemon-operator"))],
                stdout=sink, stderr=subprocess.STDOUT, cwd=ROOT,
                env={**os.environ, "KUBECONFIG": str(kubeconfig)},
            )  # fmt: skip
        bench = Bench(kubeconfig)
        _mark_tiers_ready(bench)
        bench.one("warmup")
        pairs = [bench.one(f"latency-{i}") for i in range(repeats)]
        validated = [pair[0] for pair in pairs]
        ready = [pair[1] for pair in pairs]
        burst_validated, burst_ready = bench.burst(burst)
        burst_s = burst_ready[-1]
    except Exception:
        if log is not None and log.exists():
            print(log.read_text(errors="replace")[-4000:], file=sys.stderr)
        raise
    finally:
        if operator is not None:
            operator.terminate()
            operator.wait(timeout=30)
        plane.cleanup()
        if log is not None:
            shutil.rmtree(log.parent, ignore_errors=True)
    return {
        "benchmark": "operator",
        "p50_s": round(statistics.median(validated), 4),
        "p99_s": round(harness.percentile(validated, 0.99), 4),
        "ready_p50_s": round(statistics.median(ready), 4),
        "ready_p99_s": round(harness.percentile(ready, 0.99), 4),
        "repeats": repeats,
        "burst": burst,
        "burst_validated_s": round(burst_validated, 3),
        "burst_s": round(burst_s, 3),
        "burst_ready_p50_s": round(statistics.median(burst_ready), 3),
        "burst_ready_p99_s": round(harness.percentile(burst_ready, 0.99), 3),
        "control_plane_start_s": round(start_s, 2),  # cached binaries: certificates, etcd, ready
    }


def main(argv: list[str] | None = None) -> int:
    bench = harness.Harness("operator", __doc__, repeats=50)
    bench.parser.add_argument("--burst", type=int, default=200)
    args = bench.parse(argv)
    return bench.finish(args, run(repeats=args.repeats, burst=args.burst))


if __name__ == "__main__":
    raise SystemExit(main())
