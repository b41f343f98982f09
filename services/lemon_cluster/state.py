"""The local cluster's state: one directory holding everything a running cluster keeps.

``<state>/cluster.json`` is the record (the ``up`` process's pid, the kubeconfig, the API
server and service addresses, every process started with its pid), written by rename;
``cluster.lock`` is held (``flock``) by the ``up`` process for as long as it runs, so whether a
cluster runs is a question of the lock, not of a pid that may have been reused. Beside them:
``kubeconfig`` (the admin's), ``controlplane/`` (certificates, etcd's data, the control plane's
logs), ``logs/`` (every other process's log), ``volumes/<claim>/`` (what PersistentVolumeClaims
are on this machine) and ``jobs/`` (each PyTorchJob's mounted files).

The directory is ``--state-dir``, else ``$LEMON_CLUSTER_DIR``, else
``$XDG_STATE_HOME/lemon/cluster`` (``~/.local/state/lemon/cluster``). ``down`` removes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from lemon import atomic

__all__ = ["MARKER_ENV", "StateDir", "StateError", "default_dir"]

MARKER_ENV = "LEMON_CLUSTER_STATE"
"""Set, to the state directory, in the environment of every process the cluster starts: how a
later ``down`` knows a pid is still one of them before it stops it."""

Condition = Literal["absent", "empty", "running", "stale", "foreign"]


class StateError(RuntimeError):
    """The state directory is in a condition that stops the command; the message says why."""


def default_dir() -> Path:
    if os.environ.get("LEMON_CLUSTER_DIR"):
        return Path(os.environ["LEMON_CLUSTER_DIR"]).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base) / "lemon" / "cluster"


@dataclass(frozen=True, slots=True)
class StateDir:
    root: Path

    @property
    def record_file(self) -> Path:
        return self.root / "cluster.json"

    @property
    def lock_file(self) -> Path:
        return self.root / "cluster.lock"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def volumes(self) -> Path:
        return self.root / "volumes"

    @property
    def controlplane(self) -> Path:
        return self.root / "controlplane"

    @property
    def jobs(self) -> Path:
        return self.root / "jobs"

    def condition(self) -> Condition:
        """``running`` (an ``up`` holds the lock), ``stale`` (a record nobody holds: an ``up``
        that did not clean up), ``foreign`` (a directory with other files and no record),
        ``empty`` or ``absent``."""
        if not self.root.exists():
            return "absent"
        if self.lock_file.exists() and self._locked():
            return "running"
        if self.record_file.exists() or self.lock_file.exists():
            return "stale"
        return "foreign" if any(self.root.iterdir()) else "empty"

    def _locked(self) -> bool:
        try:
            with self.lock_file.open("a") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return True
                fcntl.flock(handle, fcntl.LOCK_UN)
        except FileNotFoundError:  # removed meanwhile: nobody holds it any more
            return False
        return False

    def claim(self) -> IO[str]:
        """Create the directory and take the lock (held until the returned file is closed or
        this process ends); StateError if another process holds it."""
        self.root.mkdir(parents=True, exist_ok=True)
        for folder in (self.logs, self.volumes, self.jobs):
            folder.mkdir(exist_ok=True)
        handle = self.lock_file.open("a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise StateError(f"another `lemon cluster up` holds {self.lock_file}") from None
        return handle

    def read(self) -> dict[str, Any]:
        """The record; {} when there is none (or it cannot be read)."""
        try:
            data = json.loads(self.record_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def write(self, record: dict[str, Any]) -> None:
        atomic.write_json(self.record_file, record)

    def remove(self) -> None:
        """Remove the whole directory (a record first, so a half-removed one reads stale)."""
        with contextlib.suppress(FileNotFoundError):
            self.record_file.unlink()
        shutil.rmtree(self.root, ignore_errors=True)
        if self.root.exists():  # a file written while it was being removed
            shutil.rmtree(self.root)
