"""The one door to the orchestration service (``lemon serve``): submit a run, follow it, cancel
it, through the protocol package's client (:class:`lemon_api.client.LemonClient`, the one
``lemon client`` uses too).

Settings come from the environment the Helm chart sets: ``LEMON_SERVICE_TARGET`` (host:port;
unset, runs stay Pending with reason ``NoService``), ``LEMON_SERVICE_TOKEN_FILE`` (bearer
token), ``LEMON_SERVICE_TLS_CA`` (turns TLS on), ``LEMON_SERVICE_TLS_CERT`` and
``LEMON_SERVICE_TLS_KEY`` (mTLS), ``LEMON_SERVICE_SERVER_NAME``.

The service's messages become the operator's types here, once: its run phase becomes the
LemonRun's (:class:`~lemon.resources.lemon_run.RunPhase`: queued and running are Running,
cancelled is Failed), its failure kind the core's :class:`~lemon.engine.results.FailureKind`,
its tokens :class:`~lemon.resources.lemon_run.RunTokens`. Status codes become three outcomes the
run handlers reason about: :class:`Unavailable` (try again later: the service is down, busy or
slow), :class:`Lost` (the service holds no such run) and :class:`Rejected` (the request itself
is wrong; trying again cannot help).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc

from lemon.engine.results import FailureKind
from lemon.resources.lemon_run import BudgetStop, RunAgentStatus, RunBudget, RunPhase, RunTokens
from lemon_api.client import ClientConfig, LemonClient
from lemon_api.v1 import orchestrator_pb2 as pb
from lemon_operator.run_results import NamespaceLimits, RunOrder, ServiceBudget, ServiceRun

__all__ = ["BudgetWindow", "Lost", "Rejected", "Service", "Unavailable", "client_config"]

_PHASES: dict[int, RunPhase] = {
    pb.RunState.QUEUED: RunPhase.RUNNING,
    pb.RunState.RUNNING: RunPhase.RUNNING,
    pb.RunState.SUCCEEDED: RunPhase.SUCCEEDED,
    pb.RunState.FAILED: RunPhase.FAILED,
    pb.RunState.CANCELLED: RunPhase.FAILED,
}
"""The service's phases as a LemonRun's (anything else, e.g. unspecified, is Failed)."""
_PROTO_KINDS: dict[str, int] = dict(pb.FailureKind.items())
_FAILURES: dict[int, FailureKind] = {
    _PROTO_KINDS[f"FAILURE_KIND_{kind.name}"]: kind
    for kind in FailureKind
    if f"FAILURE_KIND_{kind.name}" in _PROTO_KINDS
}  # the proto's kinds by name: FAILURE_KIND_DEADLINE is deadline (tests/unit/test_runs.py)
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


def client_config(environ: Mapping[str, str] | None = None) -> ClientConfig | None:
    """Where the service is, from ``LEMON_SERVICE_*``; None when no target is set."""
    env = os.environ if environ is None else environ
    target = env.get(f"{ENV}TARGET", "").strip()
    if not target:
        return None

    def path(name: str) -> Path | None:
        value = env.get(f"{ENV}{name}", "").strip()
        return Path(value) if value else None

    return ClientConfig(
        target=target,
        token_file=path("TOKEN_FILE"),
        tls_ca=path("TLS_CA"),
        tls_cert=path("TLS_CERT"),
        tls_key=path("TLS_KEY"),
        server_name=env.get(f"{ENV}SERVER_NAME") or None,
        max_message_bytes=16 << 20,
    )


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


_STOPS: dict[int, BudgetStop] = {
    pb.BUDGET_STOP_RUN: "Run",
    pb.BUDGET_STOP_NAMESPACE: "Namespace",
    pb.BUDGET_STOP_REFUSED: "Refused",
}


def _service_budget(report: pb.BudgetReport) -> ServiceBudget:
    limits = None
    if report.HasField("limits"):
        given = report.limits
        limits = RunBudget(
            tokens=given.tokens if given.HasField("tokens") else None,
            cost=given.cost if given.HasField("cost") else None,
            wall_seconds=given.wall_s if given.HasField("wall_s") else None,
        )
    return ServiceBudget(
        limits=limits,
        spent_tokens=report.spent_tokens,
        spent_cost=report.spent_cost,
        wall_s=report.spent_wall_s,
        reason=report.reason,
        stopped_by=_STOPS.get(report.stop),
        estimate=report.estimate,
        namespace_budget=report.namespace_budget,
    )


def service_run(state: pb.RunState) -> ServiceRun:
    """The service's answer in the operator's types."""
    failure = _FAILURES.get(state.failure)
    if failure is None and state.phase == pb.RunState.CANCELLED:
        failure = FailureKind.CANCELLED
    result = state.result if state.HasField("result") else None
    return ServiceRun(
        run_id=state.run_id,
        phase=_PHASES.get(state.phase, RunPhase.FAILED),
        failure=failure,
        created=state.created,
        answer=result.answer if result is not None else "",
        spec=result.spec if result is not None else "",
        spec_origin=result.spec_origin if result is not None else "",
        agents=tuple(_agent(report) for report in result.agents) if result is not None else (),
        tokens=RunTokens(
            prompt=result.tokens.prompt,
            completion=result.tokens.completion,
            total=result.tokens.total,
        )
        if result is not None
        else RunTokens(),
        wall_s=result.wall_s if result is not None else 0.0,
        error=state.error,
        trace=tuple(state.trace),
        budget=_service_budget(state.budget) if state.HasField("budget") else None,
    )


def run_request(order: RunOrder, *, wait_s: float) -> pb.SubmitRunRequest:
    """The SubmitRun of ``order``, answered once the run finished (with its trace) or after
    ``wait_s``."""
    request = pb.SubmitRunRequest(
        run_id=order.run_id,
        task=order.task,
        source=order.source,
        options=pb.RunOptions(max_tokens=order.max_tokens),
        tiers=[pb.TierEndpoint(tier=t.tier.value, url=t.url, model=t.model) for t in order.tiers],
        deadline_s=order.deadline_s,
        wait_s=wait_s,
        include_trace=True,
    )
    if order.spec is not None:
        request.spec = order.spec
    elif order.policy is not None and order.policy.builtin is not None:
        request.builtin_policy.CopyFrom(
            pb.BuiltinPolicy(policy=order.policy.builtin, name=order.policy.name)
        )
    elif order.policy is not None:
        request.policy.CopyFrom(
            pb.PolicyEndpoint(
                url=order.policy.url, model=order.policy.model, name=order.policy.name
            )
        )
    # neither: the service's default policy writes the spec (its own, else LEMON's built-in)
    request.default_policy = order.policy is not None and order.policy.default
    if order.budget is not None:
        request.options.budget.CopyFrom(_budget(order.budget))
    if order.namespace_budget is not None:
        request.namespace_budget.CopyFrom(namespace_budget(order.namespace_budget))
    return request


def _budget(budget: RunBudget) -> pb.Budget:
    message = pb.Budget()
    if budget.tokens is not None:
        message.tokens = budget.tokens
    if budget.cost is not None:
        message.cost = budget.cost
    if budget.wall_seconds is not None:
        message.wall_s = budget.wall_seconds
    return message


def namespace_budget(limits: NamespaceLimits) -> pb.NamespaceBudget:
    message = pb.NamespaceBudget(name=limits.name, window_s=limits.window_s)
    if limits.tokens is not None:
        message.tokens = limits.tokens
    if limits.cost is not None:
        message.cost = limits.cost
    return message


@dataclass(frozen=True, slots=True)
class BudgetWindow:
    """A namespace budget's current window as the service reported it."""

    window_start: float
    spent_tokens: int
    spent_cost: float
    remaining_tokens: int | None
    remaining_cost: float | None
    runs: int
    stopped: int


class Service:
    """The orchestration service, as the run handlers call it."""

    def __init__(self, config: ClientConfig) -> None:
        self.client = LemonClient(config)

    @property
    def target(self) -> str:
        return self.client.target

    async def _call(self, method: str, call: Callable[[], Awaitable[pb.RunState]]) -> ServiceRun:
        try:
            state = await call()
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
        return service_run(state)

    async def submit(self, order: RunOrder, *, wait_s: float = 0.0) -> ServiceRun:
        """Submit the run (or find it, submitted before); answer once it finished (with its
        trace) or after ``wait_s``."""
        request = run_request(order, wait_s=wait_s)
        return await self._call(
            "SubmitRun",
            lambda: self.client.submit_run(request, timeout=wait_s + CALL_TIMEOUT_S),
        )

    async def wait(self, run_id: str, *, wait_s: float) -> ServiceRun:
        """The run once it finished (with its trace) or after ``wait_s``."""
        return await self._call(
            "GetRun",
            lambda: self.client.get_run(
                run_id, wait_s=wait_s, include_trace=True, timeout=wait_s + CALL_TIMEOUT_S
            ),
        )

    async def cancel(self, run_id: str) -> ServiceRun:
        return await self._call(
            "CancelRun", lambda: self.client.cancel_run(run_id, timeout=CALL_TIMEOUT_S)
        )

    async def sync_budget(self, limits: NamespaceLimits) -> BudgetWindow:
        """Tell the service the namespace's budget; what its window spent and has left."""
        try:
            state = await self.client.sync_namespace_budget(
                namespace_budget(limits), timeout=CALL_TIMEOUT_S
            )
        except grpc.aio.AioRpcError as error:
            message = (
                f"SyncNamespaceBudget at {self.target}: {error.code().name}: {error.details()}"
            )
            if error.code() in _RETRY:
                raise Unavailable(message) from None
            raise Rejected(message) from None
        return BudgetWindow(
            window_start=state.window_start,
            spent_tokens=state.spent_tokens,
            spent_cost=state.spent_cost,
            remaining_tokens=state.remaining_tokens if state.HasField("remaining_tokens") else None,
            remaining_cost=state.remaining_cost if state.HasField("remaining_cost") else None,
            runs=state.runs,
            stopped=state.stopped,
        )

    async def aclose(self) -> None:
        await self.client.close()
