"""The one door to the orchestration service (``lemon serve``): submit a run, follow it, cancel
it, over gRPC (``lemon_api``, the protocol package the service also imports).

Settings come from the environment the Helm chart sets: ``LEMON_SERVICE_TARGET`` (host:port;
unset, runs stay Pending with reason ``NoService``), ``LEMON_SERVICE_TOKEN_FILE`` (bearer
token), ``LEMON_SERVICE_TLS_CA`` (turns TLS on), ``LEMON_SERVICE_TLS_CERT`` and
``LEMON_SERVICE_TLS_KEY`` (mTLS), ``LEMON_SERVICE_SERVER_NAME``.

Status codes become three outcomes the run handlers reason about: :class:`Unavailable` (try
again later: the service is down, busy or slow), :class:`Lost` (the service holds no such run)
and :class:`Rejected` (the request itself is wrong; trying again cannot help).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import grpc
from pydantic import BaseModel, ConfigDict

from lemon.resources.lemon_run import RunAgentStatus, RunTokens
from lemon_api.channels import open_channel
from lemon_api.v1 import orchestrator_pb2 as pb
from lemon_api.v1 import orchestrator_pb2_grpc as pb_grpc
from lemon_operator.run_results import RunOrder, ServicePhase, ServiceRun

__all__ = ["Lost", "Orchestrator", "Rejected", "ServiceSettings", "Unavailable"]

_PHASES: dict[int, ServicePhase] = {
    pb.RunState.QUEUED: "queued",
    pb.RunState.RUNNING: "running",
    pb.RunState.SUCCEEDED: "succeeded",
    pb.RunState.FAILED: "failed",
    pb.RunState.CANCELLED: "cancelled",
}
_RETRY = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.INTERNAL,
}
CALL_TIMEOUT_S = 20.0
ENV = "LEMON_SERVICE_"


class Unavailable(Exception):
    """The service could not answer now (down, busy, slow); the message says which."""


class Lost(Exception):
    """The service holds no run with that id."""


class Rejected(Exception):
    """The service refused the request (invalid, or the id reused); the message says why."""


class ServiceSettings(BaseModel):
    """Where the service is and how to reach it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    target: str
    token_file: Path | None = None
    tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    server_name: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServiceSettings | None:
        """The settings in ``LEMON_SERVICE_*``; None when no target is set."""
        env = os.environ if environ is None else environ
        target = env.get(f"{ENV}TARGET", "").strip()
        if not target:
            return None

        def path(name: str) -> Path | None:
            value = env.get(f"{ENV}{name}", "").strip()
            return Path(value) if value else None

        return cls(
            target=target,
            token_file=path("TOKEN_FILE"),
            tls_ca=path("TLS_CA"),
            tls_cert=path("TLS_CERT"),
            tls_key=path("TLS_KEY"),
            server_name=env.get(f"{ENV}SERVER_NAME") or None,
        )

    def channel(self) -> grpc.aio.Channel:
        return open_channel(
            self.target,
            tls_ca=self.tls_ca,
            tls_cert=self.tls_cert,
            tls_key=self.tls_key,
            server_name=self.server_name,
            max_message_bytes=16 << 20,
        )

    def metadata(self) -> tuple[tuple[str, str], ...]:
        if self.token_file is None:
            return ()
        return (("authorization", f"Bearer {self.token_file.read_text().strip()}"),)


def _agent(report: pb.AgentReport) -> RunAgentStatus:
    return RunAgentStatus(
        name=report.name,
        role=report.role,
        tier=report.capacity,
        model=report.model,
        status=report.status,  # validated: succeeded, failed or skipped
        prompt_tokens=report.prompt_tokens,
        completion_tokens=report.completion_tokens,
        tokens=report.prompt_tokens + report.completion_tokens,
        latency_seconds=round(report.latency_s, 4),
        attempts=report.attempts,
        error=report.error or None,
    )


def _service_run(state: pb.RunState) -> ServiceRun:
    result = state.result
    has_result = state.HasField("result")
    return ServiceRun(
        run_id=state.run_id,
        phase=_PHASES.get(state.phase, "failed"),
        created=state.created,
        answer=result.answer if has_result else "",
        spec=result.spec if has_result else "",
        spec_origin=result.spec_origin if has_result else "",
        agents=tuple(_agent(report) for report in result.agents) if has_result else (),
        tokens=RunTokens(
            prompt=result.tokens.prompt,
            completion=result.tokens.completion,
            total=result.tokens.total,
        ),
        wall_s=result.wall_s,
        run_error=result.error,
        error=state.error,
        trace=tuple(state.trace),
    )


class Orchestrator:
    """A gRPC client of the service; the channel opens on first use, in the caller's loop."""

    def __init__(self, settings: ServiceSettings) -> None:
        self.settings = settings
        self._stub: pb_grpc.OrchestratorStub | None = None
        self._channel: grpc.aio.Channel | None = None

    @property
    def target(self) -> str:
        return self.settings.target

    def _client(self) -> pb_grpc.OrchestratorStub:
        if self._stub is None:
            self._channel = self.settings.channel()
            self._stub = pb_grpc.OrchestratorStub(self._channel)  # type: ignore[no-untyped-call]
        return self._stub

    async def _call(self, method: str, request: Any, *, timeout: float) -> ServiceRun:
        try:
            state = await getattr(self._client(), method)(
                request, timeout=timeout, metadata=self.settings.metadata()
            )
        except grpc.aio.AioRpcError as error:
            code, details = error.code(), error.details() or ""
            message = f"{method} at {self.target}: {code.name}: {details}"
            if code == grpc.StatusCode.NOT_FOUND:
                raise Lost(message) from None
            if code in _RETRY:
                raise Unavailable(message) from None
            raise Rejected(message) from None
        except OSError as error:  # an unreadable token or certificate file
            raise Unavailable(f"{method}: {error}") from None
        return _service_run(state)

    async def submit(self, order: RunOrder, *, wait_s: float = 0.0) -> ServiceRun:
        """Submit the run (or find it, submitted before); answer once it finished (with its
        trace) or after ``wait_s``."""
        request = pb.SubmitRunRequest(
            run_id=order.run_id,
            task=order.task,
            source=order.source,
            options=pb.RunOptions(max_tokens=order.max_tokens),
            tiers=[pb.TierEndpoint(tier=t, url=u, model=m) for t, u, m in order.tiers],
            deadline_s=order.deadline_s,
            wait_s=wait_s,
            include_trace=True,
        )
        if order.spec is not None:
            request.spec = order.spec
        elif order.policy is not None:
            request.policy.CopyFrom(
                pb.PolicyEndpoint(
                    url=order.policy.url, model=order.policy.model, name=order.policy.name
                )
            )
        return await self._call("SubmitRun", request, timeout=wait_s + CALL_TIMEOUT_S)

    async def wait(self, run_id: str, *, wait_s: float) -> ServiceRun:
        """The run once it finished (with its trace) or after ``wait_s``."""
        request = pb.GetRunRequest(run_id=run_id, wait_s=wait_s, include_trace=True)
        return await self._call("GetRun", request, timeout=wait_s + CALL_TIMEOUT_S)

    async def cancel(self, run_id: str) -> ServiceRun:
        request = pb.CancelRunRequest(run_id=run_id)
        return await self._call("CancelRun", request, timeout=CALL_TIMEOUT_S)

    async def aclose(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = self._stub = None
