"""Runs kept by id: ``SubmitRun`` starts one in the background, ``GetRun`` reads (and waits
for) it, ``CancelRun`` stops it.

A run id is executed at most once by this server: a second ``SubmitRun`` with the same id and
the same request answers the existing run's state (``created`` false) and starts nothing; with a
different request it is refused (ALREADY_EXISTS). That is what lets the Kubernetes operator
submit a ``LemonRun`` again after a restart without running it twice. Admission is decided when
the run is submitted (RESOURCE_EXHAUSTED when full: nothing is recorded, so a later submit can
succeed); a run then waits for an execution slot like any other call.

With a run journal (:mod:`lemon_service.run_journal`, ``lemon serve --run-journal``) that holds
across restarts of the server too. What a client may rely on:

- a run id ``SubmitRun`` answered (or may have answered, the reply lost) is known to every later
  server on the same journal until it expires (``retention_s`` after it finished);
- no run's agents are started twice: a run the server was killed before starting (``queued``)
  is started by the next server, once; one it was killed while running ends ``failed`` with
  failure kind ``interrupted`` and is not started again (its calls may have reached the tiers);
- a finished run reads back as it finished (phase, error, failure kind, result, trace);
- a server stopping gracefully (SIGTERM) cancels its running runs (``cancelled``) and leaves
  its queued ones to the next server.

Without a journal, state lives in memory: a restarted server knows no run, and a client that
finds its run gone (NOT_FOUND) must not assume it never ran. Either way, finished runs are kept
``retention_s`` and at most ``max_runs`` runs in all (the oldest finished ones go first).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from lemon.budget import BudgetRefused
from lemon.engine.results import FailureKind, RunResult, RunStatus
from lemon.events import Event, TraceTruncated, TraceWriter, encode_event
from lemon.orchestration import TaskRun
from lemon.policy.defaults import ChosenPolicy, SpecChoice
from lemon.policy.inference import SpecPolicy
from lemon.spec.models import Capacity
from lemon_service.dispatch import Dispatcher, RunRequest, SharedLimits, Ticket
from lemon_service.endpoints import Endpoint, EndpointPool, run_policy
from lemon_service.run_journal import JournalEntry, JournalError, RunJournal
from lemon_service.status_codes import (
    JournalUnavailable,
    LimitExceeded,
    RunConflict,
    RunNotFound,
    exception_failure,
    status_for,
)

__all__ = [
    "DEFAULT_TRACE_BYTES",
    "INTERRUPTED",
    "RunRecord",
    "RunStore",
    "ServiceRunPhase",
    "Submission",
    "bound_lines",
    "bounded_trace",
]

log = logging.getLogger("lemon.serve")
DEFAULT_TRACE_BYTES = 256 * 1024
MAX_WAIT_S = 60.0
_OUTPUT_CHARS = 2000


class ServiceRunPhase(StrEnum):
    """Where a run kept by id is: the service's one phase vocabulary (mapped once, to
    ``lemon.v1.RunState.Phase``, in :mod:`lemon_service.convert`)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINISHED = frozenset({ServiceRunPhase.SUCCEEDED, ServiceRunPhase.FAILED, ServiceRunPhase.CANCELLED})


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
    builtin: str | None = None
    """A built-in policy writes the spec (:data:`lemon.policy.defaults.BUILTIN_POLICIES`)."""
    default_policy: bool = False
    """The policy is the default of where the run came from (a namespace's), not the run's."""
    deadline_s: float = 0.0
    wire: bytes = b""
    """The request's wire bytes (the journal keeps them, to start a queued run after a restart)."""
    shared: SharedLimits | None = None
    """The namespace's budget the run draws from with the other runs naming it."""


INTERRUPTED = (
    "the server stopped while this run was running (killed or restarted); its agents' calls "
    "may have reached the tiers, so it is not run again"
)


@dataclass(slots=True)
class RunRecord:
    run_id: str
    source: str
    fingerprint: bytes
    accepted: float = field(default_factory=time.monotonic)
    phase: ServiceRunPhase = ServiceRunPhase.QUEUED
    result: TaskRun | None = None
    error: str = ""
    failure: FailureKind | None = None
    """Why it failed or was cancelled: the result's failure kind, else the exception's."""
    trace: TraceWriter = field(default_factory=TraceWriter)
    finished: float | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    response: bytes = b""
    """A run read back from a journal written by schema version 1: its ``lemon.v1.RunResponse``,
    serialized (``result`` is None then). A newer journal keeps the result itself."""
    stored_trace: tuple[str, ...] = ()
    """A run read back from the journal: its trace's JSONL lines, as bounded when it finished."""
    on_finish: Callable[[RunRecord], None] | None = None
    """Called once the run finished (the store's expiry queue)."""
    refusal: BudgetRefused | None = None
    """A run refused before it ran: its spec's estimate exceeds its budget."""

    def finish(
        self, phase: ServiceRunPhase, *, error: str = "", failure: FailureKind | None = None
    ) -> None:
        self.phase = phase
        self.error = error
        self.failure = failure
        self.finished = time.monotonic()
        self.done.set()
        if self.on_finish is not None:
            self.on_finish(self)


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

    return bound_lines([line(event) for event in events], max_bytes=max_bytes)


def bound_lines(lines: Sequence[str], *, max_bytes: int) -> list[str]:
    """Trace lines within ``max_bytes`` (:func:`bounded_trace`'s cut, on lines already cut)."""
    size = sum(len(text.encode()) + 1 for text in lines)
    if size <= max_bytes:
        return list(lines)
    tail = list(lines[-1:])
    budget = max_bytes - sum(len(text.encode()) + 1 for text in tail) - 120
    kept: list[str] = []
    for text in lines[:-1]:
        cost = len(text.encode()) + 1
        if cost > budget:
            break
        kept.append(text)
        budget -= cost
    left_out = len(lines) - len(kept) - len(tail)
    try:
        t = float(json.loads(tail[0]).get("t", 0.0)) if tail else 0.0
    except (ValueError, AttributeError):
        t = 0.0
    truncated = TraceTruncated(left_out=left_out, limit_bytes=max_bytes, t=t)
    return [*kept, json.dumps(encode_event(truncated)), *tail]


SubmissionDecoder = Callable[[bytes], Submission]
"""A journaled request's wire bytes as a checked :class:`Submission` again."""


class RunStore:
    """The server's runs by id (see the module's docstring for the guarantees)."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        pool: EndpointPool,
        retention_s: float,
        max_runs: int,
        journal: RunJournal | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.pool = pool
        self.retention_s = retention_s
        self.max_runs = max_runs
        self.journal = journal
        self._runs: dict[str, RunRecord] = {}
        self._expiry: list[tuple[float, int, RunRecord]] = []
        """Finished runs, a heap by finish time: expiring pops the oldest, never scanning all
        the runs held (a sort of every run on each submit cost a fifth of the server's CPU at
        4,096 runs; docs/grpc.md has the measurement)."""
        self._order = itertools.count()
        self._closing = False

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
        if self.journal is not None:
            try:  # on disk before the answer leaves: a run the journal lacks was never accepted
                self.journal.accepted(
                    record.run_id,
                    source=record.source,
                    fingerprint=record.fingerprint,
                    request=submission.wire,
                    at=time.time(),
                )
            except JournalError as exc:
                ticket.close()
                raise JournalUnavailable(str(exc)) from None
        self._start(record, submission, ticket)
        log.info("run %s (%s): accepted", record.run_id, record.source)
        return record, True

    def _finished(self, record: RunRecord) -> None:
        assert record.finished is not None
        heapq.heappush(self._expiry, (record.finished, next(self._order), record))

    def _start(self, record: RunRecord, submission: Submission, ticket: Ticket) -> None:
        self._runs[record.run_id] = record
        record.on_finish = self._finished
        record.task = asyncio.get_running_loop().create_task(
            self._execute(record, submission, ticket), name=f"run {record.run_id}"
        )

    def recover(self, decode: SubmissionDecoder) -> dict[str, int]:
        """Read the journal back (a server starting): finished runs answer as they finished,
        queued ones start now (they called nothing), running ones fail as ``interrupted``.
        Returns how many of each; call on the server's event loop, before it serves."""
        counts = {"finished": 0, "resumed": 0, "interrupted": 0}
        if self.journal is None:
            return counts
        now, wall = time.monotonic(), time.time()
        for entry in self.journal.entries():
            record = _record_of(entry, now=now, wall=wall)
            self._runs[record.run_id] = record
            record.on_finish = self._finished
            if entry.phase in {p.value for p in FINISHED}:
                self._finished(record)
                counts["finished"] += 1
            elif entry.phase == ServiceRunPhase.QUEUED:
                counts["resumed"] += 1
                self._resume(record, entry, decode)
            else:
                counts["interrupted"] += 1
                record.finish(
                    ServiceRunPhase.FAILED, error=INTERRUPTED, failure=FailureKind.INTERRUPTED
                )
                self._journal_finish(record)
                log.info("run %s (%s): %s", record.run_id, record.source, INTERRUPTED)
        self._expire(incoming=0)
        return counts

    def _resume(self, record: RunRecord, entry: JournalEntry, decode: SubmissionDecoder) -> None:
        try:
            submission = decode(entry.request)
            ticket = self.dispatcher.admission.admit()
        except Exception as exc:
            code, message = status_for(exc)
            record.finish(
                ServiceRunPhase.FAILED,
                error=f"accepted before a restart, cannot start after it: {code.name}: {message}",
                failure=exception_failure(exc),
            )
            self._journal_finish(record)
            return
        log.info("run %s (%s): accepted before a restart, starting", record.run_id, record.source)
        self._start(record, submission, ticket)

    def _journal_finish(self, record: RunRecord) -> None:
        if self.journal is None:
            return
        result = json.dumps(record.result.to_json()) if record.result is not None else ""
        trace = record.stored_trace or bounded_trace(
            record.trace.events, max_bytes=DEFAULT_TRACE_BYTES
        )
        try:
            self.journal.finished(
                record.run_id,
                phase=record.phase.value,
                error=record.error,
                failure=record.failure.value if record.failure is not None else None,
                result=result,
                trace=trace,
                response=record.response,
            )
        except JournalError as exc:  # the run itself is done; its reader sees it until restart
            log.error("run %s (%s): %s", record.run_id, record.source, exc)

    async def _execute(self, record: RunRecord, submission: Submission, ticket: Ticket) -> None:
        try:
            async with ticket:
                if self.journal is not None:  # before the first call: queued means untouched
                    self.journal.running(record.run_id)
                record.phase = ServiceRunPhase.RUNNING
                log.info("run %s (%s): started", record.run_id, record.source)
                result = await self._run(record, submission)
            record.result = result
            if result.status == RunStatus.SUCCEEDED:
                record.finish(ServiceRunPhase.SUCCEEDED)
            else:
                record.finish(
                    ServiceRunPhase.FAILED, error=_failure(result), failure=result.failure
                )
        except asyncio.CancelledError:
            ticket.close()
            # the server stopping (not CancelRun) before the run started: it stays queued in
            # the journal, for the next server to start
            left_queued = (
                self._closing and record.phase is ServiceRunPhase.QUEUED and not record.error
            )
            record.finish(
                ServiceRunPhase.CANCELLED,
                error=record.error or "cancelled: the server stopped",
                failure=FailureKind.CANCELLED,
            )
            if left_queued and self.journal is not None:
                log.info(
                    "run %s (%s): left queued for the next server", record.run_id, record.source
                )
                return
        except Exception as exc:
            ticket.close()
            code, message = status_for(exc)
            if isinstance(exc, BudgetRefused):
                record.refusal = exc
            record.finish(
                ServiceRunPhase.FAILED,
                error=f"{code.name}: {message}",
                failure=exception_failure(exc),
            )
        self._journal_finish(record)
        log.info("run %s (%s): %s %s", record.run_id, record.source, record.phase, record.error)

    async def _run(self, record: RunRecord, submission: Submission) -> TaskRun:
        deadline = self.dispatcher.budget(None)
        if submission.deadline_s > 0:
            deadline = min(deadline, submission.deadline_s)
        named = None
        if submission.builtin is not None:
            named = self.dispatcher.builtin(submission.builtin)
        shared = None
        if submission.shared is not None:
            shared = self.dispatcher.shared_budget(submission.shared)
        if not submission.tiers and submission.policy is None:
            return await self.dispatcher.execute(
                submission.request,
                deadline_s=deadline,
                trace=record.trace,
                policy=self._chosen(submission, named),
                shared=shared,
            )
        async with self.pool.lease(submission.tiers, policy=submission.policy) as (tiers, writer):
            policy = named
            if writer is not None:
                policy = run_policy(writer, name=submission.policy_name or str(submission.policy))
            policy = self._chosen(submission, policy)
            return await self.dispatcher.execute(
                submission.request,
                deadline_s=deadline,
                trace=record.trace,
                tiers=tiers if submission.tiers else None,
                policy=policy,
                shared=shared,
            )

    @staticmethod
    def _chosen(submission: Submission, policy: SpecPolicy | None) -> SpecPolicy | None:
        """The run's policy as the resolution order has it (None: the server's default): the
        one it named, or the default of where it came from (a namespace's). A built-in policy
        is named first in the spec's origin (an endpoint's policy names itself)."""
        if policy is None:
            return policy
        choice = SpecChoice.DEFAULT_POLICY if submission.default_policy else SpecChoice.POLICY
        via = submission.policy_name if submission.builtin is not None else ""
        if choice is SpecChoice.POLICY and not via:
            return policy
        return ChosenPolicy(policy, choice=choice, via=via)

    def _expire(self, *, incoming: int = 1) -> None:
        """Drop the finished runs past ``retention_s``, and the oldest finished ones while the
        store holds more than ``max_runs`` with ``incoming`` runs about to join it (a submit:
        one; a server recovering its journal: none)."""
        now = time.monotonic()
        excess = len(self._runs) - self.max_runs + incoming
        gone: list[str] = []
        while self._expiry:
            finished, _, record = self._expiry[0]
            if excess <= 0 and now - finished <= self.retention_s:
                break
            heapq.heappop(self._expiry)
            if self._runs.get(record.run_id) is not record:
                continue  # already gone
            del self._runs[record.run_id]
            gone.append(record.run_id)
            excess -= 1
        if self.journal is not None and gone:
            try:
                self.journal.forget(gone)
            except JournalError as exc:
                log.error("%s", exc)

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
        """Cancel what still runs (the server is stopping): running runs end ``cancelled``;
        with a journal, queued ones stay queued there for the next server."""
        self._closing = True
        running = [r.task for r in self._runs.values() if r.task is not None and not r.task.done()]
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        if self.journal is not None:
            self.journal.close()


def _record_of(entry: JournalEntry, *, now: float, wall: float) -> RunRecord:
    """A journaled run as a record (its monotonic times from the wall-clock ones)."""
    record = RunRecord(
        entry.run_id,
        entry.source,
        entry.fingerprint,
        accepted=now - max(0.0, wall - entry.accepted_at),
    )
    finished = {p.value: p for p in FINISHED}.get(entry.phase)
    if finished is not None:
        record.phase = finished
        record.error = entry.error
        record.failure = FailureKind(entry.failure) if entry.failure else None
        if entry.result:
            record.result = TaskRun.from_json(json.loads(entry.result))
        record.response = entry.response
        record.stored_trace = entry.trace
        record.finished = now - max(0.0, wall - (entry.finished_at or wall))
        record.done.set()
    return record
