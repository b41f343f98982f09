"""Every failure the service reports, and the ONE table mapping it to a gRPC status code.

The servicer never picks codes itself: it raises (or lets the core raise) one of the
exceptions below, and :func:`status_for` turns it into ``(code, message)``. Run results that
failed are classified by :func:`run_failure` first, so a tier that stayed down after the
engine's retries is UNAVAILABLE, not an ordinary failed run.
"""

from __future__ import annotations

from collections.abc import Iterable

import grpc

from lemon.backends.base import BackendError
from lemon.engine.results import RunResult, RunStatus
from lemon.events import AgentFailed, Event
from lemon.spec.issues import SpecError

__all__ = [
    "STATUS_TABLE",
    "BadRequest",
    "LimitExceeded",
    "RunConflict",
    "RunDeadline",
    "RunNotFound",
    "ServiceError",
    "TierUnavailable",
    "run_failure",
    "status_for",
]


class ServiceError(Exception):
    """A request the service refuses or could not serve; ``str(exc)`` is the status message."""


class BadRequest(ServiceError):
    """A malformed request (empty task, unknown template, out-of-range options)."""


class LimitExceeded(ServiceError):
    """Over a server limit: task length, tokens, runs in flight."""


class TierUnavailable(ServiceError):
    """A tier's backend could not be reached, after the engine's retries."""


class RunDeadline(ServiceError):
    """The call's deadline (or the server's run budget) passed; the agents were cancelled."""


class RunNotFound(ServiceError):
    """GetRun / CancelRun named a run id the server does not hold."""


class RunConflict(ServiceError):
    """SubmitRun reused a run id with a different request."""


STATUS_TABLE: tuple[tuple[type[BaseException], grpc.StatusCode], ...] = (
    (SpecError, grpc.StatusCode.INVALID_ARGUMENT),
    (BadRequest, grpc.StatusCode.INVALID_ARGUMENT),
    (LimitExceeded, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (TierUnavailable, grpc.StatusCode.UNAVAILABLE),
    (BackendError, grpc.StatusCode.UNAVAILABLE),
    (RunDeadline, grpc.StatusCode.DEADLINE_EXCEEDED),
    (TimeoutError, grpc.StatusCode.DEADLINE_EXCEEDED),
    (RunNotFound, grpc.StatusCode.NOT_FOUND),
    (RunConflict, grpc.StatusCode.ALREADY_EXISTS),
)
"""First match wins; anything else is INTERNAL (and logged by the server)."""


def status_for(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    for kind, code in STATUS_TABLE:
        if isinstance(exc, kind):
            if isinstance(exc, SpecError):
                return code, f"invalid spec:\n{exc.render()}"
            if isinstance(exc, BackendError):
                return code, f"backend unavailable: {exc.reason}"
            return code, str(exc) or kind.__name__
    return grpc.StatusCode.INTERNAL, f"internal error ({type(exc).__name__}): {exc}"


def run_failure(result: RunResult, events: Iterable[Event]) -> ServiceError | None:
    """The status-worthy reason a finished run failed, or None (succeeded, or an ordinary
    failure such as an empty answer, reported in the response itself).

    A transient backend error on the last attempt (connection refused, 5xx, timeouts) means
    the agent's tier is down; the run's own deadline means DEADLINE_EXCEEDED.
    """
    if result.status == RunStatus.SUCCEEDED:
        return None
    if result.error is not None and result.error.startswith("run deadline"):
        return RunDeadline(f"{result.error}; unfinished agents were cancelled")
    capacity = {agent.name: agent.capacity for agent in result.agents}
    for event in events:
        if isinstance(event, AgentFailed) and event.transient:
            return TierUnavailable(
                f"tier {capacity.get(event.agent, '?')} unavailable: agent {event.agent!r} "
                f"failed after {event.attempt} attempts: {event.error}"
            )
    return None
