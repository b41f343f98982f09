"""The one door to OpenTelemetry: spans are off unless the standard ``OTEL_*`` variables ask.

Off (the default) costs nothing: no OpenTelemetry module is imported, :func:`start_span`
returns None and :func:`trace_headers` an empty dict, so the engine's hooks are one ``is None``
check each. Tracing is on when ``OTEL_TRACES_EXPORTER`` names an exporter (``otlp``,
``console``; ``none`` is off) or an OTLP endpoint is set (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``: the exporter is then ``otlp``); ``OTEL_SDK_DISABLED=true``
turns it off whatever else is set. Then the SDK (the ``telemetry`` extra) exports spans in
batches over OTLP/HTTP+protobuf; the exporter (endpoint, headers, timeout, compression), the
resource (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``), the sampler
(``OTEL_TRACES_SAMPLER``) and the batching (``OTEL_BSP_*``) read their own standard variables.

Context crosses processes as W3C ``traceparent`` (``OTEL_PROPAGATORS``, default
``tracecontext,baggage``): :func:`remote_parent` continues a caller's trace (a gRPC request's
metadata), :func:`trace_headers` hands the current span to an outgoing HTTP call.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from opentelemetry.trace import Span as _OtelSpan
    from opentelemetry.trace import Tracer

__all__ = [
    "AttributeValue",
    "Span",
    "SpanKind",
    "TelemetryError",
    "remote_parent",
    "requested_exporters",
    "setup",
    "shutdown",
    "start_span",
    "trace_headers",
    "tracing",
    "use_provider",
]

AttributeValue = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]
SpanKind = Literal["internal", "client", "server"]
INSTRUMENTATION = "lemon"
EXPORTERS = ("otlp", "console")


class TelemetryError(RuntimeError):
    """Tracing was asked for but cannot run (SDK missing, unknown exporter or protocol)."""


class _State:
    configured = False
    tracer: Tracer | None = None
    provider: Any = None
    """The SDK TracerProvider :func:`setup` made (flushed by :func:`shutdown`)."""


_state = _State()


def requested_exporters(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The span exporters the ``OTEL_*`` variables ask for; ``()`` means tracing is off."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ()
    named = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",")]
    named = [n for n in named if n]
    if named:
        return () if named == ["none"] else tuple(n for n in named if n != "none")
    if env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return ("otlp",)
    return ()


def _exporter(name: str, environ: Mapping[str, str]) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        raise TelemetryError(
            f"OTEL_TRACES_EXPORTER: unknown exporter {name!r} (known: {', '.join(EXPORTERS)}, none)"
        )
    protocol = (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    if protocol != "http/protobuf":
        raise TelemetryError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: LEMON exports OTLP over http/protobuf "
            "only (a collector's port 4318)"
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def setup(environ: Mapping[str, str] | None = None) -> bool:
    """Install the tracer the ``OTEL_*`` variables ask for (once; later calls only answer).

    Returns whether tracing is on. Raises :class:`TelemetryError` when it is asked for but
    cannot run, so a server can refuse to start instead of running untraced.
    """
    if _state.configured:
        return _state.tracer is not None
    env = os.environ if environ is None else environ
    exporters = requested_exporters(env)
    if not exporters:
        _state.configured = True
        return False
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise TelemetryError(
            f"tracing is on (OTEL_TRACES_EXPORTER / OTEL_EXPORTER_OTLP_ENDPOINT) but the "
            f"OpenTelemetry SDK is missing ({exc.name}): pip install "
            "'lemon-orchestration[telemetry]'"
        ) from None
    provider = TracerProvider(resource=Resource.create())
    for name in exporters:
        provider.add_span_processor(BatchSpanProcessor(_exporter(name, env)))
    use_provider(provider)
    return True


def use_provider(provider: Any) -> None:
    """Trace with ``provider`` (an SDK ``TracerProvider``, e.g. with an in-memory exporter in a
    test or a benchmark), or switch tracing off with None. Overrides the environment."""
    _state.configured = True
    _state.provider = provider
    _state.tracer = None if provider is None else provider.get_tracer(INSTRUMENTATION, _version())


def shutdown() -> None:
    """Export what is buffered and stop the provider (a server's last step)."""
    provider, _state.provider, _state.tracer = _state.provider, None, None
    if provider is not None:
        provider.shutdown()


def tracing() -> bool:
    """Whether spans are recorded (reads the environment on the first call)."""
    if not _state.configured:
        setup()
    return _state.tracer is not None


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lemon-orchestration")
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "0"


class Span:
    """An open span; exists only while tracing is on, so holders of one need not check."""

    __slots__ = ("_span",)

    def __init__(self, span: _OtelSpan) -> None:
        self._span = span

    def child(
        self,
        name: str,
        *,
        attributes: Mapping[str, AttributeValue] | None = None,
        kind: SpanKind = "internal",
    ) -> Span:
        """A span under this one (an explicit parent: agents run in their own tasks)."""
        from opentelemetry import trace

        parent = trace.set_span_in_context(self._span)
        return _start(name, attributes=attributes, kind=kind, context=parent)

    def set(self, attributes: Mapping[str, AttributeValue]) -> None:
        self._span.set_attributes(attributes)

    def fail(self, message: str, *, error_type: str) -> None:
        """Mark the span failed: status ERROR with ``message``, and ``error.type``."""
        from opentelemetry.trace import Status, StatusCode

        self._span.set_attribute("error.type", error_type)
        self._span.set_status(Status(StatusCode.ERROR, message))

    def end(self) -> None:
        self._span.end()

    @contextmanager
    def current(self) -> Iterator[None]:
        """This span as the current one (what :func:`trace_headers` hands on)."""
        from opentelemetry import context, trace

        token = context.attach(trace.set_span_in_context(self._span))
        try:
            yield
        finally:
            context.detach(token)


def _start(
    name: str,
    *,
    attributes: Mapping[str, AttributeValue] | None,
    kind: SpanKind,
    context: Any = None,
) -> Span:
    from opentelemetry.trace import SpanKind as OtelKind

    assert _state.tracer is not None
    span = _state.tracer.start_span(
        name, context, kind=getattr(OtelKind, kind.upper()), attributes=attributes
    )
    return Span(span)


def start_span(
    name: str,
    *,
    attributes: Mapping[str, AttributeValue] | None = None,
    kind: SpanKind = "internal",
) -> Span | None:
    """A span under the current one (or a new trace); None when tracing is off."""
    if not _state.configured:
        setup()
    if _state.tracer is None:
        return None
    return _start(name, attributes=attributes, kind=kind)


_NO_HEADERS: dict[str, str] = {}


def trace_headers() -> dict[str, str]:
    """The W3C ``traceparent`` (and ``tracestate``/``baggage``) of the current span, for an
    outgoing request's headers; empty when tracing is off. Do not mutate the result."""
    if _state.tracer is None:
        return _NO_HEADERS
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


@contextmanager
def remote_parent(metadata: Iterable[tuple[str, str | bytes]] | None) -> Iterator[None]:
    """Continue the trace named by incoming ``traceparent`` metadata (a gRPC request's) for
    the spans started inside; nothing when tracing is off or no parent was sent."""
    if _state.tracer is None or not metadata:
        yield
        return
    from opentelemetry import context, propagate

    carrier = {k: v for k, v in metadata if isinstance(v, str)}
    if "traceparent" not in carrier:
        yield
        return
    token = context.attach(propagate.extract(carrier))
    try:
        yield
    finally:
        context.detach(token)
