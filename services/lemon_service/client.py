"""A Python client of ``lemon.v1.Orchestrator`` (grpc.aio), as ``lemon client`` uses it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from types import TracebackType

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from pydantic import BaseModel, ConfigDict, Field

from lemon_api.channels import open_channel
from lemon_api.v1 import orchestrator_pb2 as pb
from lemon_api.v1 import orchestrator_pb2_grpc as pb_grpc

__all__ = ["ClientConfig", "LemonClient", "run_options"]


class ClientConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    target: str = "127.0.0.1:50051"
    token: str | None = Field(default=None, repr=False)
    tls_ca: Path | None = None
    """Trust this CA (turns TLS on)."""
    tls_cert: Path | None = None
    tls_key: Path | None = None
    """The client's certificate and key, for servers that require mTLS."""
    server_name: str | None = None
    """Expected name in the server's certificate, when it differs from the target's host."""
    max_message_bytes: int = 64 << 20

    def channel(self) -> grpc.aio.Channel:
        return open_channel(
            self.target,
            tls_ca=self.tls_ca,
            tls_cert=self.tls_cert,
            tls_key=self.tls_key,
            server_name=self.server_name,
            max_message_bytes=self.max_message_bytes,
        )


def run_options(
    *, max_tokens: int = 0, seed: int | None = None, template: str = ""
) -> pb.RunOptions:
    options = pb.RunOptions(max_tokens=max_tokens, template=template)
    if seed is not None:
        options.seed = seed
    return options


class LemonClient:
    """``async with LemonClient(config) as client: await client.orchestrate("task")``."""

    def __init__(self, config: ClientConfig | None = None) -> None:
        self.config = config or ClientConfig()
        self._channel = self.config.channel()
        self._stub = pb_grpc.OrchestratorStub(self._channel)  # type: ignore[no-untyped-call]
        self._health = health_pb2_grpc.HealthStub(self._channel)
        token = self.config.token
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()

    async def __aenter__(self) -> LemonClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def orchestrate(
        self,
        task: str,
        *,
        options: pb.RunOptions | None = None,
        request_id: str = "",
        timeout: float | None = None,
    ) -> pb.RunResponse:
        request = pb.OrchestrateRequest(task=task, options=options, request_id=request_id)
        response: pb.RunResponse = await self._stub.Orchestrate(
            request, timeout=timeout, metadata=self._metadata
        )
        return response

    async def stream(
        self,
        task: str,
        *,
        options: pb.RunOptions | None = None,
        request_id: str = "",
        timeout: float | None = None,
    ) -> AsyncIterator[pb.RunEvent]:
        request = pb.OrchestrateRequest(task=task, options=options, request_id=request_id)
        call = self._stub.StreamOrchestrate(request, timeout=timeout, metadata=self._metadata)
        try:
            async for event in call:
                yield event
        finally:
            call.cancel()  # a consumer that stops early cancels the run on the server

    async def execute(
        self,
        task: str,
        spec: str,
        *,
        source: str = "",
        options: pb.RunOptions | None = None,
        request_id: str = "",
        timeout: float | None = None,
    ) -> pb.RunResponse:
        request = pb.ExecuteSpecRequest(
            task=task, spec=spec, source=source, options=options, request_id=request_id
        )
        response: pb.RunResponse = await self._stub.ExecuteSpec(
            request, timeout=timeout, metadata=self._metadata
        )
        return response

    async def validate(
        self, spec: str, *, source: str = "", timeout: float | None = None
    ) -> pb.ValidateSpecResponse:
        request = pb.ValidateSpecRequest(spec=spec, source=source)
        response: pb.ValidateSpecResponse = await self._stub.ValidateSpec(
            request, timeout=timeout, metadata=self._metadata
        )
        return response

    async def submit_run(
        self, request: pb.SubmitRunRequest, *, timeout: float | None = None
    ) -> pb.RunState:
        """Start run ``request.run_id`` (or answer its state when it exists: created false)."""
        state: pb.RunState = await self._stub.SubmitRun(
            request, timeout=timeout, metadata=self._metadata
        )
        return state

    async def get_run(
        self,
        run_id: str,
        *,
        wait_s: float = 0.0,
        include_trace: bool = False,
        timeout: float | None = None,
    ) -> pb.RunState:
        """The run's state, waiting up to ``wait_s`` for it to finish."""
        request = pb.GetRunRequest(run_id=run_id, wait_s=wait_s, include_trace=include_trace)
        state: pb.RunState = await self._stub.GetRun(
            request, timeout=timeout, metadata=self._metadata
        )
        return state

    async def cancel_run(self, run_id: str, *, timeout: float | None = None) -> pb.RunState:
        state: pb.RunState = await self._stub.CancelRun(
            pb.CancelRunRequest(run_id=run_id), timeout=timeout, metadata=self._metadata
        )
        return state

    async def health(self, service: str = "", *, timeout: float | None = None) -> str:
        """SERVING, NOT_SERVING, ... for ``service`` ('' is the whole server)."""
        response = await self._health.Check(
            health_pb2.HealthCheckRequest(service=service), timeout=timeout
        )
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))
