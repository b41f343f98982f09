"""gRPC service load: 64 concurrent clients against a real ``lemon serve`` process.

The server runs the scripted backend (a test double, not a model) with a fixed latency L per
call, and every response carries the engine's wall time for its run (``wall_s``).

What is timed, and what is not:

- ``p50_ms``/``p99_ms``: the time *outside the engine*, each request's end-to-end latency at
  the client minus its own run's ``wall_s``: serialization, HTTP/2, admission, conversion, the
  asyncio hops. It leaves out how much the run itself slowed down because the server was busy:
  the engine shares the server's event loop and CPU with all the other requests, so under load
  its ``wall_s`` grows (``server_engine_wall_p50_ms`` against ``one_client_engine_wall_p50_ms``)
  and that growth is subtracted. It is a lower bound on the service's cost under load.
- Which requests: each client first sends ``--warmup`` requests (default 1: its first call
  opens its channel, and all 64 first calls arrive at the same instant), then ``--per-client``
  measured ones (default 100, 6,400 in all: 64 above the p99; at 20 a client, the old default,
  the p99 was the 13th-slowest of 1,280 and fell inside the opening burst, where even the bare
  floor server measured 25 ms). The percentiles are over the measured requests;
  ``cold_p99_ms`` (and ``floor_cold_p99_ms``) over all of them, warm-ups included.
- ``e2e_p50_ms``/``e2e_p99_ms``: end-to-end latency, everything included.
- ``e2e_over_one_client_p50``: the end-to-end p50 under load over the one-client phase's, on
  the same server: what the concurrent load costs each request, queueing, the server's CPU and
  the engine's slowdown included.
- ``engine_only_rps``, ``engine_wall_p50_ms``, ``rps_vs_engine_only``: the same runs called
  in-process through ``run_task`` at the same concurrency (no gRPC). The in-process side runs its
  64 callers and the engine on one event loop, one core, while the gRPC side spreads clients and
  server over two processes, so this is not a clean measure of the service's cost.

- ``floor_p50_ms``/``floor_p99_ms``/``floor_rps``: the baseline side by side, a bare grpc.aio
  server (``--echo-server``: the same proto, no LEMON code) that answers each Orchestrate after
  sleeping the one-client engine wall time, loaded by the same clients: what this harness's
  Python client and grpc.aio cost at this concurrency on this machine, the floor under
  ``p99_ms``. ``server_cpu_ms_per_request`` and ``floor_cpu_ms_per_request``: each server's CPU
  time over the requests of the loaded phase. Both servers run on the same event loop
  (``event_loop``: ``lemon serve --event-loop``, uvloop by default); the clients run on
  asyncio's own.

Also reported: ``rps`` (requests answered per second), ``lost`` (request ids never answered) and
``duplicated`` (ids answered more than once, or answered with another id). A one-client phase
first gives the cost without queueing (``one_client_p50_ms``). ghz (a generic load tool built
through the Go module proxy) runs against the same server.

``--rpc submit`` sends each request as a SubmitRun that waits for its result, with a new run
id (the path of a LemonRun: the run store, and the journal when there is one; Orchestrate
touches neither). ``--run-journal`` serves with a run journal, as ``lemon cluster`` and the Helm
chart run the service (each run's accepted, running and finished records committed to SQLite
on the server's event loop before it goes on). ``rpc`` and ``run_journal`` in the result say
which; the floor and ghz call Orchestrate either way.

Run: ``lemon bench grpc --json`` (``--out FILE`` also writes the JSON object to FILE).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import harness
from lemon_testing.tools import ensure_tool

TASK = "Natalia sold 48 clips in April and half as many in May. How many clips in total?"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _profile_file(directory: Path, latency: float) -> Path:
    tier = {"type": "scripted", "scripted": {"latency_s": latency}}  # no limit on calls in flight
    profile = {"name": "bench", "tiers": dict.fromkeys(("small", "medium", "large"), tier)}
    path = directory / "profiles.yaml"
    path.write_text(json.dumps({"profiles": [profile]}))  # JSON is YAML
    return path


class _Server:
    def __init__(
        self, profiles: Path, *, concurrency: int, event_loop: str, journal: Path | None = None
    ) -> None:
        self.port = _free_port()
        self.target = f"127.0.0.1:{self.port}"
        lemon = Path(sys.executable).with_name("lemon")
        # a file, not a pipe nobody reads: the run store logs each run's phases, and a full
        # pipe (64 KiB, a few hundred SubmitRuns) would stop the server mid-benchmark
        self.log = (profiles.parent / f"serve-{self.port}.log").open("w+", encoding="utf-8")
        self.process = subprocess.Popen(
            [
                *(str(lemon), "serve", "--port", str(self.port), "--profile", "bench"),
                *("--profiles", str(profiles), "--max-concurrency", str(concurrency)),
                *("--max-waiting", str(concurrency)),
                *("--event-loop", event_loop),
                *(() if journal is None else ("--run-journal", str(journal))),
            ],
            stdout=subprocess.DEVNULL,
            stderr=self.log,
            text=True,
        )

    async def wait_ready(self, timeout: float = 60.0) -> None:
        from lemon_api.client import ClientConfig, LemonClient

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"lemon serve exited: {self.log.read()[-2000:]}")
            try:
                async with LemonClient(ClientConfig(target=self.target)) as client:
                    if await client.health(timeout=2) == "SERVING":
                        return
            except Exception:
                await asyncio.sleep(0.2)
        raise RuntimeError("lemon serve did not become ready")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


async def _load(
    target: str,
    *,
    clients: int,
    per_client: int,
    warmup: int = 1,
    rpc: str = "orchestrate",
    tag: str = "",
) -> dict[str, Any]:
    """``clients`` clients (one channel each) send ``warmup`` + ``per_client`` requests each,
    back to back. The percentiles and ``rps`` are over the ``per_client`` requests after each
    client's warm-up (its first call opens its channel, and all the clients' first calls
    arrive at once); ``cold_p99_ms`` is over every request, the warm-ups included. ``rps``:
    every answered request over the whole phase. ``rpc``: ``orchestrate`` (one Orchestrate a
    request) or ``submit`` (one SubmitRun with ``wait_s``, the operator's durable path: a new
    run id a request, answered finished); ``tag`` prefixes the request ids (run ids must be new
    in each phase)."""
    from lemon_api.client import ClientConfig, LemonClient, run_options
    from lemon_api.v1 import orchestrator_pb2 as pb

    # the 3-agent template team, named: with no spec the service runs its default policy
    template = run_options(template="default")

    async def call(client: LemonClient, request_id: str) -> Any:
        if rpc == "orchestrate":
            return await client.orchestrate(
                TASK, options=template, request_id=request_id, timeout=60
            )
        state = await client.submit_run(
            pb.SubmitRunRequest(run_id=request_id, task=TASK, wait_s=55, options=template),
            timeout=60,
        )
        if not state.created or state.phase != pb.RunState.SUCCEEDED:
            raise RuntimeError(f"run {request_id}: created {state.created}, phase {state.phase}")
        return pb.RunResponse(
            request_id=state.run_id, status=state.result.status, wall_s=state.result.wall_s
        )

    overhead: list[float] = []
    cold: list[float] = []
    e2e: list[float] = []
    engine_walls: list[float] = []
    answered: Counter[str] = Counter()
    mismatched = errors = 0

    async def client_loop(number: int) -> None:
        nonlocal mismatched, errors
        async with LemonClient(ClientConfig(target=target)) as client:
            for i in range(warmup + per_client):
                request_id = f"{tag}c{number}-r{i}"
                started = time.perf_counter()
                try:
                    response = await call(client, request_id)
                except Exception:
                    errors += 1
                    continue
                took = time.perf_counter() - started
                answered[response.request_id] += 1
                if response.request_id != request_id or response.status != "succeeded":
                    mismatched += 1
                cold.append(took - response.wall_s)
                if i < warmup:
                    continue
                e2e.append(took)
                engine_walls.append(response.wall_s)
                overhead.append(took - response.wall_s)

    async with LemonClient(ClientConfig(target=target)) as warm:  # connections, imports
        for i in range(5):
            await call(warm, f"{tag}warm-{i}")
    started = time.perf_counter()
    await asyncio.gather(*(client_loop(n) for n in range(clients)))
    wall = time.perf_counter() - started
    sent = {f"{tag}c{n}-r{i}" for n in range(clients) for i in range(warmup + per_client)}
    return {
        "requests": clients * per_client,
        "requests_sent": len(sent),
        "warmup_per_client": warmup,
        "rps": round(sum(answered.values()) / wall, 1),
        "p50_ms": round(harness.percentile(overhead, 0.5) * 1000, 2),
        "p99_ms": round(harness.percentile(overhead, 0.99) * 1000, 2),
        "cold_p99_ms": round(harness.percentile(cold, 0.99) * 1000, 2),
        "e2e_p50_ms": round(harness.percentile(e2e, 0.5) * 1000, 2),
        "e2e_p99_ms": round(harness.percentile(e2e, 0.99) * 1000, 2),
        "server_engine_wall_p50_ms": round(harness.percentile(engine_walls, 0.5) * 1000, 2),
        "lost": len(sent - set(answered)),
        "duplicated": sum(c - 1 for c in answered.values() if c > 1) + mismatched,
        "errors": errors,
        "wall_s": round(wall, 3),
    }


async def _engine_only(profiles: Path, *, clients: int, per_client: int) -> dict[str, Any]:
    """The same runs in-process (run_task, one backend set), ``clients`` at a time."""
    from lemon.capacity import build_backends, close_backends, resolve_profile
    from lemon.orchestration import RunTiers, run_task

    profile = resolve_profile("bench", files=[profiles])
    backends = build_backends(profile)
    tiers = RunTiers.of(profile, backends)
    walls: list[float] = []

    async def loop() -> None:
        for _ in range(per_client):
            result = await run_task(TASK, tiers=tiers)
            walls.append(result.wall_s)

    started = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(clients)))
    wall = time.perf_counter() - started
    await close_backends(backends)
    return {
        "engine_only_rps": round(len(walls) / wall, 1),
        "engine_wall_p50_ms": round(statistics.median(walls) * 1000, 2),
    }


async def _echo_server(port: int, wall_s: float) -> None:
    """The floor's server: grpc.aio and the proto, nothing else (``--echo-server PORT WALL``)."""
    import grpc

    from lemon_api.v1 import orchestrator_pb2 as pb
    from lemon_api.v1 import orchestrator_pb2_grpc as pb_grpc

    class Echo(pb_grpc.OrchestratorServicer):
        async def Orchestrate(self, request: Any, context: Any) -> Any:
            started = time.perf_counter()
            await asyncio.sleep(wall_s)
            return pb.RunResponse(
                request_id=request.request_id,
                status="succeeded",
                wall_s=time.perf_counter() - started,
            )

    server = grpc.aio.server()
    pb_grpc.add_OrchestratorServicer_to_server(Echo(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _floor(
    *, wall_s: float, clients: int, per_client: int, warmup: int, event_loop: str
) -> dict[str, Any]:
    """The same load against the bare grpc.aio server (a subprocess, on the service's loop)."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, __file__, "--echo-server", str(port), str(wall_s), event_loop],
        cwd=harness.ROOT,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the floor's echo server did not start") from None
                time.sleep(0.1)
        target = f"127.0.0.1:{port}"
        asyncio.run(_load(target, clients=1, per_client=5))
        cpu = _cpu_s(process.pid)
        load = asyncio.run(_load(target, clients=clients, per_client=per_client, warmup=warmup))
        cpu = _cpu_s(process.pid) - cpu
    finally:
        process.kill()
        process.wait()
    return {
        "floor_p50_ms": load["p50_ms"],
        "floor_p99_ms": load["p99_ms"],
        "floor_cold_p99_ms": load["cold_p99_ms"],
        "floor_rps": load["rps"],
        "floor_cpu_ms_per_request": round(cpu / load["requests_sent"] * 1000, 3),
    }


def _ghz(target: str, *, clients: int, total: int) -> dict[str, Any]:
    ghz = ensure_tool("ghz")
    done = subprocess.run(
        [
            *(str(ghz), "--insecure", "--call", "lemon.v1.Orchestrator/Orchestrate"),
            *("-d", json.dumps({"task": TASK, "options": {"template": "default"}})),
            *("-n", str(total), "-c", str(clients)),
            *("--connections", str(min(clients, 16)), "--format", "json", target),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        return {"ghz_error": done.stderr.strip()[-500:]}
    report = json.loads(done.stdout)
    latencies = {d["percentage"]: d["latency"] / 1e6 for d in report["latencyDistribution"]}
    return {
        "ghz_rps": round(report["rps"], 1),
        "ghz_count": report["count"],
        "ghz_status": report["statusCodeDistribution"],
        "ghz_e2e_p50_ms": round(latencies.get(50, float("nan")), 2),
        "ghz_e2e_p99_ms": round(latencies.get(99, float("nan")), 2),
    }


def _summary(result: dict[str, Any]) -> str:
    return (
        f"{result['rps']} rps over gRPC ({result['rps_vs_engine_only']}x in-process); "
        f"time outside the engine p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms "
        f"(engine p50 {result['server_engine_wall_p50_ms']} ms under load, "
        f"{result['one_client_engine_wall_p50_ms']} ms alone); "
        f"end-to-end p50 {result['e2e_over_one_client_p50']}x one client's; "
        f"lost {result['lost']}, duplicated {result['duplicated']}"
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--echo-server"]:  # the floor's server, started by _floor
        from lemon_service.server import run_serving

        run_serving(_echo_server(int(argv[1]), float(argv[2])), event_loop=argv[3])
        return 0
    from lemon_service.server import event_loop_name
    from lemon_service.settings import EVENT_LOOPS

    bench = harness.Harness("grpc", __doc__, out=True)
    parser = bench.parser
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument(
        "--per-client",
        type=int,
        default=100,
        help="measured requests per client, after its warm-up (default 100: 6,400 at 64 "
        "clients, 64 above the p99)",
    )
    parser.add_argument(
        "--warmup", type=int, default=1, help="requests per client before the measured ones"
    )
    parser.add_argument("--latency", type=float, default=0.02, help="L, seconds per model call")
    parser.add_argument(
        "--single", type=int, default=50, help="requests of the one-client (unloaded) phase"
    )
    parser.add_argument("--no-ghz", action="store_true", help="skip the ghz side-by-side run")
    parser.add_argument(
        "--event-loop",
        choices=EVENT_LOOPS,
        default="auto",
        help="lemon serve's --event-loop, and the floor server's (default auto: uvloop)",
    )
    parser.add_argument(
        "--rpc",
        choices=("orchestrate", "submit"),
        default="orchestrate",
        help="what each request calls: Orchestrate (default), or SubmitRun waiting for the "
        "result (a new run id a request: the run store, and with --run-journal the journal, "
        "which Orchestrate does not touch); the floor and ghz call Orchestrate either way",
    )
    parser.add_argument(
        "--run-journal",
        action="store_true",
        help="serve with a run journal (lemon serve --run-journal, in a temporary directory), "
        "as lemon cluster and the Helm chart run the service: each run's three durable writes",
    )
    args = bench.parse(argv)
    load_before = round(os.getloadavg()[0], 2)  # a shared machine: say how busy it was
    with tempfile.TemporaryDirectory() as tmp:
        profiles = _profile_file(Path(tmp), args.latency)
        journal = Path(tmp) / "runs.journal" if args.run_journal else None
        server = _Server(
            profiles, concurrency=args.clients, event_loop=args.event_loop, journal=journal
        )
        try:
            asyncio.run(server.wait_ready())
            single = asyncio.run(
                _load(server.target, clients=1, per_client=args.single, rpc=args.rpc, tag="one-")
            )
            cpu = _cpu_s(server.process.pid)
            load = asyncio.run(
                _load(
                    server.target,
                    clients=args.clients,
                    per_client=args.per_client,
                    warmup=args.warmup,
                    rpc=args.rpc,
                )
            )
            server_cpu = _cpu_s(server.process.pid) - cpu
            ghz = (
                {}
                if args.no_ghz
                else _ghz(server.target, clients=args.clients, total=load["requests"])
            )
        finally:
            server.stop()
        engine = asyncio.run(
            _engine_only(profiles, clients=args.clients, per_client=args.per_client)
        )
    floor = _floor(
        wall_s=single["server_engine_wall_p50_ms"] / 1000,
        clients=args.clients,
        per_client=args.per_client,
        warmup=args.warmup,
        event_loop=args.event_loop,
    )
    result = {
        "benchmark": "grpc",
        "backend": "scripted test double (fixed latency), 3-agent template team",
        "clients": args.clients,
        "latency_s": args.latency,
        "event_loop": event_loop_name(args.event_loop),
        "rpc": args.rpc,
        "run_journal": args.run_journal,
        **load,
        **engine,
        "rps_vs_engine_only": harness.ratio(load["rps"], engine["engine_only_rps"], digits=3),
        "e2e_over_one_client_p50": harness.ratio(
            load["e2e_p50_ms"], single["e2e_p50_ms"], digits=3
        ),
        "one_client_p50_ms": single["p50_ms"],
        "one_client_p99_ms": single["p99_ms"],
        "one_client_e2e_p50_ms": single["e2e_p50_ms"],
        "one_client_engine_wall_p50_ms": single["server_engine_wall_p50_ms"],
        "one_client_lost": single["lost"],
        "one_client_duplicated": single["duplicated"],
        "server_cpu_ms_per_request": round(server_cpu / load["requests_sent"] * 1000, 3),
        **floor,
        **ghz,
        "cpus": os.cpu_count(),
        "loadavg_1m_before": load_before,
    }
    clean = load["lost"] == load["duplicated"] == single["lost"] == single["duplicated"] == 0
    return bench.finish(args, result, text=_summary, code=0 if clean else 1)


if __name__ == "__main__":
    raise SystemExit(main())
