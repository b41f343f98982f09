"""The run journal keeps a finished run as its one JSON record (``TaskRun.to_json``), not as
``RunResponse`` bytes, and still reads a journal written the old way (schema version 1): a
restarted server answers ``GetRun`` from either exactly as the server that ran it did. (The
restart itself, on real processes, is ``tests/service/test_run_journal.py``.)"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from lemon.budget import Budget, BudgetUse
from lemon.engine.results import AgentResult, AgentStatus, FailureKind, RunStatus
from lemon.orchestration import TaskRun
from lemon.policy.defaults import SpecChoice
from lemon_service import convert
from lemon_service.run_journal import RunJournal
from lemon_service.run_store import ServiceRunPhase, _record_of

V1_SCHEMA = """
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    fingerprint BLOB NOT NULL,
    request BLOB NOT NULL,
    phase TEXT NOT NULL,
    accepted_at REAL NOT NULL,
    finished_at REAL,
    error TEXT NOT NULL DEFAULT '',
    failure TEXT,
    response BLOB NOT NULL DEFAULT x'',
    trace TEXT NOT NULL DEFAULT ''
)
"""


def _run() -> TaskRun:
    """A failed, budgeted run with a tool agent; times that no rounding keeps."""
    return TaskRun(
        status=RunStatus.FAILED,
        answer=None,
        spec="agents: ...\n",
        agents=[
            AgentResult(
                "coder", "programmer", "small", "scripted:s", status=AgentStatus.SUCCEEDED,
                output="answer = 4", prompt_tokens=31, completion_tokens=7, latency_s=1 / 3,
                attempts=1, started_s=0.0, finished_s=1 / 3, finish_reason="stop",
                call_key="k1",
            ),
            AgentResult(
                "run", "python_executor", "small", "tool:python", tool=True,
                status=AgentStatus.SUCCEEDED, output="4", attempts=1,
            ),
            AgentResult(
                "solver", "math_solver", "large", "scripted:l", status=AgentStatus.FAILED,
                prompt_tokens=50, attempts=2, error="cut by the budget",
                failure=FailureKind.BUDGET_EXCEEDED,
            ),
        ],
        wall_s=2 / 3,
        critical_path=("coder", "run", "solver"),
        error="agent solver failed: cut by the budget",
        failure=FailureKind.BUDGET_EXCEEDED,
        budget=BudgetUse(
            Budget(tokens=80, source="options.budget"), tokens=88, cost=30.123456, wall_s=0.6667,
            reason="tokens", scope="run",
        ),
        spec_origin="team.yaml",
        spec_choice=SpecChoice.SPEC,
        profile="scripted",
        profile_note="profile scripted: all tiers (small, medium, large) run the double",
    )  # fmt: skip


def _finish(journal: RunJournal, run_id: str, run: TaskRun) -> None:
    journal.accepted(run_id, source="test", fingerprint=b"f", request=b"r", at=time.time())
    journal.finished(
        run_id,
        phase=ServiceRunPhase.FAILED.value,
        error=run.error or "",
        failure=FailureKind.BUDGET_EXCEEDED.value,
        result=json.dumps(run.to_json()),
        trace=['{"event": "run_finish"}'],
    )


def test_the_journal_keeps_the_run_record_and_answers_as_the_running_server(
    tmp_path: Path,
) -> None:
    run = _run()
    journal = RunJournal(tmp_path / "runs.sqlite")
    _finish(journal, "j1", run)
    journal.close()
    journal = RunJournal(tmp_path / "runs.sqlite")
    (entry,) = journal.entries()
    journal.close()
    assert entry.response == b""
    assert json.loads(entry.result)["agents"][0]["call_key"] == "k1"
    record = _record_of(entry, now=time.monotonic(), wall=time.time())
    assert record.result == run
    assert record.phase is ServiceRunPhase.FAILED
    state = convert.run_state(record)
    assert state.result == convert.run_response(run, request_id="j1")
    assert state.budget.spent_cost == 30.123


def test_a_journal_written_with_response_bytes_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    run = _run()
    wire = convert.run_response(run, request_id="old").SerializeToString()
    db = sqlite3.connect(path)
    db.execute(V1_SCHEMA)
    db.execute(
        "INSERT INTO runs (run_id, source, fingerprint, request, phase, accepted_at, "
        "finished_at, error, failure, response, trace) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ("old", "test", b"f", b"r", "failed", time.time(), time.time(), "e", "budget_exceeded",
         wire, ""),
    )  # fmt: skip
    db.execute("PRAGMA user_version=1")
    db.commit()
    db.close()
    journal = RunJournal(path)  # migrates to version 2, keeping the old row
    _finish(journal, "new", run)
    old, new = journal.entries()
    journal.close()
    assert (old.result, old.response) == ("", wire)
    now, wall = time.monotonic(), time.time()
    before, after = _record_of(old, now=now, wall=wall), _record_of(new, now=now, wall=wall)
    assert before.result is None
    assert after.result == run
    assert convert.run_state(before).result == convert.run_response(run, request_id="old")
    assert convert.run_state(after).result == convert.run_response(run, request_id="new")
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA user_version").fetchone()[0] == 2
