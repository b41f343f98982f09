"""Interceptors' one shared step: a method handler with its behavior replaced, whatever its
kind (unary or streaming request and response), keeping its serializers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import grpc

__all__ = ["Behavior", "CallKind", "with_behavior"]

CallKind = Literal["unary", "server_stream", "client_stream", "bidi_stream"]
Behavior = Callable[..., Any]


def with_behavior(
    handler: grpc.RpcMethodHandler, replace: Callable[[Behavior, CallKind], Behavior]
) -> grpc.RpcMethodHandler:
    """``handler`` whose behavior is ``replace(behavior, kind)``."""
    codec = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(replace(handler.unary_unary, "unary"), **codec)
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(
            replace(handler.unary_stream, "server_stream"), **codec
        )
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(
            replace(handler.stream_unary, "client_stream"), **codec
        )
    return grpc.stream_stream_rpc_method_handler(
        replace(handler.stream_stream, "bidi_stream"), **codec
    )
