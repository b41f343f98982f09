"""LemonRuns on a real control plane: 100 runs created at once, each executed once.

Starts kube-apiserver + etcd (``tests/k8s/controlplane.py``; built and cached once), installs
the CRDs, runs ``lemon serve`` (the orchestration service) and the ``lemon-operator`` console
script pointed at it, and a scripted tier: a real OpenAI-compatible HTTP server that answers
every call after a fixed latency (``tests/service/openai_server.py``; a test double, not a
model). A capacity profile's InferenceServices are marked Ready at that server's URL (standing
in for KServe), then ``--runs`` LemonRuns (inline spec, ``--agents`` agents in a chain) are
created at once by 16 client threads, and a watch timestamps each run's ``Succeeded``.

Reported:

* ``burst_s``: from the first create to the last run Succeeded;
* ``p50_overhead_s`` / ``p99_overhead_s``: per run, create → Succeeded (seen by the watch)
  minus the engine's own wall time for it (``status.wallSeconds``): what Kubernetes, the
  operator and the service add to the work itself;
* ``lost``: runs that never finished (``failed``: runs that finished Failed);
* ``duplicated``: runs the service started more than once (its log says each start), and
  ``tier_calls`` against ``runs × agents``, the model calls the tier received;
* ``cpu_s`` (CPU seconds each process used during the burst) and ``api_requests_per_run``
  (the API server's own request counters, watches and lists left out), to say where time goes;
* side by side, the same runs submitted straight to the service over gRPC (SubmitRun, then
  GetRun waiting for each), with the same tiers: ``grpc_burst_s``, ``grpc_p99_overhead_s``,
  and ``ratio`` = ``burst_s / grpc_burst_s`` (what the Kubernetes path costs over the bare
  service).

With ``--faults ROUNDS`` (after the fault-free burst, and beside it) the service keeps a run
journal and each of ROUNDS more bursts of ``--runs`` runs has the service and, separately, the
operator SIGKILLed at random moments (uniform over the fault-free burst's length; ``--seed``)
and started again at once. Each run's task carries a ``[run NAME]`` tag and the tier logs every
call's tag and a digest of its messages, so duplicates are counted where the calls land:
``faults.duplicated`` is the runs any of whose calls reached the tier twice (``repeat_calls``
the repeats), ``faults.lost`` the runs that never finished, ``faults.failed`` the runs that
ended Failed, by reason (a run the service was killed while running ends ``Interrupted``: at
most once, never twice), and ``faults.p99_overhead_s`` that of the runs that succeeded.
``--no-journal`` runs the service without its journal: the control, in which a restarted
service forgets its runs and the operator's resubmits can run one twice.

Run: ``lemon bench runs --json`` (``--out FILE`` also writes the JSON object to FILE).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import harness
from lemon_cluster.controlplane import ControlPlane, ensure_binaries, ensure_tools
from lemon_cluster.launching import vendored_crds
from lemon_testing.watching import custom_objects
from lemon_testing.watching import follow as follow_kind

ROOT = harness.ROOT

GROUP, VERSION, PLURAL = "lemon.ai", "v1alpha1", "lemonruns"


def _inferenceservice_crd() -> Path:
    """KServe's InferenceService CRD as released (the pinned file ``lemon cluster up`` installs,
    its sha256 checked)."""
    return next(p for p in vendored_crds(ROOT) if "inferenceservices" in p.name)


NAMESPACE = "bench"
TASK = "Natalia sold 48 clips in April and half as many in May. How many clips in total?"
ROLES = ("planner", "math_solver", "verifier")


def _spec(agents: int) -> dict[str, Any]:
    team = []
    for i in range(agents):
        agent: dict[str, Any] = {"name": f"a{i}", "role": ROLES[i % 3], "capacity": "small"}
        if i:
            agent["depends_on"] = [f"a{i - 1}"]
        team.append(agent)
    return {"agents": team, "output": f"a{agents - 1}"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> None:
    kubectl = Path(sys.executable).with_name("kubectl")
    subprocess.run(
        [str(kubectl), f"--kubeconfig={kubeconfig}", f"--cache-dir={kubeconfig.parent / 'kc'}",
         *args],
        input=stdin, text=True, check=True, capture_output=True,
    )  # fmt: skip


def _wait_served(kubeconfig: Path, kinds: tuple[str, ...], timeout: float = 120.0) -> None:
    kubectl = Path(sys.executable).with_name("kubectl")
    deadline = time.monotonic() + timeout
    for kind in kinds:
        while True:
            proc = subprocess.run(
                [str(kubectl), f"--kubeconfig={kubeconfig}",
                 f"--cache-dir={kubeconfig.parent / 'kc'}", "explain", f"{kind}.spec"],
                text=True, capture_output=True, check=False,
            )  # fmt: skip
            if proc.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the API server never served the {kind} kind: {proc.stderr}")
            time.sleep(0.5)


def _wait_http(port: int, process: subprocess.Popen[Any], *, what: str) -> None:
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not start")


async def _health(target: str) -> bool:
    from lemon_api.client import ClientConfig, LemonClient

    try:
        async with LemonClient(ClientConfig(target=target)) as client:
            return await client.health(timeout=2) == "SERVING"
    except Exception:
        return False


class Processes:
    """The scripted tier, the service and the operator, as subprocesses logging to ``work``;
    each can be SIGKILLed and started again with the same command (its log appended to)."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.procs: dict[str, subprocess.Popen[Any]] = {}
        self._commands: dict[str, tuple[list[str], dict[str, str]]] = {}

    def spawn(self, name: str, command: list[str], *, env: dict[str, str] | None = None) -> Path:
        log = self.work / f"{name}.log"
        self._commands[name] = (command, env or {})
        with log.open("ab") as sink:
            self.procs[name] = subprocess.Popen(
                command, stdout=sink, stderr=subprocess.STDOUT, cwd=ROOT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            )  # fmt: skip
        return log

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    def restart(self, name: str) -> None:
        """SIGKILL, then the same command again at once."""
        self.kill(name)
        command, env = self._commands[name]
        self.spawn(name, command, env=env)

    def stop(self) -> None:
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


class Cluster:
    def __init__(self, kubeconfig: Path) -> None:
        self.custom = custom_objects(kubeconfig)

    def mark_ready(self, url: str) -> None:
        deadline = time.monotonic() + 60
        status = {"status": {"url": url, "conditions": [{"type": "Ready", "status": "True"}]}}
        while time.monotonic() < deadline:
            try:
                self.custom.patch_namespaced_custom_object_status(
                    "serving.kserve.io", "v1beta1", NAMESPACE, "inferenceservices",
                    "default-small", status,
                )  # fmt: skip
            except Exception:  # not created yet
                time.sleep(0.2)
                continue
            profile = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, NAMESPACE, "lemoncapacityprofiles", "default"
            )
            tiers = (profile.get("status") or {}).get("tiers") or []
            if any(tier.get("ready") and tier.get("url") == url for tier in tiers):
                return
            time.sleep(0.2)
        raise RuntimeError("the profile's small tier never became ready")

    def burst(
        self, count: int, *, agents: int, prefix: str, timeout: float = 610.0
    ) -> dict[str, Any]:
        """Create ``count`` runs at once; per run: the create time and the Succeeded time. Each
        run's task carries its ``[run NAME]`` tag (the tier logs it with each call)."""
        names = [f"{prefix}-{i}" for i in range(count)]
        created: dict[str, float] = {}
        finished: dict[str, float] = {}
        failed: set[str] = set()
        objects: dict[str, dict[str, Any]] = {}
        done = threading.Event()

        def seen(obj: dict[str, Any]) -> None:
            name = obj["metadata"]["name"]
            if name not in created:
                return
            phase = (obj.get("status") or {}).get("phase")
            if phase in ("Succeeded", "Failed") and name not in finished:
                finished[name] = time.perf_counter()
                objects[name] = obj
                if phase == "Failed":
                    failed.add(name)

        def follow() -> None:
            follow_kind(
                self.custom, group=GROUP, version=VERSION, namespace=NAMESPACE, plural=PLURAL,
                seen=seen, done=lambda: len(finished) == count,
            )  # fmt: skip
            done.set()

        def create(name: str) -> None:
            body = {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "LemonRun",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {"task": f"{TASK} [run {name}]", "spec": _spec(agents)},
            }
            created[name] = time.perf_counter()
            self.custom.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, body)

        follower = threading.Thread(target=follow, daemon=True)
        follower.start()
        time.sleep(0.5)  # the watch is open before the first create
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(create, names))
        done.wait(timeout)
        overhead = []
        walls = []
        reasons: Counter[str] = Counter()
        for name, end in finished.items():
            wall = float((objects[name].get("status") or {}).get("wallSeconds") or 0.0)
            if name in failed:
                conditions = (objects[name].get("status") or {}).get("conditions") or []
                reason = next(
                    (c.get("reason") for c in conditions if c.get("type") == "Succeeded"), None
                )
                reasons[reason or "?"] += 1
                continue
            walls.append(wall)
            overhead.append(end - created[name] - wall)
        return {
            "first_create": min(created.values()),
            "last_finish": max(finished.values()) if finished else float("nan"),
            "overhead": overhead,
            "walls": walls,
            "lost": count - len(finished),
            "failed": len(failed),
            "reasons": dict(reasons),
            "names": names,
            "uids": [obj["metadata"]["uid"] for obj in objects.values()],
            "created": created,
            "finished": finished,
        }


async def _grpc_burst(target: str, *, count: int, agents: int, tier_url: str) -> dict[str, Any]:
    """The same runs straight to the service: SubmitRun each, then GetRun until finished."""
    import yaml

    from lemon_api.client import ClientConfig, LemonClient
    from lemon_api.v1 import orchestrator_pb2 as pb

    spec = yaml.safe_dump(_spec(agents), sort_keys=False)
    tiers = [pb.TierEndpoint(tier="small", url=tier_url, model="small")]
    overhead: list[float] = []
    lost = 0

    async with LemonClient(ClientConfig(target=target)) as client:

        async def one(i: int) -> float:
            started = time.perf_counter()
            request = pb.SubmitRunRequest(
                run_id=f"direct-{i}", task=TASK, spec=spec, tiers=tiers, source=f"direct-{i}"
            )
            await client.submit_run(request, timeout=30)
            while True:
                state = await client.get_run(f"direct-{i}", wait_s=30, timeout=60)
                if state.phase in (state.SUCCEEDED, state.FAILED, state.CANCELLED):
                    break
            end = time.perf_counter()
            overhead.append(end - started - state.result.wall_s)
            return end

        started = time.perf_counter()
        ends = await asyncio.gather(*(one(i) for i in range(count)), return_exceptions=True)
    finished = [end for end in ends if isinstance(end, float)]
    lost = count - len(finished)
    return {"burst_s": max(finished) - started, "overhead": overhead, "lost": lost}


def _wait_serving(target: str, procs: Processes) -> None:
    deadline = time.monotonic() + 60
    while not asyncio.run(_health(target)):
        if time.monotonic() > deadline or procs.procs["service"].poll() is not None:
            raise RuntimeError("lemon serve did not start")
        time.sleep(0.2)


def _calls(log: Path) -> Counter[tuple[str, str]]:
    """The tier's calls by (run tag, messages digest) (``--log-calls`` lines)."""
    calls: Counter[tuple[str, str]] = Counter()
    for line in log.read_text().splitlines():
        if line.startswith("call "):
            _, tag, digest, _number = line.split()
            calls[(tag, digest)] += 1
    return calls


def _kill_at(
    procs: Processes, name: str, moment: float, target: str, killed: dict[str, float]
) -> None:
    """SIGKILL ``name`` at ``moment`` (perf_counter) and start it again at once."""
    time.sleep(max(0.0, moment - time.perf_counter()))
    killed[name] = time.perf_counter()
    procs.restart(name)
    if name == "service":
        _wait_serving(target, procs)


def _fault_rounds(
    cluster: Cluster,
    procs: Processes,
    *,
    target: str,
    tier_log: Path,
    rounds: int,
    runs: int,
    agents: int,
    span_s: float,
    seed: int,
) -> dict[str, Any]:
    """``rounds`` bursts, each with the service and the operator SIGKILLed (and restarted at
    once) at independent random moments in ``[0.1, 0.9] × span_s`` after the first create."""
    rng = random.Random(seed)
    per_round = []
    overhead: list[float] = []
    reasons: Counter[str] = Counter()
    lost = failed = 0
    names: list[str] = []
    for index in range(rounds):
        kills = {name: rng.uniform(0.1, 0.9) * span_s for name in ("service", "operator")}
        killed: dict[str, float] = {}

        t0 = time.perf_counter() + 0.5  # the burst's first create, after its watch opens
        threads = [
            threading.Thread(
                target=_kill_at, args=(procs, name, t0 + at, target, killed), daemon=True
            )
            for name, at in kills.items()
        ]
        for thread in threads:
            thread.start()
        measured = cluster.burst(runs, agents=agents, prefix=f"fault{index}", timeout=300)
        for thread in threads:
            thread.join(timeout=120)
        overhead += measured["overhead"]
        reasons.update(measured["reasons"])
        lost += measured["lost"]
        failed += measured["failed"]
        names += measured["names"]
        per_round.append(
            {
                "killed_at_s": {name: round(at - t0, 2) for name, at in killed.items()},
                "burst_s": round(measured["last_finish"] - measured["first_create"], 3),
                "lost": measured["lost"],
                "failed": measured["failed"],
                "reasons": measured["reasons"],
            }
        )
    calls = _calls(tier_log)
    ours = dict.fromkeys(names, 0)
    repeats = dict.fromkeys(names, 0)
    for (tag, _digest), count in calls.items():
        if tag in ours:
            ours[tag] += 1
            repeats[tag] += count - 1
    return {
        "rounds": rounds,
        "runs": rounds * runs,
        "seed": seed,
        "lost": lost,
        "duplicated": sum(1 for count in repeats.values() if count),
        "repeat_calls": sum(repeats.values()),
        "distinct_tier_calls": sum(ours.values()),
        "expected_tier_calls_at_most": rounds * runs * agents,
        "failed": failed,
        "failed_reasons": dict(reasons),
        "p50_overhead_s": round(statistics.median(overhead), 3) if overhead else None,
        "p99_overhead_s": round(harness.percentile(overhead, 0.99), 3) if overhead else None,
        "per_round": per_round,
    }


@dataclasses.dataclass
class _Stack:
    """The benchmark's running parts: the control plane's kubeconfig, the scripted tier, the
    service and the operator."""

    kubeconfig: Path
    target: str
    tier_port: int
    tier_log: Path
    cluster: Cluster


def _start_stack(
    plane: ControlPlane,
    procs: Processes,
    work: Path,
    logs: dict[str, Path],
    *,
    runs: int,
    latency: float,
    journal: bool,
) -> _Stack:
    bin_dir = Path(sys.executable).parent
    kubeconfig = plane.start()
    # KServe's own InferenceService CRD, vendored; too large for a client-side apply
    _kubectl(
        kubeconfig, "apply", "--server-side", "-f", str(ROOT / "crds"),
        "-f", str(_inferenceservice_crd()),
    )  # fmt: skip
    # kopf watches only the kinds that discovery serves when it starts (an InferenceService
    # kind it missed then is never watched, and the profile never sees its tier turn ready):
    # every CRD Established and each kind's schema published before the operator starts.
    _wait_served(kubeconfig, ("lemonrun", "lemoncapacityprofile", "inferenceservice"))
    _kubectl(kubeconfig, "create", "namespace", NAMESPACE)

    tier_port, service_port = _free_port(), _free_port()
    tier_log = work / "tier-calls.log"
    tier_log.touch()
    logs["tier"] = procs.spawn("tier", [
        sys.executable, "-m", "tests.service.openai_server", "--port", str(tier_port),
        "--latency", str(latency), "--log", str(tier_log), "--log-calls",
    ])  # fmt: skip
    _wait_http(tier_port, procs.procs["tier"], what="the scripted tier")
    target = f"127.0.0.1:{service_port}"
    logs["service"] = procs.spawn("service", [
        str(bin_dir / "lemon"), "serve", "--port", str(service_port), "--profile", "scripted",
        "--max-concurrency", str(max(64, runs)), "--max-waiting", str(max(64, runs)),
        *(("--run-journal", str(work / "runs.sqlite")) if journal else ()),
    ])  # fmt: skip
    _wait_serving(target, procs)
    logs["operator"] = procs.spawn(
        "operator",
        [str(bin_dir / "lemon-operator")],
        env={"KUBECONFIG": str(kubeconfig), "LEMON_SERVICE_TARGET": target},
    )
    profile = (
        "apiVersion: lemon.ai/v1alpha1\nkind: LemonCapacityProfile\n"
        "metadata: {name: default}\n"
        "spec: {small: {model: HuggingFaceTB/SmolLM2-135M-Instruct, costPerToken: 1.0e-8}}\n"
    )
    _kubectl(kubeconfig, "apply", "-n", NAMESPACE, "-f", "-", stdin=profile)
    cluster = Cluster(kubeconfig)
    cluster.mark_ready(f"http://127.0.0.1:{tier_port}")
    return _Stack(kubeconfig, target, tier_port, tier_log, cluster)


def run(
    *,
    runs: int,
    agents: int,
    latency: float,
    faults: int = 0,
    seed: int = 0,
    journal: bool = True,
) -> dict[str, Any]:
    plane = ControlPlane(ensure_binaries())
    ensure_tools(bin_dir=Path(sys.executable).parent)
    work = Path(tempfile.mkdtemp(prefix="lemon-bench-runs-"))
    procs = Processes(work)
    logs: dict[str, Path] = {}
    try:
        stack = _start_stack(plane, procs, work, logs, runs=runs, latency=latency, journal=journal)
        cluster = stack.cluster
        cluster.burst(1, agents=agents, prefix="warmup")  # the first run pays the set-ups
        pids = {
            "etcd": plane._procs[0].pid,
            "kube-apiserver": plane._procs[1].pid,
            **{name: proc.pid for name, proc in procs.procs.items()},
        }
        calls_before, cpu_before = _tier_calls(stack.tier_log), _cpu(pids)
        requests_before = _api_requests(stack.kubeconfig)
        measured = cluster.burst(runs, agents=agents, prefix="run")
        cpu_after = _cpu(pids)
        requests = {
            key: round((count - requests_before.get(key, 0.0)) / runs, 2)
            for key, count in _api_requests(stack.kubeconfig).items()
            if count > requests_before.get(key, 0.0)
        }
        measured["tier_calls"] = _tier_calls(stack.tier_log) - calls_before
        service_log = logs["service"].read_text(errors="replace")
        starts = [
            len(re.findall(rf"run {re.escape(uid)} \(.*\): started", service_log))
            for uid in measured["uids"]
        ]
        measured["duplicated"] = sum(1 for count in starts if count > 1)
        burst_s = measured["last_finish"] - measured["first_create"]
        faulted = None
        if faults:
            faulted = _fault_rounds(
                cluster, procs, target=stack.target, tier_log=stack.tier_log, rounds=faults,
                runs=runs, agents=agents, span_s=burst_s, seed=seed,
            )  # fmt: skip
        direct = asyncio.run(
            _grpc_burst(
                stack.target,
                count=runs,
                agents=agents,
                tier_url=f"http://127.0.0.1:{stack.tier_port}/v1",
            )
        )
    except Exception:
        for name, log in logs.items():
            print(f"--- {name}\n{log.read_text(errors='replace')[-3000:]}", file=sys.stderr)
        raise
    finally:
        procs.stop()
        plane.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    result = _result(measured, direct, runs=runs, agents=agents, latency=latency)
    result["cpu_s"] = {name: round(cpu_after[name] - cpu_before[name], 2) for name in cpu_after}
    result["api_requests_per_run"] = requests
    result["load_average"] = [round(value, 2) for value in os.getloadavg()]
    if faulted is not None:
        result["faults"] = {"journal": journal, **faulted}
    return result


def _result(
    measured: dict[str, Any], direct: dict[str, Any], *, runs: int, agents: int, latency: float
) -> dict[str, Any]:
    """The fault-free burst's figures beside the same burst sent straight to the service."""
    overhead = measured["overhead"]
    burst_s = measured["last_finish"] - measured["first_create"]
    return {
        "benchmark": "runs",
        "runs": runs,
        "agents": agents,
        "tier_latency_s": latency,
        "burst_s": round(burst_s, 3),
        "p50_overhead_s": round(statistics.median(overhead), 3) if overhead else None,
        "p99_overhead_s": round(harness.percentile(overhead, 0.99), 3) if overhead else None,
        "max_overhead_s": round(max(overhead), 3) if overhead else None,
        "engine_wall_p50_s": round(statistics.median(measured["walls"]), 3)
        if measured["walls"]
        else None,
        "lost": measured["lost"],
        "failed": measured["failed"],
        "duplicated": measured["duplicated"],
        "tier_calls": measured["tier_calls"],
        "expected_tier_calls": runs * agents,
        "grpc_burst_s": round(direct["burst_s"], 3),
        "grpc_p99_overhead_s": round(harness.percentile(direct["overhead"], 0.99), 3),
        "grpc_lost": direct["lost"],
        "ratio": harness.ratio(burst_s, direct["burst_s"], digits=2),
    }


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu(pids: dict[str, int]) -> dict[str, float]:
    own = os.times()
    return {"client": own.user + own.system, **{name: _cpu_s(pid) for name, pid in pids.items()}}


_REQUEST = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<count>\S+)$", re.M)
_COUNTED = {"lemonruns", "configmaps", "events", "lemoncapacityprofiles", "lemonspecs"}


def _api_requests(kubeconfig: Path) -> dict[str, float]:
    """The API server's request counters (its /metrics) by verb and resource, for the kinds a
    run touches; watches and lists (the client's and kopf's streams) left out."""
    kubectl = Path(sys.executable).with_name("kubectl")
    text = subprocess.run(
        [str(kubectl), f"--kubeconfig={kubeconfig}", "get", "--raw", "/metrics"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    counts: dict[str, float] = {}
    for match in _REQUEST.finditer(text):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
        verb, resource = labels.get("verb", ""), labels.get("resource", "")
        if resource in _COUNTED and verb not in ("WATCH", "LIST"):
            sub = labels.get("subresource")
            key = f"{verb} {resource}{'/' + sub if sub else ''}"
            counts[key] = counts.get(key, 0.0) + float(match["count"])
    return counts


def _tier_calls(log: Path) -> int:
    return sum(1 for line in log.read_text().splitlines() if line.startswith("start "))


def main(argv: list[str] | None = None) -> int:
    bench = harness.Harness("runs", __doc__, out=True)
    parser = bench.parser
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--agents", type=int, default=3, help="agents per run, in a chain")
    parser.add_argument("--latency", type=float, default=0.05, help="tier seconds per call")
    parser.add_argument(
        "--faults",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="then ROUNDS bursts with the service and the operator SIGKILLed at random moments",
    )
    parser.add_argument("--seed", type=int, default=0, help="the kill moments' seed")
    parser.add_argument(
        "--no-journal",
        action="store_true",
        help="the service without its run journal (the control: a restart forgets its runs)",
    )
    args = bench.parse(argv)
    if not 1 <= args.agents <= 64:
        parser.error("--agents: 1 to 64")
    if args.faults < 0:
        parser.error("--faults: 0 or more rounds")
    result = run(
        runs=args.runs, agents=args.agents, latency=args.latency, faults=args.faults,
        seed=args.seed, journal=not args.no_journal,
    )  # fmt: skip
    return bench.finish(args, result)


if __name__ == "__main__":
    raise SystemExit(main())
