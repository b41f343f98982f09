"""A server's runs on disk (``lemon serve --run-journal PATH``): what a restarted server reads to
answer the run ids it accepted before, and never execute one twice.

One SQLite file (WAL) per server, locked by it while it runs: a second server on the same file
is refused at start (:class:`JournalError`), since two processes recovering one journal would
each take the other's running runs for interrupted ones. Each run is written at three moments,
each before the server goes on:

1. **accepted** (``SubmitRun`` created it): id, source, the request's fingerprint and its wire
   bytes, before the answer leaves the server. A run the journal lacks was never accepted.
2. **running**: written after the run takes its execution slot and *before* its first model
   call. A run still ``queued`` in the journal has called nothing, so a restarted server starts
   it (once); a run still ``running`` may have reached its tiers, so it is failed with
   :attr:`~lemon.engine.results.FailureKind.INTERRUPTED` and never started again.
3. **finished**: phase, error, failure kind, the engine's result as its one JSON record
   (:meth:`lemon.orchestration.TaskRun.to_json`, read back by ``TaskRun.from_json``) and the
   bounded trace, so ``GetRun`` answers a restarted server as it did before.
   A journal written before (schema version 1) kept the serialized ``lemon.v1.RunResponse``
   instead (``response``); it is read as it was written.

Durability: each write is a committed transaction (``synchronous=NORMAL`` in WAL mode), which
survives the process being killed (SIGKILL, OOM, a container restart): the kernel holds the
write. A power loss of the machine may lose the last transactions; ``durable=True``
(``synchronous=FULL``) closes that, at an fsync per write. On Kubernetes the file must live on a
volume that outlives the container (the Helm chart mounts one: ``service.runJournal``).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = ["JournalEntry", "JournalError", "RunJournal"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    fingerprint BLOB NOT NULL,
    request BLOB NOT NULL,
    phase TEXT NOT NULL,
    accepted_at REAL NOT NULL,
    finished_at REAL,
    error TEXT NOT NULL DEFAULT '',
    failure TEXT,
    response BLOB NOT NULL DEFAULT x'',
    trace TEXT NOT NULL DEFAULT '',
    result TEXT NOT NULL DEFAULT ''
)
"""
_VERSION = 2
_MIGRATE_FROM_1 = "ALTER TABLE runs ADD COLUMN result TEXT NOT NULL DEFAULT ''"
"""Version 1 kept a finished run's ``RunResponse`` bytes only (its rows keep them)."""


class JournalError(RuntimeError):
    """The run journal cannot be opened or written; the message names the file."""


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One run as the journal holds it (``phase``: queued, running or a finished phase)."""

    run_id: str
    source: str
    fingerprint: bytes
    request: bytes
    """The ``SubmitRunRequest``'s wire bytes: what a queued run is started from after a restart."""
    phase: str
    accepted_at: float
    """Wall-clock seconds (``time.time()``)."""
    finished_at: float | None
    error: str
    failure: str | None
    response: bytes
    """A run finished under schema version 1: its ``lemon.v1.RunResponse``, serialized (empty
    since: ``result`` holds the run)."""
    trace: tuple[str, ...]
    result: str = ""
    """The finished run's :meth:`lemon.orchestration.TaskRun.to_json`, as JSON text (empty: the
    run has no result, such as one that failed before it ran, or a version-1 row)."""


class RunJournal:
    """The journal at ``path`` (created if missing), locked for this process until :meth:`close`."""

    def __init__(self, path: Path, *, durable: bool = False) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._lock: IO[str] | None = self._take_lock(path)
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            self._db.execute("PRAGMA busy_timeout=5000")
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, 1, _VERSION):
                raise JournalError(
                    f"run journal {path}: schema version {version}, this server reads 1 and "
                    f"{_VERSION}"
                )
            self._db.execute(_SCHEMA)
            if version == 1:
                self._db.execute(_MIGRATE_FROM_1)
            self._db.execute(f"PRAGMA user_version={_VERSION}")
        except sqlite3.Error as exc:
            raise JournalError(f"run journal {path}: {exc}") from None
        except OSError as exc:
            raise JournalError(f"run journal {path}: {exc.strerror or exc}") from None

    @staticmethod
    def _take_lock(path: Path) -> IO[str]:
        lock = path.with_name(path.name + ".lock").open("a+", encoding="utf-8")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            lock.close()
            raise JournalError(
                f"run journal {path} is in use by {holder}: one server per journal"
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"lemon serve (pid {os.getpid()})\n")
        lock.flush()
        return lock

    def _write(self, sql: str, params: Sequence[object]) -> None:
        try:
            self._db.execute(sql, params)
        except sqlite3.Error as exc:
            raise JournalError(f"run journal {self.path}: cannot write: {exc}") from None

    def accepted(
        self, run_id: str, *, source: str, fingerprint: bytes, request: bytes, at: float
    ) -> None:
        self._write(
            "INSERT INTO runs (run_id, source, fingerprint, request, phase, accepted_at) "
            "VALUES (?, ?, ?, ?, 'queued', ?)",
            (run_id, source, fingerprint, request, at),
        )

    def running(self, run_id: str) -> None:
        self._write("UPDATE runs SET phase = 'running' WHERE run_id = ?", (run_id,))

    def finished(
        self,
        run_id: str,
        *,
        phase: str,
        error: str,
        failure: str | None,
        result: str,
        trace: Iterable[str],
        response: bytes = b"",
    ) -> None:
        """A run finished: ``result`` is its record's JSON text (empty: none); ``response`` only
        carries over a version-1 run's bytes."""
        self._write(
            "UPDATE runs SET phase = ?, finished_at = ?, error = ?, failure = ?, response = ?, "
            "trace = ?, result = ? WHERE run_id = ?",
            (phase, time.time(), error, failure, response, "\n".join(trace), result, run_id),
        )

    def forget(self, run_ids: Iterable[str]) -> None:
        """Drop runs the server no longer keeps (expired)."""
        ids = [(run_id,) for run_id in run_ids]
        if ids:
            try:
                self._db.executemany("DELETE FROM runs WHERE run_id = ?", ids)
            except sqlite3.Error as exc:
                raise JournalError(f"run journal {self.path}: cannot write: {exc}") from None

    def entries(self) -> list[JournalEntry]:
        """Every run the journal holds, oldest accepted first."""
        try:
            rows = self._db.execute(
                "SELECT run_id, source, fingerprint, request, phase, accepted_at, finished_at, "
                "error, failure, response, trace, result FROM runs ORDER BY accepted_at"
            ).fetchall()
        except sqlite3.Error as exc:
            raise JournalError(f"run journal {self.path}: cannot read: {exc}") from None
        return [
            JournalEntry(
                run_id=row[0],
                source=row[1],
                fingerprint=bytes(row[2]),
                request=bytes(row[3]),
                phase=row[4],
                accepted_at=row[5],
                finished_at=row[6],
                error=row[7],
                failure=row[8],
                response=bytes(row[9]),
                trace=tuple(row[10].split("\n")) if row[10] else (),
                result=row[11],
            )
            for row in rows
        ]

    def close(self) -> None:
        self._db.close()
        if self._lock is not None:
            self._lock.close()  # releases the lock
            self._lock = None
