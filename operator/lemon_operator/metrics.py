"""The operator's Prometheus metrics, served in the text format (``GET /metrics``) on the port
``LEMON_OPERATOR_METRICS_PORT`` names (``lemon-operator --metrics-port`` sets it; unset: off).

- ``lemon_operator_reconciles_total{kind, outcome}``: handler runs by the kind that triggered
  them (``LemonSpec``, ``LemonCapacityProfile``, ``LemonTraining``, ``LemonPolicy``,
  ``LemonRun``, ``PyTorchJob``, ``InferenceService``) and outcome (``succeeded``, ``failed``:
  kopf retries it; ``cancelled``: an async handler stopped, e.g. a LemonRun deleted mid-run or
  the operator stopping);
- ``lemon_operator_reconcile_seconds{kind}``: their latency (histogram);
- ``lemon_operator_specs{namespace, condition, status}``: LemonSpecs by condition
  (``Validated``, ``TiersReady``, ``Ready``) and its status (``True``, ``False``, ``Unknown``),
  and ``lemon_operator_specs_watched{namespace}``: all LemonSpecs seen;
- ``lemon_operator_inference_services{namespace, owner, ready}``: the InferenceServices the
  operator manages, by the kind that owns them (``LemonCapacityProfile``, ``LemonPolicy``) and
  readiness;
- ``lemon_operator_namespace_budget_spent_tokens{namespace, name}`` and ``..._spent_cost``,
  ``..._remaining_tokens``, ``..._remaining_cost`` (the fields the LemonBudget limits): each
  LemonBudget's current window, as the orchestration service last reported it.

The gauges come from the watch events kopf already receives: no extra call to the API server.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
import time
from collections import Counter as Tally
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import wraps
from typing import Any, Literal, ParamSpec, TypeVar, cast

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

__all__ = [
    "PORT_ENV",
    "REGISTRY",
    "ReconciledKind",
    "observe_budget",
    "observe_inference_service",
    "observe_spec",
    "reconciled",
    "reconciling",
    "serve",
    "serve_from_env",
]

PORT_ENV = "LEMON_OPERATOR_METRICS_PORT"
ReconciledKind = Literal[
    "LemonSpec",
    "LemonCapacityProfile",
    "LemonTraining",
    "LemonPolicy",
    "LemonRun",
    "LemonBudget",
    "PyTorchJob",
    "InferenceService",
]
Owner = Literal["LemonCapacityProfile", "LemonPolicy"]
P = ParamSpec("P")
R = TypeVar("R")

REGISTRY = CollectorRegistry()
ProcessCollector(registry=REGISTRY)
_RECONCILES = Counter(
    "lemon_operator_reconciles",
    "Reconciles (handler runs) by the kind that triggered them and their outcome.",
    ["kind", "outcome"],
    registry=REGISTRY,
)
_LATENCY = Histogram(
    "lemon_operator_reconcile_seconds",
    "Time a reconcile took, by kind.",
    ["kind"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
    registry=REGISTRY,
)


class _Watched(Collector):
    """LemonSpecs' conditions and managed InferenceServices, as the watch events last showed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.specs: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {}
        self.isvcs: dict[tuple[str, str], tuple[Owner, bool]] = {}
        self.budgets: dict[tuple[str, str], dict[str, float]] = {}

    def collect(self) -> Iterable[Metric]:
        with self.lock:
            conditions = Tally(
                (namespace, *pair) for (namespace, _), pairs in self.specs.items() for pair in pairs
            )
            watched = Tally(namespace for namespace, _ in self.specs)
            isvcs = Tally((namespace, *state) for (namespace, _), state in self.isvcs.items())
            budgets = {key: dict(figures) for key, figures in self.budgets.items()}
        specs = GaugeMetricFamily(
            "lemon_operator_specs",
            "LemonSpecs by namespace, condition and the condition's status.",
            labels=["namespace", "condition", "status"],
        )
        for (namespace, condition, status), count in sorted(conditions.items()):
            specs.add_metric([namespace, condition, status], count)
        yield specs
        seen = GaugeMetricFamily(
            "lemon_operator_specs_watched",
            "LemonSpecs the operator sees, by namespace.",
            labels=["namespace"],
        )
        for namespace, count in sorted(watched.items()):
            seen.add_metric([namespace], count)
        yield seen
        services = GaugeMetricFamily(
            "lemon_operator_inference_services",
            "InferenceServices the operator manages, by namespace, owner kind and readiness.",
            labels=["namespace", "owner", "ready"],
        )
        for (namespace, owner, ready), count in sorted(isvcs.items()):
            services.add_metric([namespace, owner, str(ready).lower()], count)
        yield services
        for figure, text in _BUDGET_FIGURES.items():
            family = GaugeMetricFamily(
                f"lemon_operator_namespace_budget_{figure}", text, labels=["namespace", "name"]
            )
            for (namespace, name), figures in sorted(budgets.items()):
                if figure in figures:
                    family.add_metric([namespace, name], figures[figure])
            yield family


_BUDGET_FIGURES = {
    "spent_tokens": "Worker tokens a LemonBudget's current window spent.",
    "spent_cost": "Tier-priced tokens a LemonBudget's current window spent.",
    "remaining_tokens": "Worker tokens a LemonBudget's current window has left.",
    "remaining_cost": "Tier-priced tokens a LemonBudget's current window has left.",
}


_WATCHED = _Watched()
REGISTRY.register(_WATCHED)


@contextmanager
def reconciling(kind: ReconciledKind) -> Iterator[None]:
    """Count and time one reconcile; an exception (kopf retries it) counts as ``failed``, a
    cancelled coroutine as ``cancelled``."""
    started = time.perf_counter()
    outcome = "failed"
    try:
        yield
        outcome = "succeeded"
    except asyncio.CancelledError:
        outcome = "cancelled"
        raise
    finally:
        _RECONCILES.labels(kind, outcome).inc()
        _LATENCY.labels(kind).observe(time.perf_counter() - started)


def reconciled(kind: ReconciledKind) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """:func:`reconciling` around every run of the decorated handler, sync or async (its name
    and signature kept, so kopf's handler ids do not change)."""

    def decorate(handler: Callable[P, R]) -> Callable[P, R]:
        if inspect.iscoroutinefunction(handler):
            coroutine = cast(Callable[P, Awaitable[Any]], handler)

            @wraps(handler)
            async def observed_async(*args: P.args, **kwargs: P.kwargs) -> Any:
                with reconciling(kind):
                    return await coroutine(*args, **kwargs)

            return cast(Callable[P, R], observed_async)

        @wraps(handler)
        def observed(*args: P.args, **kwargs: P.kwargs) -> R:
            with reconciling(kind):
                return handler(*args, **kwargs)

        return observed

    return decorate


def observe_spec(
    *, namespace: str, name: str, conditions: Sequence[Mapping[str, Any]] | None
) -> None:
    """Record a LemonSpec's conditions as its latest event shows them (None: deleted)."""
    key = (namespace, name)
    with _WATCHED.lock:
        if conditions is None:
            _WATCHED.specs.pop(key, None)
            return
        _WATCHED.specs[key] = tuple(
            (str(c.get("type", "")), str(c.get("status", "Unknown"))) for c in conditions
        )


def observe_inference_service(
    *, namespace: str, name: str, owner: Owner, body: Mapping[str, Any] | None
) -> None:
    """Record a managed InferenceService from its latest event (``body`` None: deleted)."""
    key = (namespace, name)
    with _WATCHED.lock:
        if body is None:
            _WATCHED.isvcs.pop(key, None)
            return
        conditions = (body.get("status") or {}).get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        _WATCHED.isvcs[key] = (owner, ready)


_servers: list[Any] = []


def observe_budget(*, namespace: str, name: str, figures: Mapping[str, float] | None) -> None:
    """Record a LemonBudget's window as the service last reported it (None: deleted)."""
    with _WATCHED.lock:
        if figures is None:
            _WATCHED.budgets.pop((namespace, name), None)
        else:
            _WATCHED.budgets[namespace, name] = dict(figures)


def serve(*, port: int, host: str = "0.0.0.0") -> int:
    """Serve ``GET /metrics`` on ``host:port`` in a thread; returns the bound port."""
    server, _ = start_http_server(port, addr=host, registry=REGISTRY)
    _servers.append(server)
    return int(server.server_port)


def serve_from_env(environ: Mapping[str, str] | None = None) -> int | None:
    """Serve on ``$LEMON_OPERATOR_METRICS_PORT`` if set (once per process); the bound port."""
    value = (os.environ if environ is None else environ).get(PORT_ENV, "").strip()
    if not value:
        return None
    if _servers:
        return int(_servers[0].server_port)
    if not value.isdigit() or not 0 <= int(value) <= 65535:
        raise ValueError(f"{PORT_ENV}={value!r}: not a port number (0-65535)")
    return serve(port=int(value))
