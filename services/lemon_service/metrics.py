"""What ``lemon serve`` exports: Prometheus metrics on ``--metrics-port`` (text format,
``GET /metrics``) and, with tracing on, one OpenTelemetry server span per call.

One interceptor observes every call (the Orchestrator, health, reflection, and calls the
bearer-token check refused): ``grpc_server_started_total``, ``grpc_server_handled_total``
(by ``grpc_type``, ``grpc_service``, ``grpc_method``, ``grpc_code``) and the
``grpc_server_handling_seconds`` histogram, the names of go-grpc-prometheus so that standard
gRPC dashboards read them. It also continues the caller's trace (W3C ``traceparent`` metadata)
with a server span, under which the run's spans hang. The dispatcher's own figures are read at
scrape time: ``lemon_service_runs_in_flight`` (running), ``lemon_service_runs_waiting``
(admitted, waiting for a slot), ``lemon_service_runs_total`` (by status),
``lemon_service_tokens_total`` (by tier and kind, model calls actually made) and
``lemon_service_admission_refusals_total`` (runs refused because the server was full); and
per namespace budget (label ``budget``, e.g. ``LemonBudget team/tenant-a``) its current window's
``lemon_service_namespace_budget_spent_tokens``, ``..._spent_cost``,
``..._remaining_tokens``, ``..._remaining_cost`` (for the fields it limits) and
``..._stopped_runs``.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from lemon import telemetry
from lemon.ui.app import WSGIApp
from lemon.ui.app import serve as serve_wsgi
from lemon_service import handlers
from lemon_service.dispatch import Dispatcher

__all__ = ["LATENCY_BUCKETS", "ObservingInterceptor", "ServiceMetrics"]

LATENCY_BUCKETS = (
    *(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5),
    *(1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0),
)
"""Seconds: health checks take a millisecond, runs on real tiers minutes."""


class _RunCollector(Collector):
    """The dispatcher's counters, read when Prometheus scrapes (nothing on the request path)."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher

    def collect(self) -> Iterable[Metric]:
        admission, stats = self.dispatcher.admission, self.dispatcher.stats
        yield GaugeMetricFamily(
            "lemon_service_runs_in_flight", "Runs executing now.", value=admission.running
        )
        yield GaugeMetricFamily(
            "lemon_service_runs_waiting",
            "Runs admitted and waiting for a slot.",
            value=admission.admitted - admission.running,
        )
        yield CounterMetricFamily(
            "lemon_service_admission_refusals",
            "Runs refused (RESOURCE_EXHAUSTED) because the server was full.",
            value=admission.refused,
        )
        runs = CounterMetricFamily(
            "lemon_service_runs", "Runs finished, by status.", labels=["status"]
        )
        for status, count in sorted(stats.runs.items()):
            runs.add_metric([status], count)
        yield runs
        tokens = CounterMetricFamily(
            "lemon_service_tokens",
            "Tokens of the model calls made (reused answers cost none), by tier and kind.",
            labels=["tier", "kind"],
        )
        for (tier, kind), count in sorted(stats.tokens.items()):
            tokens.add_metric([tier, kind], count)
        yield tokens
        yield from _budget_metrics(self.dispatcher)


def _budget_metrics(dispatcher: Dispatcher) -> Iterable[Metric]:
    """Each namespace budget's current window: spent, remaining, runs it stopped."""
    prefix = "lemon_service_namespace_budget"
    family = {
        "spent_tokens": "Worker tokens spent in the budget's current window.",
        "spent_cost": "Tier-priced tokens spent in the budget's current window.",
        "remaining_tokens": "Worker tokens left in the window (budgets that limit tokens).",
        "remaining_cost": "Tier-priced tokens left in the window (budgets that limit cost).",
        "stopped_runs": "Runs the budget stopped or cut in the window.",
    }
    metrics = {
        name: GaugeMetricFamily(f"{prefix}_{name}", text, labels=["budget"])
        for name, text in family.items()
    }
    for name, shared in sorted(dispatcher.shared_budgets.items()):
        tokens, cost = shared.remaining()  # rolls a finished window first
        metrics["spent_tokens"].add_metric([name], shared.spent_tokens)
        metrics["spent_cost"].add_metric([name], shared.spent_cost)
        if tokens is not None:
            metrics["remaining_tokens"].add_metric([name], tokens)
        if cost is not None:
            metrics["remaining_cost"].add_metric([name], cost)
        metrics["stopped_runs"].add_metric([name], shared.stopped)
    yield from metrics.values()


class ServiceMetrics:
    """The server's registry: gRPC call metrics, the dispatcher's figures, process metrics."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self.registry.register(_RunCollector(dispatcher))
        labels = ["grpc_type", "grpc_service", "grpc_method"]
        self.started = Counter(
            "grpc_server_started", "RPCs started on the server.", labels, registry=self.registry
        )
        self.handled = Counter(
            "grpc_server_handled",
            "RPCs completed on the server, by status code.",
            [*labels, "grpc_code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "grpc_server_handling_seconds",
            "Time from the call's start until its status was sent.",
            labels,
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._http: Any = None

    def serve(self, *, host: str, port: int, app: WSGIApp | None = None) -> int:
        """Serve ``GET /metrics`` on ``host:port`` (a thread); returns the bound port. ``app``
        (a WSGI application that also answers ``/metrics``) serves the port instead: the
        server's web view beside its metrics (:func:`lemon_service.web.http_app`)."""
        if app is None:
            self._http, _ = start_http_server(port, addr=host, registry=self.registry)
        else:
            self._http, _ = serve_wsgi(app, host=host, port=port)
        return int(self._http.server_port)

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None


def _code(context: grpc.aio.ServicerContext[Any, Any], *, failed: BaseException | None) -> str:
    """The status the call ended with: what the handler set or aborted with, else OK, or what
    grpc answers for an exception that escaped (CANCELLED, UNKNOWN)."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return str(code.name)
    if isinstance(code, int):  # grpc.aio keeps the numeric code
        return next((c.name for c in grpc.StatusCode if c.value[0] == code), "UNKNOWN")
    if failed is None:
        return "OK"
    return "CANCELLED" if isinstance(failed, asyncio.CancelledError) else "UNKNOWN"


class _Method:
    """One method's observation: its labels and metric children, looked up once (the first
    call of the method), not on every call."""

    def __init__(self, metrics: ServiceMetrics, method: str, kind: str) -> None:
        service, _, name = method.lstrip("/").rpartition("/")
        self.service, self.name = service, name
        self.labels = (kind, service, name)
        self.started = metrics.started.labels(*self.labels)
        self.latency = metrics.latency.labels(*self.labels)
        self._handled_family = metrics.handled
        self._handled: dict[str, Any] = {}
        self.span_name = f"{service}/{name}"
        self.span_attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name}

    def handled(self, code: str) -> Any:
        child = self._handled.get(code)
        if child is None:
            child = self._handled[code] = self._handled_family.labels(*self.labels, code)
        return child


class _Call:
    """One observed call: its start time and server span."""

    def __init__(self, method: _Method, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        self.method = method
        method.started.inc()
        self.t0 = time.perf_counter()
        self.span: Any = None
        if telemetry.tracing():
            with telemetry.remote_parent(context.invocation_metadata()):
                self.span = telemetry.start_span(
                    method.span_name, kind="server", attributes=method.span_attributes
                )

    def current(self) -> AbstractContextManager[None]:
        return self.span.current() if self.span is not None else nullcontext()

    def done(
        self, context: grpc.aio.ServicerContext[Any, Any], failed: BaseException | None
    ) -> None:
        code = _code(context, failed=failed)
        self.method.handled(code).inc()
        self.method.latency.observe(time.perf_counter() - self.t0)
        if self.span is not None:
            self.span.set({"rpc.grpc.status_code": _number(code)})
            if code != "OK":
                self.span.fail(str(context.details() or code), error_type=code)
            self.span.end()


def _number(name: str) -> int:
    return int(getattr(grpc.StatusCode, name, grpc.StatusCode.UNKNOWN).value[0])


Behavior = handlers.Behavior


@contextmanager
def _observed(method: _Method, context: grpc.aio.ServicerContext[Any, Any]) -> Iterator[None]:
    """One call counted, timed and (tracing on) in its server span, whatever ends it."""
    call = _Call(method, context)
    failed: BaseException | None = None
    try:
        with call.current():
            yield
    except BaseException as exc:
        failed = exc
        raise
    finally:
        call.done(context, failed)


def _observing(
    metrics: ServiceMetrics, method_name: str
) -> Callable[[Behavior, handlers.CallKind], Behavior]:
    def wrap(behavior: Behavior, kind: handlers.CallKind) -> Behavior:
        method = _Method(metrics, method_name, kind)
        if inspect.isasyncgenfunction(behavior):  # a streamed response

            async def stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
                with _observed(method, context):
                    async for message in behavior(request, context):
                        yield message

            return stream

        async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            with _observed(method, context):
                return await behavior(request, context)

        return unary

    return wrap


class ObservingInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Wraps every handler with the call metrics and the server span (the first interceptor,
    so calls that a later one refuses are counted too).

    A method's wrapped handler is built on its first call and reused (``lemon bench grpc``'s
    profile: building it, and looking up the metric children, on every call cost about 7% of
    the server's CPU per request); it is rebuilt if the handler behind it changes."""

    def __init__(self, metrics: ServiceMetrics) -> None:
        self.metrics = metrics
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        known = self._wrapped.get(method)
        if known is not None and known[0] is handler:
            return known[1]
        wrapped = handlers.with_behavior(handler, _observing(self.metrics, method))
        self._wrapped[method] = (handler, wrapped)
        return wrapped
