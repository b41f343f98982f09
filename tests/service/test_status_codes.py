"""The one status table, and how finished runs are classified (pure, no server)."""

from __future__ import annotations

import grpc
import pytest

from lemon.backends.base import BackendError
from lemon.engine.results import AgentResult, AgentStatus, RunResult, RunStatus
from lemon.events import AgentFailed
from lemon.spec.issues import Issue, SpecError
from lemon_service.status_codes import (
    BadRequest,
    LimitExceeded,
    RunDeadline,
    TierUnavailable,
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


def _result(status: RunStatus, error: str | None = None) -> RunResult:
    agent = AgentResult("solver", "math_solver", "medium", status=AgentStatus.FAILED)
    return RunResult(status, None, "", [agent], 1.0, ("solver",), error=error)


def test_run_failure_classification() -> None:
    assert run_failure(_result(RunStatus.SUCCEEDED), []) is None
    late = run_failure(_result(RunStatus.FAILED, "run deadline of 3 s reached"), [])
    assert isinstance(late, RunDeadline)
    down = run_failure(
        _result(RunStatus.FAILED, "output agent 'solver' failed: cannot reach"),
        [AgentFailed(agent="solver", attempt=4, error="cannot reach", transient=True)],
    )
    assert isinstance(down, TierUnavailable)
    assert "tier medium unavailable: agent 'solver' failed after 4 attempts" in str(down)
    permanent = [AgentFailed(agent="solver", attempt=1, error="400", transient=False)]
    assert run_failure(_result(RunStatus.FAILED, "output agent failed"), permanent) is None
