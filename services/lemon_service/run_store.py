"""Runs kept by id: ``SubmitRun`` starts one in the background, ``GetRun`` reads (and waits
for) it, ``CancelRun`` stops it.

A run id is executed at most once by this server: a second ``SubmitRun`` with the same id and
the same request answers the existing run's state (``created`` false) and starts nothing; with a
different request it is refused (ALREADY_EXISTS). That is what lets the Kubernetes operator
submit a ``LemonRun`` again after a restart without running it twice. Admission is decided when
the run is submitted (RESOURCE_EXHAUSTED when full: nothing is recorded, so a later submit can
succeed); a run then waits for an execution slot like any other call.

State lives in memory: finished runs are kept ``retention_s`` and at most ``max_runs`` runs in
all (the oldest finished ones go first). A restarted server knows no run; a client that finds
its run gone (NOT_FOUND) must not assume it never ran.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from lemon.engine.results import FailureKind, RunResult, RunStatus
from lemon.events import Event, TraceTruncated, TraceWriter, encode_event
from lemon.orchestration import TaskRun
from lemon.spec.models import Capacity
from lemon_service.dispatch import Dispatcher, RunRequest, Ticket
from lemon_service.endpoints import Endpoint, EndpointPool, run_policy
from lemon_service.status_codes import (
    LimitExceeded,
    RunConflict,
    RunNotFound,
    exception_failure,
    status_for,
)

__all__ = [
    "DEFAULT_TRACE_BYTES",
    "RunPhase",
    "RunRecord",
    "RunStore",
    "Submission",
    "bounded_trace",
]

log = logging.getLogger("lemon.serve")
DEFAULT_TRACE_BYTES = 256 * 1024
MAX_WAIT_S = 60.0
_OUTPUT_CHARS = 2000


class RunPhase(StrEnum):
    """Where a run kept by id is: the service's one phase vocabulary (mapped once, to
    ``lemon.v1.RunState.Phase``, in :mod:`lemon_service.convert`)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINISHED = frozenset({RunPhase.SUCCEEDED, RunPhase.FAILED, RunPhase.CANCELLED})


@dataclass(frozen=True, slots=True)
class Submission:
    """A checked ``SubmitRun``: what to run and where."""

    run_id: str
    source: str
    fingerprint: bytes
    """The request's bytes' digest: the same id must always come with the same request."""
    request: RunRequest
    tiers: Mapping[Capacity, Endpoint]
    """Empty: the server's own profile."""
    policy: Endpoint | None = None
    policy_name: str = ""
    deadline_s: float = 0.0


@dataclass(slots=True)
class RunRecord:
    run_id: str
    source: str
    fingerprint: bytes
    accepted: float = field(default_factory=time.monotonic)
    phase: RunPhase = RunPhase.QUEUED
    result: TaskRun | None = None
    error: str = ""
    failure: FailureKind | None = None
    """Why it failed or was cancelled: the result's failure kind, else the exception's."""
    trace: TraceWriter = field(default_factory=TraceWriter)
    finished: float | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def finish(
        self, phase: RunPhase, *, error: str = "", failure: FailureKind | None = None
    ) -> None:
        self.phase = phase
        self.error = error
        self.failure = failure
        self.finished = time.monotonic()
        self.done.set()


def _failure(result: RunResult) -> str:
    """Why a finished run failed, in words: past its deadline, the run's error; else the first
    agent that failed as the run did (its tier, attempts and error), else the run's error."""
    if result.failure not in (None, FailureKind.DEADLINE):
        for agent in result.agents:
            if agent.failure is result.failure:
                return (
                    f"agent {agent.name} ({agent.capacity}) failed after {agent.attempts} "
                    f"attempt(s): {agent.error}"
                )
    return result.error or "the run failed"


def bounded_trace(events: Sequence[Event], *, max_bytes: int) -> list[str]:
    """The trace as JSONL lines within ``max_bytes``: agents' outputs and prompts (and the
    spec) cut to 2,000 characters, and when that is not enough, the first events that fit, the
    last one (``run_finish``) and a ``trace_truncated`` line saying how many were left out."""

    def line(event: Event) -> str:
        cut = encode_event(event)
        for key in ("output", "answer", "task", "completion", "prompt", "spec"):
            value = cut.get(key)
            if isinstance(value, str) and len(value) > _OUTPUT_CHARS:
                cut[key] = value[:_OUTPUT_CHARS] + f"… [{len(value) - _OUTPUT_CHARS} more]"
        return json.dumps(cut, ensure_ascii=False)

    lines = [line(event) for event in events]
    size = sum(len(text.encode()) + 1 for text in lines)
    if size <= max_bytes:
        return lines
    tail = lines[-1:] if lines else []
    budget = max_bytes - sum(len(text.encode()) + 1 for text in tail) - 120
    kept: list[str] = []
    for text in lines[:-1]:
        cost = len(text.encode()) + 1
        if cost > budget:
            break
        kept.append(text)
        budget -= cost
    left_out = len(lines) - len(kept) - len(tail)
    truncated = TraceTruncated(left_out=left_out, limit_bytes=max_bytes, t=events[-1].t)
    return [*kept, json.dumps(encode_event(truncated)), *tail]


class RunStore:
    """The server's runs by id (see the module's docstring for the guarantees)."""

    def __init__(
        self, dispatcher: Dispatcher, *, pool: EndpointPool, retention_s: float, max_runs: int
    ) -> None:
        self.dispatcher = dispatcher
        self.pool = pool
        self.retention_s = retention_s
        self.max_runs = max_runs
        self._runs: dict[str, RunRecord] = {}

    def submit(self, submission: Submission) -> tuple[RunRecord, bool]:
        """The run with this id, started now if new; ``True`` when this call created it."""
        known = self._runs.get(submission.run_id)
        if known is not None:
            if known.fingerprint != submission.fingerprint:
                raise RunConflict(
                    f"run {submission.run_id} was submitted before with a different request"
                )
            log.info("run %s (%s): submitted again, %s", known.run_id, known.source, known.phase)
            return known, False
        self._expire()
        if len(self._runs) >= self.max_runs:
            raise LimitExceeded(f"server holds {len(self._runs)} runs (limit {self.max_runs})")
        ticket = self.dispatcher.admission.admit()  # LimitExceeded: nothing recorded
        record = RunRecord(submission.run_id, submission.source, submission.fingerprint)
        self._runs[record.run_id] = record
        record.task = asyncio.get_running_loop().create_task(
            self._execute(record, submission, ticket), name=f"run {record.run_id}"
        )
        log.info("run %s (%s): accepted", record.run_id, record.source)
        return record, True

    async def _execute(self, record: RunRecord, submission: Submission, ticket: Ticket) -> None:
        try:
            async with ticket:
                record.phase = RunPhase.RUNNING
                log.info("run %s (%s): started", record.run_id, record.source)
                result = await self._run(record, submission)
            record.result = result
            if result.status == RunStatus.SUCCEEDED:
                record.finish(RunPhase.SUCCEEDED)
            else:
                record.finish(RunPhase.FAILED, error=_failure(result), failure=result.failure)
        except asyncio.CancelledError:
            ticket.close()
            record.finish(
                RunPhase.CANCELLED,
                error=record.error or "cancelled",
                failure=FailureKind.CANCELLED,
            )
        except Exception as exc:
            ticket.close()
            code, message = status_for(exc)
            record.finish(
                RunPhase.FAILED, error=f"{code.name}: {message}", failure=exception_failure(exc)
            )
        log.info("run %s (%s): %s %s", record.run_id, record.source, record.phase, record.error)

    async def _run(self, record: RunRecord, submission: Submission) -> TaskRun:
        deadline = self.dispatcher.budget(None)
        if submission.deadline_s > 0:
            deadline = min(deadline, submission.deadline_s)
        if not submission.tiers and submission.policy is None:
            return await self.dispatcher.execute(
                submission.request, deadline_s=deadline, trace=record.trace
            )
        async with self.pool.lease(submission.tiers, policy=submission.policy) as (tiers, writer):
            policy = None
            if writer is not None:
                policy = run_policy(writer, name=submission.policy_name or str(submission.policy))
            return await self.dispatcher.execute(
                submission.request,
                deadline_s=deadline,
                trace=record.trace,
                tiers=tiers if submission.tiers else None,
                policy=policy,
            )

    def _expire(self) -> None:
        now = time.monotonic()
        finished = sorted(
            (r for r in self._runs.values() if r.finished is not None),
            key=lambda r: r.finished or 0.0,
        )
        excess = len(self._runs) - self.max_runs + 1
        for index, record in enumerate(finished):
            if index < excess or now - (record.finished or now) > self.retention_s:
                del self._runs[record.run_id]

    def records(self) -> list[RunRecord]:
        """Every run kept now (the web view lists them; read from its HTTP threads)."""
        return list(self._runs.values())

    def get(self, run_id: str) -> RunRecord:
        record = self._runs.get(run_id)
        if record is None:
            raise RunNotFound(f"no run {run_id} on this server")
        return record

    async def wait(self, run_id: str, *, wait_s: float) -> RunRecord:
        """The run, once finished or after ``wait_s`` (at most a minute), whichever is first."""
        record = self.get(run_id)
        if wait_s > 0 and record.phase not in FINISHED:
            try:
                async with asyncio.timeout(min(wait_s, MAX_WAIT_S)):
                    await record.done.wait()
            except TimeoutError:
                pass
        return record

    async def cancel(self, run_id: str) -> RunRecord:
        record = self.get(run_id)
        if record.phase in FINISHED or record.task is None:
            return record
        record.error = "cancelled by CancelRun"
        record.task.cancel()
        await asyncio.gather(record.task, return_exceptions=True)
        return record

    async def aclose(self) -> None:
        """Cancel what still runs (the server is stopping)."""
        running = [r.task for r in self._runs.values() if r.task is not None and not r.task.done()]
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
