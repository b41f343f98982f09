"""Bearer-token check: a server interceptor answering UNAUTHENTICATED before any handler runs.

The standard health service stays open, so a Kubernetes gRPC probe (which sends no metadata)
can check readiness; everything else, reflection included, needs the token.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from lemon_service import handlers

__all__ = ["OPEN_PREFIXES", "BearerTokenInterceptor"]

OPEN_PREFIXES = ("/grpc.health.v1.Health/",)


async def _deny(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
    await context.abort(
        grpc.StatusCode.UNAUTHENTICATED,
        "missing or invalid bearer token (metadata 'authorization: Bearer TOKEN')",
    )


async def _deny_stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
    await _deny(request, context)
    yield  # pragma: no cover - makes this an async generator, as streaming handlers are


class BearerTokenInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    def _authorized(self, details: grpc.HandlerCallDetails) -> bool:
        for key, value in details.invocation_metadata or ():
            if key == "authorization":
                given = value.encode() if isinstance(value, str) else bytes(value)
                return hmac.compare_digest(given, self._expected)
        return False

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(OPEN_PREFIXES):
            return handler
        if self._authorized(handler_call_details):
            return handler
        streaming = ("server_stream", "bidi_stream")
        return handlers.with_behavior(
            handler, lambda _, kind: _deny_stream if kind in streaming else _deny
        )
