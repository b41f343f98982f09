"""The one status table, and how finished runs are classified: by the failure kind the executor
set, never by their message (pure, no server)."""

from __future__ import annotations

import grpc
import pytest

from lemon.backends.base import BackendError
from lemon.engine.results import AgentResult, AgentStatus, FailureKind, RunResult, RunStatus
from lemon.spec.issues import Issue, SpecError
from lemon_api.v1 import orchestrator_pb2 as pb
from lemon_service.convert import failure_kind
from lemon_service.status_codes import (
    BadRequest,
    LimitExceeded,
    RunDeadline,
    TierUnavailable,
    exception_failure,
    run_failure,
    status_for,
)


@pytest.mark.parametrize(
    ("exc", "code", "message"),
    [
        (SpecError([Issue(3, 5, "bad")], source="s.yaml"), "INVALID_ARGUMENT", "s.yaml:3:5: bad"),
        (BadRequest("task: empty"), "INVALID_ARGUMENT", "task: empty"),
        (LimitExceeded("too long"), "RESOURCE_EXHAUSTED", "too long"),
        (TierUnavailable("tier small down"), "UNAVAILABLE", "tier small down"),
        (BackendError("refused", transient=True), "UNAVAILABLE", "backend unavailable: refused"),
        (RunDeadline("late"), "DEADLINE_EXCEEDED", "late"),
        (TimeoutError(), "DEADLINE_EXCEEDED", "TimeoutError"),
        (KeyError("x"), "INTERNAL", "internal error (KeyError)"),
    ],
)
def test_status_table(exc: Exception, code: str, message: str) -> None:
    got_code, got_message = status_for(exc)
    assert got_code == getattr(grpc.StatusCode, code)
    assert message in got_message


def _result(
    status: RunStatus,
    error: str | None = None,
    failure: FailureKind | None = None,
    *,
    tool: bool = False,
) -> RunResult:
    agent = AgentResult("solver", "math_solver", "medium", status=AgentStatus.FAILED, tool=tool)
    agent.attempts, agent.error, agent.failure = 4, "cannot reach", failure
    return RunResult(status, None, "", [agent], 1.0, ("solver",), error=error, failure=failure)


def test_a_run_is_classified_by_its_failure_kind_never_its_message() -> None:
    assert run_failure(_result(RunStatus.SUCCEEDED)) is None
    late = run_failure(_result(RunStatus.FAILED, "late", FailureKind.DEADLINE))
    assert isinstance(late, RunDeadline)
    assert str(late) == "late; unfinished agents were cancelled"
    # the words alone decide nothing: a deadline-like message with another kind is no deadline
    worded = _result(RunStatus.FAILED, "run deadline of 3 s reached", FailureKind.AGENT_FAILED)
    assert run_failure(worded) is None
    down = run_failure(_result(RunStatus.FAILED, "output failed", FailureKind.TIER_UNAVAILABLE))
    assert isinstance(down, TierUnavailable)
    assert str(down) == (
        "tier medium unavailable: agent 'solver' failed after 4 attempts: cannot reach"
    )
    no_tool = _result(RunStatus.FAILED, "x", FailureKind.TIER_UNAVAILABLE, tool=True)
    assert str(run_failure(no_tool)).startswith("the tool of agent 'solver' unavailable")
    assert run_failure(_result(RunStatus.FAILED, "empty", FailureKind.AGENT_FAILED)) is None


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (SpecError([Issue(1, 1, "bad")], source="s"), FailureKind.INVALID_SPEC),
        (BackendError("refused", transient=True), FailureKind.TIER_UNAVAILABLE),
        (TierUnavailable("down"), FailureKind.TIER_UNAVAILABLE),
        (RunDeadline("late"), FailureKind.DEADLINE),
        (TimeoutError(), FailureKind.DEADLINE),
        (KeyError("x"), None),
    ],
)
def test_a_run_failed_by_an_exception_has_its_kind(
    exc: Exception, kind: FailureKind | None
) -> None:
    assert exception_failure(exc) is kind


def test_every_failure_kind_has_a_proto_value() -> None:
    values = {failure_kind(kind) for kind in FailureKind}
    assert len(values) == len(FailureKind)
    assert pb.FAILURE_KIND_UNSPECIFIED not in values
    assert failure_kind(None) == pb.FAILURE_KIND_UNSPECIFIED
