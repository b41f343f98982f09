"""``lemon.v1.Orchestrator``: a thin servicer over the core — convert, call, convert back.

Every failure goes through :func:`lemon_service.status_codes.status_for` (one table). Cancellation
needs no code here: when the client cancels or the deadline passes, grpc.aio cancels the
handler's task, and the ``CancelledError`` travels through ``run_task`` into the executor,
which cancels every running agent (their HTTP calls are dropped).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any, NoReturn

import grpc

from lemon import events
from lemon.events import TraceWriter
from lemon.orchestration import TaskRun
from lemon.spec.issues import SpecError
from lemon_api.v1 import orchestrator_pb2 as pb
from lemon_api.v1 import orchestrator_pb2_grpc as pb_grpc
from lemon_service import convert
from lemon_service.dispatch import Dispatcher, RunRequest
from lemon_service.run_store import RunStore
from lemon_service.status_codes import run_failure, status_for

__all__ = ["SERVICE_NAME", "OrchestratorServicer"]

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Orchestrator"].full_name
log = logging.getLogger("lemon.serve")


async def _abort(context: grpc.aio.ServicerContext[Any, Any], exc: Exception) -> NoReturn:
    code, message = status_for(exc)
    if code == grpc.StatusCode.INTERNAL:
        log.error("internal error", exc_info=exc)
    else:
        log.warning("%s: %s", code.name, message.splitlines()[0])
    await context.abort(code, message)
    raise AssertionError("context.abort returned")  # pragma: no cover - abort always raises


def _request_id(given: str) -> str:
    return given or uuid.uuid4().hex


class OrchestratorServicer(pb_grpc.OrchestratorServicer):
    def __init__(self, dispatcher: Dispatcher, *, runs: RunStore) -> None:
        self.dispatcher = dispatcher
        self.runs = runs

    def _run_request(self, task: str, options: pb.RunOptions, parsed: Any = None) -> RunRequest:
        return convert.run_request(self.dispatcher, task, options, parsed)

    async def _finish(
        self, request: RunRequest, context: grpc.aio.ServicerContext[Any, Any], trace: TraceWriter
    ) -> TaskRun:
        deadline_s = self.dispatcher.budget(context.time_remaining())
        result = await self.dispatcher.run(request, deadline_s=deadline_s, trace=trace)
        failure = run_failure(result)
        if failure is not None:
            raise failure
        return result

    async def Orchestrate(
        self, request: pb.OrchestrateRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.RunResponse:
        try:
            run = self._run_request(request.task, request.options)
            result = await self._finish(run, context, TraceWriter())
        except Exception as exc:
            await _abort(context, exc)
        return convert.run_response(result, request_id=_request_id(request.request_id))

    async def ExecuteSpec(
        self, request: pb.ExecuteSpecRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.RunResponse:
        try:
            parsed = self.dispatcher.parse(request.spec, source=request.source or "<request>")
            run = self._run_request(request.task, request.options, parsed)
            result = await self._finish(run, context, TraceWriter())
        except Exception as exc:
            await _abort(context, exc)
        return convert.run_response(result, request_id=_request_id(request.request_id))

    async def ValidateSpec(
        self, request: pb.ValidateSpecRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ValidateSpecResponse:
        source = request.source or "<request>"
        try:
            parsed = self.dispatcher.parse(request.spec, source=source)
        except SpecError as exc:
            return pb.ValidateSpecResponse(
                valid=False, errors=[convert.issue(i, source=source) for i in exc.issues]
            )
        except Exception as exc:
            await _abort(context, exc)
        return convert.valid_response(parsed)

    async def StreamOrchestrate(
        self, request: pb.OrchestrateRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[pb.RunEvent]:
        """Events as the engine emits them; the last one is the result. A failure after events
        were sent ends the stream with its status (e.g. UNAVAILABLE when a tier went down)."""
        queue: asyncio.Queue[events.Event | None] = asyncio.Queue()
        trace = TraceWriter(on_event=queue.put_nowait)
        run: asyncio.Future[TaskRun] | None = None
        try:
            checked = self._run_request(request.task, request.options)
            run = asyncio.ensure_future(self._finish(checked, context, trace))
            run.add_done_callback(lambda _: queue.put_nowait(None))
            origin, last_t = "", 0.0
            while (event := await queue.get()) is not None:
                last_t = event.t
                if isinstance(event, events.SpecReady):
                    origin = event.origin
                message = convert.run_event(event, origin=origin)
                if message is not None:
                    yield message
            result = run.result()
            response = convert.run_response(result, request_id=_request_id(request.request_id))
            yield pb.RunEvent(t=last_t, result=response)
        except Exception as exc:
            await _abort(context, exc)
        finally:
            if run is not None and not run.done():
                run.cancel()
                await asyncio.gather(run, return_exceptions=True)

    async def SubmitRun(
        self, request: pb.SubmitRunRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.RunState:
        try:
            submission = convert.submission(request, dispatcher=self.dispatcher)
            record, created = self.runs.submit(submission)
            if request.wait_s > 0:
                record = await self.runs.wait(record.run_id, wait_s=request.wait_s)
        except Exception as exc:
            await _abort(context, exc)
        trace_bytes = request.max_trace_bytes if request.include_trace else None
        return convert.run_state(record, created=created, trace_bytes=trace_bytes)

    async def GetRun(
        self, request: pb.GetRunRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.RunState:
        try:
            record = await self.runs.wait(request.run_id, wait_s=request.wait_s)
        except Exception as exc:
            await _abort(context, exc)
        trace_bytes = request.max_trace_bytes if request.include_trace else None
        return convert.run_state(record, trace_bytes=trace_bytes)

    async def SyncNamespaceBudget(
        self, request: pb.NamespaceBudget, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.NamespaceBudgetState:
        try:
            shared = self.dispatcher.shared_budget(convert.shared_limits(request))
        except Exception as exc:
            await _abort(context, exc)
        return convert.namespace_budget_state(shared)

    async def CancelRun(
        self, request: pb.CancelRunRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.RunState:
        try:
            record = await self.runs.cancel(request.run_id)
        except Exception as exc:
            await _abort(context, exc)
        return convert.run_state(record)
