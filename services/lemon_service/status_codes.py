"""Every failure the service reports, and the ONE table mapping it to a gRPC status code.

The servicer never picks codes itself: it raises (or lets the core raise) one of the
exceptions below, and :func:`status_for` turns it into ``(code, message)``. A failed run's
result says why as a :class:`~lemon.engine.results.FailureKind` (set by the executor where it
happened); :func:`run_failure` reads it, so a tier that could not serve is UNAVAILABLE and the
run's deadline DEADLINE_EXCEEDED, not an ordinary failed run. :func:`exception_failure` is the
kind of a run the service failed outside the engine (an exception).
"""

from __future__ import annotations

import grpc

from lemon.backends.base import BackendError
from lemon.budget import BudgetError, BudgetRefused
from lemon.engine.results import FailureKind, RunResult, RunStatus
from lemon.spec.issues import SpecError

__all__ = [
    "STATUS_TABLE",
    "BadRequest",
    "JournalUnavailable",
    "LimitExceeded",
    "RunConflict",
    "RunDeadline",
    "RunNotFound",
    "ServiceError",
    "TierUnavailable",
    "exception_failure",
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


class JournalUnavailable(ServiceError):
    """The run journal could not record a new run, so it was not started (retry later)."""


STATUS_TABLE: tuple[tuple[type[BaseException], grpc.StatusCode], ...] = (
    (SpecError, grpc.StatusCode.INVALID_ARGUMENT),
    (BudgetError, grpc.StatusCode.INVALID_ARGUMENT),
    (BudgetRefused, grpc.StatusCode.FAILED_PRECONDITION),
    (BadRequest, grpc.StatusCode.INVALID_ARGUMENT),
    (LimitExceeded, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (TierUnavailable, grpc.StatusCode.UNAVAILABLE),
    (BackendError, grpc.StatusCode.UNAVAILABLE),
    (RunDeadline, grpc.StatusCode.DEADLINE_EXCEEDED),
    (TimeoutError, grpc.StatusCode.DEADLINE_EXCEEDED),
    (RunNotFound, grpc.StatusCode.NOT_FOUND),
    (RunConflict, grpc.StatusCode.ALREADY_EXISTS),
    (JournalUnavailable, grpc.StatusCode.UNAVAILABLE),
)
"""First match wins; anything else is INTERNAL (and logged by the server)."""


def status_for(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    for kind, code in STATUS_TABLE:
        if isinstance(exc, kind):
            if isinstance(exc, SpecError):
                return code, f"invalid spec:\n{exc.render()}"
            if isinstance(exc, BackendError):
                return code, f"backend unavailable: {exc.reason}"
            if isinstance(exc, BudgetRefused):
                return code, f"refused: {exc.reason}"
            return code, str(exc) or kind.__name__
    return grpc.StatusCode.INTERNAL, f"internal error ({type(exc).__name__}): {exc}"


def run_failure(result: RunResult) -> ServiceError | None:
    """The status-worthy reason a finished run failed, or None (succeeded, or an ordinary
    failure such as an empty answer, reported in the response itself): its failure kind
    ``deadline`` is DEADLINE_EXCEEDED, ``tier_unavailable`` UNAVAILABLE (naming the first
    agent whose tier, or tool, could not serve)."""
    if result.status == RunStatus.SUCCEEDED:
        return None
    if result.failure is FailureKind.DEADLINE:
        return RunDeadline(f"{result.error}; unfinished agents were cancelled")
    if result.failure is not FailureKind.TIER_UNAVAILABLE:
        return None
    agent = next((a for a in result.agents if a.failure is FailureKind.TIER_UNAVAILABLE), None)
    if agent is None:  # the executor names the agent; a hand-made result may not
        return TierUnavailable(result.error or "a tier was unavailable")
    what = f"the tool of agent {agent.name!r}" if agent.tool else f"tier {agent.capacity}"
    return TierUnavailable(
        f"{what} unavailable: agent {agent.name!r} failed after {agent.attempts} attempts: "
        f"{agent.error}"
    )


_EXCEPTION_FAILURES: tuple[tuple[type[BaseException], FailureKind], ...] = (
    (SpecError, FailureKind.INVALID_SPEC),
    (BudgetRefused, FailureKind.BUDGET_EXCEEDED),
    (TierUnavailable, FailureKind.TIER_UNAVAILABLE),
    (BackendError, FailureKind.TIER_UNAVAILABLE),
    (RunDeadline, FailureKind.DEADLINE),
    (TimeoutError, FailureKind.DEADLINE),
)


def exception_failure(exc: BaseException) -> FailureKind | None:
    """The failure kind of a run that ended with ``exc`` before the engine had a result (a
    policy that wrote no valid spec, a policy endpoint that stayed down, ...); None when no
    kind applies (an internal error: the run's error says what)."""
    return next((kind for cls, kind in _EXCEPTION_FAILURES if isinstance(exc, cls)), None)
