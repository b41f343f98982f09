"""``lemon serve``: the grpc.aio server — the Orchestrator, standard health checking, server
reflection, size and concurrency limits, optional TLS/mTLS and a bearer-token check.

Built once per process: the tiers' backends are created at start and closed at shutdown.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import signal
import sys
from collections.abc import Coroutine, Sequence
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc

from lemon import telemetry
from lemon.orchestration import profile_note
from lemon.policy.inference import SpecPolicy
from lemon_api.v1 import orchestrator_pb2_grpc as pb_grpc
from lemon_service import convert, web
from lemon_service.auth import BearerTokenInterceptor
from lemon_service.dispatch import Dispatcher
from lemon_service.endpoints import EndpointPool
from lemon_service.metrics import ObservingInterceptor, ServiceMetrics
from lemon_service.run_journal import JournalError, RunJournal
from lemon_service.run_store import RunStore
from lemon_service.servicer import SERVICE_NAME, OrchestratorServicer
from lemon_service.settings import EVENT_LOOPS, ServerConfig, SettingsError

__all__ = ["Server", "event_loop_name", "run_serving", "serve"]

log = logging.getLogger("lemon.serve")
GRACE_S = 5.0


class _Reflection(reflection.aio.ReflectionServicer):  # type: ignore[misc]
    """grpcio-reflection that also resolves method names (``lemon.v1.Orchestrator.Orchestrate``).

    Clients such as ghz ask for the file containing the method; protobuf's upb descriptor pool
    finds only services and messages, so the stock servicer answers NOT_FOUND.
    """

    def _file_containing_symbol(self, request: Any, fully_qualified_name: str) -> Any:
        response = super()._file_containing_symbol(request, fully_qualified_name)
        parent, _, method = fully_qualified_name.rpartition(".")
        if not response.HasField("error_response") or not parent:
            return response
        try:
            service = self._pool.FindServiceByName(parent)
        except KeyError:
            return response
        if method not in service.methods_by_name:
            return response
        return super()._file_containing_symbol(request, parent)


class Server:
    """A started server; ``port`` is the bound one (useful with port 0)."""

    def __init__(self, config: ServerConfig, *, policy: SpecPolicy | None = None) -> None:
        self.config = config
        try:
            self.tracing = telemetry.setup()  # OTEL_* variables; refuse to start half-configured
        except telemetry.TelemetryError as exc:
            raise SettingsError(str(exc)) from None
        self.dispatcher = Dispatcher(config.run_tiers(), limits=config.limits, policy=policy)
        self.metrics = ServiceMetrics(self.dispatcher)
        self.metrics_port: int | None = None
        limits = config.limits
        interceptors: Sequence[grpc.aio.ServerInterceptor] = [
            ObservingInterceptor(self.metrics),  # first: refused calls are counted too
            *([BearerTokenInterceptor(config.token)] if config.token is not None else []),
        ]
        self.grpc = grpc.aio.server(
            interceptors=interceptors,
            options=[
                ("grpc.max_receive_message_length", limits.max_message_bytes),
                ("grpc.max_send_message_length", limits.max_message_bytes),
                ("grpc.so_reuseport", 0),
            ],
        )
        self.pool = EndpointPool(timeout_s=config.limits.call_timeout_s)
        journal = None
        if config.run_journal is not None:
            try:
                journal = RunJournal(config.run_journal)
            except JournalError as exc:
                raise SettingsError(f"--run-journal: {exc}") from None
        self.runs = RunStore(
            self.dispatcher,
            pool=self.pool,
            retention_s=limits.run_retention_s,
            max_runs=limits.max_runs,
            journal=journal,
        )
        servicer = OrchestratorServicer(self.dispatcher, runs=self.runs)
        pb_grpc.add_OrchestratorServicer_to_server(servicer, self.grpc)  # type: ignore[no-untyped-call]
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.grpc)
        reflection_pb2_grpc.add_ServerReflectionServicer_to_server(
            _Reflection((SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME)), self.grpc
        )
        address = f"{config.host}:{config.port}"
        if config.tls is not None:
            key, cert, client_ca = config.tls.read()
            credentials = grpc.ssl_server_credentials(
                [(key, cert)],
                root_certificates=client_ca,
                require_client_auth=client_ca is not None,
            )
            self.port = self.grpc.add_secure_port(address, credentials)
        else:
            self.port = self.grpc.add_insecure_port(address)
        if self.port == 0:
            raise SettingsError(f"cannot listen on {address}")

    async def start(self) -> None:
        if self.runs.journal is not None:  # before serving: a resubmit must find its run
            counts = self.runs.recover(
                functools.partial(convert.journaled_submission, dispatcher=self.dispatcher)
            )
            log.info(
                "run journal %s: %d finished runs read back, %d queued runs started, "
                "%d interrupted runs failed",
                self.runs.journal.path,
                counts["finished"],
                counts["resumed"],
                counts["interrupted"],
            )
        if self.config.metrics_port is not None:
            try:
                self.metrics_port = self.metrics.serve(
                    host=self.config.host,
                    port=self.config.metrics_port,
                    app=web.http_app(
                        registry=self.metrics.registry, store=self.runs, token=self.config.token
                    ),
                )
            except OSError as exc:
                raise SettingsError(
                    f"--metrics-port: cannot listen on {self.config.host}:"
                    f"{self.config.metrics_port}: {exc.strerror}"
                ) from None
        await self.grpc.start()
        for name in ("", SERVICE_NAME):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)

    async def stop(self) -> None:
        """Stop taking calls (health says NOT_SERVING), let running ones finish, close backends."""
        await self.health.enter_graceful_shutdown()
        await self.grpc.stop(GRACE_S)
        await self.runs.aclose()
        await self.pool.aclose()
        await self.dispatcher.aclose()
        self.metrics.stop()
        telemetry.shutdown()  # exports the spans still buffered


def event_loop_name(choice: str) -> str:
    """The loop ``choice`` runs on: ``auto`` is uvloop where it is installed (the ``service``
    extra brings it off Windows), else asyncio's own; ``uvloop`` without it is a
    :class:`SettingsError` naming the package."""
    if choice not in EVENT_LOOPS:
        raise SettingsError(f"--event-loop: {choice!r} is not one of {', '.join(EVENT_LOOPS)}")
    if choice == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401
    except ImportError:
        if choice == "uvloop":
            raise SettingsError(
                "--event-loop uvloop: uvloop is not installed (pip install uvloop, or the "
                "service extra)"
            ) from None
        return "asyncio"
    return "uvloop"


def run_serving(main: Coroutine[Any, Any, None], *, event_loop: str = "auto") -> None:
    """Run ``main`` (:func:`serve`) to completion on the chosen event loop.

    grpc.aio runs on any asyncio loop. uvloop's (libuv, Cython) runs the service's callbacks
    (the engine's timers, the gRPC completions) at less CPU each: on the 2-core benchmark
    machine the server's CPU per request fell by 10-20% and the p99 under 64 clients with it
    (docs/grpc.md has the measurement)."""
    try:
        name = event_loop_name(event_loop)
    except SettingsError:
        main.close()
        raise
    if name == "uvloop":
        import uvloop

        uvloop.run(main)
    else:
        asyncio.run(main)


async def serve(config: ServerConfig, *, policy: SpecPolicy | None = None) -> None:
    """Serve until SIGTERM or SIGINT; ``policy`` is the server's default policy, which writes
    the specs of requests that give neither spec nor policy (None: LEMON's built-in default)."""
    server = Server(config, policy=policy)
    await server.start()
    scheme = "plaintext" if config.tls is None else ("mTLS" if config.tls.client_ca else "TLS")
    auth = "bearer token required" if config.token is not None else "no auth"
    observed = (
        [f"metrics on :{server.metrics_port}/metrics, web view on :{server.metrics_port}/ui/"]
        if server.metrics_port
        else []
    )
    observed.append("tracing on (OTEL_*)" if server.tracing else "tracing off")
    loop_module = type(asyncio.get_running_loop()).__module__.split(".")[0]
    observed.append(f"event loop {'uvloop' if loop_module == 'uvloop' else 'asyncio'}")
    print(
        f"lemon serve: listening on {config.host}:{server.port} ({scheme}, {auth}; "
        f"{', '.join(observed)}); "
        f"{profile_note(server.dispatcher.tiers)}; "
        f"default policy: {server.dispatcher.default_policy.label}",
        file=sys.stderr,
        flush=True,
    )
    # Everything built so far (modules, backends, the policy) lives as long as the process:
    # out of the collector's way, so the full collections a long-running server makes do not
    # walk it again each time (about 4% of the CPU per request in ``lemon bench grpc``).
    gc.freeze()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop()
