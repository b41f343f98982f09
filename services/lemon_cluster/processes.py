"""The processes a local cluster starts: each in its own session (so Ctrl-C reaches only the
``up`` process, which stops them in order), its output in a log file, and the state directory
in its environment (:data:`lemon_cluster.state.MARKER_ENV`), so that a later ``down`` can tell
a recorded pid is still one of them before it signals it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lemon_cluster.state import MARKER_ENV

__all__ = [
    "Child",
    "Children",
    "free_port",
    "is_ours",
    "log_tail",
    "port_in_use",
    "script",
    "stop_group",
    "stop_groups",
    "wait_gone",
]


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def script(name: str) -> Path:
    """A console script of this installation (``lemon``, ``lemon-operator``, ``kubectl``...):
    beside this Python, else on ``PATH``."""
    import shutil

    beside = Path(sys.executable).with_name(name)
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"`{name}` is neither beside {sys.executable} nor on PATH")
    return Path(found)


def log_tail(path: Path, *, chars: int = 2000) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return text[-chars:].strip()


def is_ours(pid: int, *, marker: str) -> bool:
    """Whether ``pid`` is alive and carries ``MARKER_ENV=marker`` in its environment."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{MARKER_ENV}={marker}".encode() in environ.split(b"\0")


def stop_group(
    pid: int, *, timeout: float = 15.0, process: subprocess.Popen[bytes] | None = None
) -> None:
    """SIGTERM the process group led by ``pid``, then SIGKILL what is left after ``timeout``
    (``process``: the leader, when it is this process's child, reaped as it ends)."""
    stop_groups({pid: process}, timeout=timeout)


def stop_groups(
    leaders: Mapping[int, subprocess.Popen[bytes] | None], *, timeout: float = 15.0
) -> None:
    """Stop several process groups at once: SIGTERM to each, a wait of up to ``timeout`` for
    them all, then SIGKILL to what is left."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        for pid in leaders:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            for process in leaders.values():
                if process is not None:
                    process.poll()
            if not any(_members(pid) for pid in leaders):
                return
            time.sleep(0.1)


def wait_gone(pid: int, *, timeout: float) -> bool:
    """Wait for process ``pid`` to end; whether it did within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state == "Z":
            return True
        time.sleep(0.1)
    return False


def _members(pgid: int) -> bool:
    """Whether any live (not zombie) process is still in group ``pgid``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


@dataclass(eq=False)
class Child:
    """One started process."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self) -> str:
        return log_tail(self.log)


class Children:
    """Start processes and keep them for an ordered stop; ``on_change`` is told the running
    set (name → pid) after every start and stop, which the state record keeps."""

    def __init__(
        self,
        *,
        marker: str,
        logs: Path,
        on_change: Callable[[dict[str, int]], None] = lambda _: None,
    ) -> None:
        self.marker = marker
        self.logs = logs
        self.on_change = on_change
        self._children: list[Child] = []
        self.extra: dict[str, int] = {}
        """Processes started elsewhere (the control plane's), recorded with these."""

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return {**os.environ, MARKER_ENV: self.marker, **(extra or {})}

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        log: Path | None = None,
    ) -> Child:
        log = log or self.logs / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            process = subprocess.Popen(
                list(argv),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env(env),
                cwd=cwd,
                start_new_session=True,
            )
        child = Child(name, process, log)
        self._children.append(child)
        self._changed()
        return child

    def stop(self, child: Child, *, timeout: float = 15.0) -> None:
        stop_group(child.pid, timeout=timeout, process=child.process)
        child.process.poll()
        if child in self._children:
            self._children.remove(child)
        self._changed()

    def stop_all(self) -> None:
        """Stop every child at once."""
        stop_groups({child.pid: child.process for child in self._children})
        self._children.clear()
        self._changed()

    def running(self) -> dict[str, int]:
        return {**self.extra, **{c.name: c.pid for c in self._children if c.alive()}}

    def _changed(self) -> None:
        self.on_change(self.running())
