"""The sandbox in a process that holds live gRPC channels, as ``lemon serve`` does.

Python code run between fork and exec (a ``preexec_fn``) makes CPython fork instead of vfork,
and gRPC's fork handlers then restart its poller in the child, which crashed about one sandbox
child in a hundred before it exec'd (SIGSEGV or SIGABRT, "epoll_wait error: Bad file
descriptor"; grpc/grpc#43055): a tool role answered "Error: no error message" and a run
failed. The sandbox sets its limits with ``prlimit`` on the command line instead; this runs
enough programs beside busy gRPC traffic that the old way fails it nearly always (4 and 5 of
300 in two runs here; P(no crash in 300) at 1.5% per run is about 1%).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from lemon.sandbox import SandboxConfig, run_programs


@pytest.fixture
def busy_grpc() -> Iterator[None]:
    """A real gRPC server in this process and two client threads calling it without pause."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    stop = threading.Event()
    calls = [0]

    def hammer() -> None:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while not stop.is_set():
                stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
                calls[0] += 1

    threads = [threading.Thread(target=hammer, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=15)
        server.stop(grace=None).wait(timeout=15)
    assert calls[0] > 0, "the gRPC clients made no call: the test exercised nothing"


def test_sandbox_children_survive_live_grpc_channels(busy_grpc: None) -> None:
    count = 300
    sources = [f"print({k} * 7)" for k in range(count)]
    results = run_programs(sources, config=SandboxConfig(timeout_s=20, workers=8))
    wrong = [
        (k, r.status, r.returncode, r.stderr[-200:])
        for k, r in enumerate(results)
        if not r.passed or r.stdout.strip() != str(k * 7)
    ]
    assert not wrong, f"{len(wrong)} of {count} runs failed beside gRPC: {wrong[:5]}"
