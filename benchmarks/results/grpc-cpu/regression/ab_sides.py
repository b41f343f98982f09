"""One side of the gRPC A/B: `lemon serve` from CODE (a checkout; '' for this one) under
HEAD's bench client (64 clients, 1 warm-up + PER measured requests each); prints one JSON line:
rps, p50/p99 outside the engine, server CPU ms per request."""
import asyncio, json, os, signal, subprocess, sys, tempfile
from pathlib import Path
sys.path.insert(0, "/work/main/benchmarks"); sys.path.insert(0, "/work/main")
import bench_grpc as b
code, per, extra = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
env = dict(os.environ)
if code:
    env["PYTHONPATH"] = f"{code}/src:{code}/operator:{code}/services:{code}/training_jobs"
with tempfile.TemporaryDirectory() as tmp:
    profiles = b._profile_file(Path(tmp), 0.02)
    port = b._free_port()
    proc = subprocess.Popen(["/work/main/.venv/bin/lemon", "serve", "--port", str(port), "--profile", "bench",
        "--profiles", str(profiles), "--max-concurrency", "64", "--max-waiting", "64", *extra],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    s = b._Server.__new__(b._Server); s.process = proc; s.target = f"127.0.0.1:{port}"; s.port = port
    try:
        asyncio.run(s.wait_ready())
        cpu0 = b._cpu_s(proc.pid)
        r = asyncio.run(b._load(s.target, clients=64, per_client=per, warmup=1))
        cpu = b._cpu_s(proc.pid) - cpu0
        print(json.dumps({"code": code or "HEAD", "extra": extra, "rps": r["rps"], "p50_ms": r["p50_ms"],
            "p99_ms": r["p99_ms"], "cold_p99_ms": r["cold_p99_ms"], "lost": r["lost"], "duplicated": r["duplicated"],
            "server_cpu_ms": round(cpu / r["requests_sent"] * 1000, 3), "load": os.getloadavg()[0]}))
    finally:
        s.stop()
