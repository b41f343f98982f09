"""The one typed client of ``lemon.v1.Orchestrator`` (grpc.aio): ``lemon client`` and the
Kubernetes operator (for ``LemonRun``) both call the service through it.

Hand-written (the stubs under ``lemon_api.v1`` are generated) and, like the rest of the
package, importing only grpc and protobuf: each side converts the messages to its own types
(the service's run store, the operator's run status), so neither edge package imports the
other. Errors are grpc's own (``grpc.aio.AioRpcError`` with the status code of the service's
one table); what a status code means to a caller is the caller's to decide.

The channel opens on the first call, in the caller's event loop (a grpc.aio channel belongs to
the loop it was opened in), so a client can be built before that loop runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import grpc

from lemon_api.channels import open_channel
from lemon_api.v1 import orchestrator_pb2 as pb
from lemon_api.v1 import orchestrator_pb2_grpc as pb_grpc

__all__ = ["ClientConfig", "LemonClient", "run_options"]

DEFAULT_TARGET = "127.0.0.1:50051"


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Where the service is and how to reach it."""

    target: str = DEFAULT_TARGET
    token: str | None = field(default=None, repr=False)
    """The bearer token (``authorization: Bearer TOKEN`` on every call)."""
    token_file: Path | None = None
    """A file holding the bearer token, read at each call (a mounted Secret may be rotated);
    used when ``token`` is None."""
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

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """The call metadata: the bearer token, if any (``OSError`` when its file is
        unreadable)."""
        token = self.token
        if token is None and self.token_file is not None:
            token = self.token_file.read_text(encoding="utf-8").strip()
        return (("authorization", f"Bearer {token}"),) if token else ()


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
        self._channel: grpc.aio.Channel | None = None
        self._stub: pb_grpc.OrchestratorStub | None = None

    @property
    def target(self) -> str:
        return self.config.target

    def _orchestrator(self) -> pb_grpc.OrchestratorStub:
        if self._stub is None:
            self._channel = self.config.channel()
            self._stub = pb_grpc.OrchestratorStub(self._channel)  # type: ignore[no-untyped-call]
        return self._stub

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
        if self._channel is not None:
            await self._channel.close()
            self._channel = self._stub = None

    async def orchestrate(
        self,
        task: str,
        *,
        options: pb.RunOptions | None = None,
        request_id: str = "",
        timeout: float | None = None,
    ) -> pb.RunResponse:
        request = pb.OrchestrateRequest(task=task, options=options, request_id=request_id)
        response: pb.RunResponse = await self._orchestrator().Orchestrate(
            request, timeout=timeout, metadata=self.config.metadata()
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
        call = self._orchestrator().StreamOrchestrate(
            request, timeout=timeout, metadata=self.config.metadata()
        )
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
        response: pb.RunResponse = await self._orchestrator().ExecuteSpec(
            request, timeout=timeout, metadata=self.config.metadata()
        )
        return response

    async def validate(
        self, spec: str, *, source: str = "", timeout: float | None = None
    ) -> pb.ValidateSpecResponse:
        request = pb.ValidateSpecRequest(spec=spec, source=source)
        response: pb.ValidateSpecResponse = await self._orchestrator().ValidateSpec(
            request, timeout=timeout, metadata=self.config.metadata()
        )
        return response

    async def submit_run(
        self, request: pb.SubmitRunRequest, *, timeout: float | None = None
    ) -> pb.RunState:
        """Start run ``request.run_id`` (or answer its state when it exists: created false)."""
        state: pb.RunState = await self._orchestrator().SubmitRun(
            request, timeout=timeout, metadata=self.config.metadata()
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
        state: pb.RunState = await self._orchestrator().GetRun(
            request, timeout=timeout, metadata=self.config.metadata()
        )
        return state

    async def cancel_run(self, run_id: str, *, timeout: float | None = None) -> pb.RunState:
        state: pb.RunState = await self._orchestrator().CancelRun(
            pb.CancelRunRequest(run_id=run_id), timeout=timeout, metadata=self.config.metadata()
        )
        return state

    async def sync_namespace_budget(
        self, budget: pb.NamespaceBudget, *, timeout: float | None = None
    ) -> pb.NamespaceBudgetState:
        """Declare (or update) a namespace budget; what its window spent and has left."""
        state: pb.NamespaceBudgetState = await self._orchestrator().SyncNamespaceBudget(
            budget, timeout=timeout, metadata=self.config.metadata()
        )
        return state

    async def health(self, service: str = "", *, timeout: float | None = None) -> str:
        """SERVING, NOT_SERVING, ... for ``service`` ('' is the whole server). Needs
        ``grpcio-health-checking`` (the ``service`` extra), imported here only."""
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        self._orchestrator()  # opens the channel
        assert self._channel is not None
        response = await health_pb2_grpc.HealthStub(self._channel).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=timeout
        )
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))
