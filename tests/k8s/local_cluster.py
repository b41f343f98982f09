"""``lemon cluster up`` as a user runs it: a real foreground process, its printed lines read as
they come, kubectl against the KUBECONFIG it prints, ``lemon cluster status|down`` beside it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LEMON, ROOT, run_lemon

KUBECTL = LEMON.with_name("kubectl")


class LocalCluster:
    """One ``lemon cluster up --state-dir STATE`` and what it printed so far."""

    def __init__(self, state: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.state = state
        self.env = {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [str(LEMON), "cluster", "up", "--state-dir", str(state), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
            env=self.env,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.kubeconfig = Path(
            self.wait_line(lambda line: line.startswith("export KUBECONFIG="), timeout=300)
            .split("=", 1)[1]
            .strip()
        )

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_line(self, match: Callable[[str], bool], *, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            for line in self.lines[seen:]:
                if match(line):
                    return line
            seen = len(self.lines)
            if self.process.poll() is not None and seen == len(self.lines):
                pytest.fail(
                    f"lemon cluster up exited ({self.process.returncode}):\n{self.output()}"
                )
            time.sleep(0.2)
        pytest.fail(f"no such line in {timeout:.0f} s:\n{self.output()[-6000:]}")

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(KUBECTL), *args],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**self.env, "KUBECONFIG": str(self.kubeconfig)},
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{proc.stderr}")
        return proc

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        found = self.kubectl("get", kind, name, "-o", "json", check=False)
        return json.loads(found.stdout) if found.returncode == 0 else None

    def wait(self, check: Callable[[], Any], *, what: str, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = check()
            if result:
                return result
            if self.process.poll() is not None:
                break
            time.sleep(1.0)
        objects = self.kubectl(
            "get", "lrun,lspec,lcap,lpol,ltrain,isvc,pytorchjobs", "-o", "yaml", check=False
        ).stdout
        pytest.fail(f"timed out waiting for {what}\n{objects[-6000:]}\n{self.output()[-6000:]}")

    def status(self) -> dict[str, Any]:
        done = run_lemon("cluster", "status", "--state-dir", str(self.state), "--json")
        report: dict[str, Any] = json.loads(done.stdout)
        return report

    def down(self) -> subprocess.CompletedProcess[str]:
        done = run_lemon("cluster", "down", "--state-dir", str(self.state), timeout=300)
        self.process.wait(timeout=60)
        return done

    def interrupt(self) -> int:
        """Ctrl-C, as in the terminal `up` runs in."""
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=120)

    def kill(self) -> None:
        """Last resort after a failed test: down, then the process itself."""
        if self.process.poll() is None:
            run_lemon("cluster", "down", "--state-dir", str(self.state), timeout=300)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def still_alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` still alive (not zombies)."""
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            alive.append(pid)
    return alive


def recorded_pids(report: dict[str, Any]) -> list[int]:
    return [int(report["pid"]), *(int(p["pid"]) for p in report["processes"].values())]
