"""Real processes for the service tests: ``lemon serve`` on loopback, and a small real
OpenAI-compatible HTTP server for the tiers that must be slow, die or see cancellations."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lemon_testing.otlp_receiver import OTLPReceiver
from tests.conftest import LEMON, ROOT

STARTUP_S = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serving(target: str, *, tls: dict[str, Path] | None = None) -> bool:
    from lemon_api.client import ClientConfig, LemonClient

    async def check() -> str:
        config = ClientConfig(target=target, **(tls or {}))
        async with LemonClient(config) as client:
            return await client.health(timeout=2)

    # A thread of its own: asyncio.run refuses to start where an earlier test left this thread's
    # running loop set (in the whole suite, after tests/browser and tests/k8s/test_cluster_models,
    # it failed every check, and each service fixture timed out)
    def probe() -> bool:
        try:
            return asyncio.run(check()) == "SERVING"
        except Exception:
            return False

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(probe).result()


class ServeProcess:
    """``lemon serve ARGS`` on a free loopback port, ready once its health check says SERVING."""

    def __init__(
        self,
        *args: str,
        log_dir: Path,
        tls: dict[str, Path] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.target = f"127.0.0.1:{self.port}"
        self.log = log_dir / f"serve-{self.port}.log"
        self.args, self.tls, self.env = args, tls, env
        self.log.write_text("")
        self._launch()

    def _launch(self) -> None:
        """Start ``lemon serve`` on this object's port (its log appended to)."""
        self.process = subprocess.Popen(
            [str(LEMON), "serve", "--port", str(self.port), *self.args],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=self.log.open("a"),
            env={**os.environ, **(self.env or {})},
        )
        deadline = time.monotonic() + STARTUP_S
        while not _serving(self.target, tls=self.tls):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"lemon serve did not start:\n{self.log.read_text()}")
            time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL: no drain, no shutdown handler (a crash, an OOM kill)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def restart(self) -> None:
        """Killed, then started again on the same port with the same arguments."""
        self.kill()
        self._launch()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _healthy(url: str, process: subprocess.Popen[str]) -> bool:
    """Whether ``url`` answers 200 before ``process`` exits or STARTUP_S pass."""
    deadline = time.monotonic() + STARTUP_S
    while process.poll() is None and time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return False


class OpenAIServer:
    """tests/service/openai_server.py as a subprocess; ``events()`` reads its call log."""

    def __init__(
        self,
        log_dir: Path,
        *,
        latency: float,
        answer: str | None = None,
        ignore_max_tokens: bool = False,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = log_dir / f"openai-{self.port}.log"
        self.log.touch()
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "tests.service.openai_server", "--port", str(self.port)),
                *("--latency", str(latency), "--log", str(self.log)),
                *(("--answer", answer) if answer is not None else ()),
                *(("--ignore-max-tokens",) if ignore_max_tokens else ()),
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if not _healthy(f"http://127.0.0.1:{self.port}/health", self.process):
            self.kill()
            raise RuntimeError("openai test server did not start")

    def events(self) -> list[str]:
        return self.log.read_text().split("\n")[:-1]

    def count(self, kind: str) -> int:
        return sum(1 for line in self.events() if line.startswith(kind + " "))

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def profile_file(self, path: Path, *, name: str = "httptiers") -> Path:
        tier = {"type": "openai", "url": self.url, "model": "test", "timeout_s": 30}
        profile = {"name": name, "tiers": dict.fromkeys(("small", "medium", "large"), tier)}
        path.write_text(json.dumps({"profiles": [profile]}))  # JSON is YAML
        return path


def scripted_profile(path: Path, *, latency: float, name: str = "slowscripted") -> Path:
    """The scripted test double with a fixed latency per call (a profile file)."""
    tier = {"type": "scripted", "scripted": {"latency_s": latency}}
    profile = {"name": name, "tiers": dict.fromkeys(("small", "medium", "large"), tier)}
    path.write_text(json.dumps({"profiles": [profile]}))  # JSON is YAML
    return path


@pytest.fixture(scope="session")
def service_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("service")


@pytest.fixture(scope="session")
def scripted_server(service_logs: Path) -> Iterator[ServeProcess]:
    """The scripted test double behind a server with default limits but a small task limit."""
    server = ServeProcess(
        "--profile",
        "scripted",
        "--max-task-chars",
        "2000",
        "--max-message-bytes",
        "65536",
        log_dir=service_logs,
    )
    yield server
    server.stop()


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``GET /metrics`` parsed by prometheus_client's own text parser: one value per sample,
    keyed by (sample name, sorted labels)."""
    from prometheus_client.parser import text_string_to_metric_families

    response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    response.raise_for_status()
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


@pytest.fixture
def otlp_receiver(service_logs: Path) -> Iterator[OTLPReceiver]:
    receiver = OTLPReceiver(service_logs)
    yield receiver
    receiver.kill()
