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
from pathlib import Path

import grpc

from lemon.engine.results import FailureKind
from lemon.resources.lemon_run import RunAgentStatus, RunPhase, RunTokens
from lemon_api.client import ClientConfig, LemonClient
from lemon_api.v1 import orchestrator_pb2 as pb
from lemon_operator.run_results import RunOrder, ServiceRun

__all__ = ["Lost", "Rejected", "Service", "Unavailable", "client_config"]

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
    return request


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

    async def aclose(self) -> None:
        await self.client.close()
