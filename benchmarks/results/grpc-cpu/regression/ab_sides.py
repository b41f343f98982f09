"""One side of the gRPC A/B across commits.

``lemon serve`` from the checkout CODE ('' for this one) under this checkout's bench client
(64 clients, one warm-up and PER measured requests each); prints one JSON line: requests/s,
p50/p99 outside the engine, server CPU ms per request. Usage: ``python ab_sides.py CODE PER
[--rpc submit] [lemon serve flags]`` (``--rpc submit``: each request a SubmitRun waiting for
its result, as ``lemon bench grpc --rpc submit``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
# the harness, loaded from its file (a script beside the others, not an installed module)
_spec = importlib.util.spec_from_file_location("bench_grpc", ROOT / "benchmarks/bench_grpc.py")
assert _spec is not None
assert _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def main() -> None:
    code, per, extra = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    rpc = "orchestrate"
    if extra[:1] == ["--rpc"]:
        rpc, extra = extra[1], extra[2:]
    env = dict(os.environ)
    if code:
        parts = ("src", "operator", "services", "training_jobs")
        env["PYTHONPATH"] = ":".join(f"{code}/{part}" for part in parts)
    with tempfile.TemporaryDirectory() as tmp:
        profiles = bench._profile_file(Path(tmp), 0.02)
        port = bench._free_port()
        command = [
            *(str(ROOT / ".venv/bin/lemon"), "serve", "--port", str(port)),
            *("--profile", "bench", "--profiles", str(profiles)),
            *("--max-concurrency", "64", "--max-waiting", "64", *extra),
        ]
        log = (Path(tmp) / "serve.log").open("w+", encoding="utf-8")  # a pipe would fill
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=log, text=True
        )
        server = bench._Server.__new__(bench._Server)
        server.process, server.port, server.target = process, port, f"127.0.0.1:{port}"
        server.log = log
        try:
            asyncio.run(server.wait_ready())
            before = bench._cpu_s(process.pid)
            load = asyncio.run(
                bench._load(server.target, clients=64, per_client=per, warmup=1, rpc=rpc)
            )
            cpu = bench._cpu_s(process.pid) - before
            keys = ("rps", "p50_ms", "p99_ms", "cold_p99_ms", "lost", "duplicated")
            line: dict[str, object] = {"code": code or "HEAD", "rpc": rpc, "extra": extra}
            line.update({k: load[k] for k in keys})
            line["server_cpu_ms"] = round(cpu / load["requests_sent"] * 1000, 3)
            line["load"] = os.getloadavg()[0]
            print(json.dumps(line))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
