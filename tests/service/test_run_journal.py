"""``lemon serve --run-journal``: a restarted server answers the runs it accepted before and
executes none twice. Real processes throughout: the server is SIGKILLed (or stopped) and
started again on the same port and journal; the tiers are real HTTP servers that log each call,
so "executed once" is counted where the calls land."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from lemon_api.v1 import orchestrator_pb2 as pb
from tests.service.conftest import OpenAIServer, ServeProcess
from tests.service.test_failures import wait_for
from tests.service.test_rpcs import call, status_of
from tests.service.test_runs import ONE, starts, submit, tiers_at


@pytest.fixture
def slow(service_logs: Path) -> Iterator[OpenAIServer]:
    server = OpenAIServer(service_logs, latency=30.0)
    yield server
    server.kill()


@pytest.fixture
def fast(service_logs: Path) -> Iterator[OpenAIServer]:
    server = OpenAIServer(service_logs, latency=0.1)
    yield server
    server.kill()


@pytest.fixture
def journaled(tmp_path: Path, service_logs: Path) -> Iterator[ServeProcess]:
    """One run at a time (so a second run waits, queued), its runs in a journal."""
    server = ServeProcess(
        "--profile", "scripted", "--max-concurrency", "1", "--max-waiting", "8",
        "--run-journal", str(tmp_path / "runs.sqlite"),
        log_dir=service_logs,
    )  # fmt: skip
    yield server
    server.stop()


def test_killed_server_restarts_knowing_every_run_and_executes_none_twice(
    journaled: ServeProcess, slow: OpenAIServer, fast: OpenAIServer
) -> None:
    target = journaled.target
    done = submit("j-done", spec=ONE, tiers=tiers_at(fast, "small"))
    call(target, lambda c: c.submit_run(done))
    finished = call(target, lambda c: c.get_run("j-done", wait_s=30, include_trace=True))
    assert finished.phase == pb.RunState.SUCCEEDED
    running = submit("j-running", spec=ONE, tiers=tiers_at(slow, "small"))
    call(target, lambda c: c.submit_run(running))
    assert wait_for(lambda: slow.count("start") == 1, timeout=20)
    queued = submit("j-queued", spec=ONE, tiers=tiers_at(fast, "small"))
    state = call(target, lambda c: c.submit_run(queued))
    assert state.created
    assert state.phase == pb.RunState.QUEUED  # the one slot is taken

    journaled.restart()  # SIGKILL mid-run, then a new process on the same journal

    # the finished run reads back as it finished
    again = call(target, lambda c: c.get_run("j-done", include_trace=True))
    assert again.phase == pb.RunState.SUCCEEDED
    assert again.result == finished.result
    assert list(again.trace) == list(finished.trace)
    assert json.loads(again.trace[-1])["event"] == "run_finish"
    # the run killed mid-call fails with its kind, and its tier saw exactly one call
    lost = call(target, lambda c: c.get_run("j-running"))
    assert lost.phase == pb.RunState.FAILED
    assert lost.failure == pb.FAILURE_KIND_INTERRUPTED
    assert "not run again" in lost.error
    resubmitted = call(target, lambda c: c.submit_run(running))  # what an operator would do
    assert not resubmitted.created
    assert resubmitted.phase == pb.RunState.FAILED
    # the queued run had called nothing: the new server starts it, once
    resumed = call(target, lambda c: c.get_run("j-queued", wait_s=30))
    assert resumed.phase == pb.RunState.SUCCEEDED
    assert resumed.result.answer == "The answer is 42."
    assert fast.count("answered") == 2  # j-done before the kill, j-queued after it
    assert slow.count("start") == 1
    assert [starts(journaled, run_id) for run_id in ("j-done", "j-running", "j-queued")] == [
        1,
        1,
        1,
    ]
    log = journaled.log.read_text()
    assert "1 finished runs read back, 1 queued runs started, 1 interrupted runs failed" in log
    # the same id with another request is still refused after the restart
    other = submit("j-done", spec=ONE, tiers=tiers_at(fast, "small"), task="Another task?")
    assert status_of(target, lambda c: c.submit_run(other)).code() == grpc.StatusCode.ALREADY_EXISTS


def test_a_stopping_server_cancels_its_running_runs_and_leaves_queued_ones_to_the_next(
    journaled: ServeProcess, slow: OpenAIServer, fast: OpenAIServer
) -> None:
    target = journaled.target
    call(
        target, lambda c: c.submit_run(submit("s-running", spec=ONE, tiers=tiers_at(slow, "small")))
    )
    assert wait_for(lambda: slow.count("start") == 1, timeout=20)
    call(
        target, lambda c: c.submit_run(submit("s-queued", spec=ONE, tiers=tiers_at(fast, "small")))
    )
    journaled.stop()  # SIGTERM: drain, then stop
    assert fast.count("start") == 0
    journaled.restart()
    cancelled = call(target, lambda c: c.get_run("s-running"))
    assert cancelled.phase == pb.RunState.CANCELLED
    assert cancelled.error == "cancelled: the server stopped"
    resumed = call(target, lambda c: c.get_run("s-queued", wait_s=30))
    assert resumed.phase == pb.RunState.SUCCEEDED
    assert fast.count("answered") == 1
    assert slow.count("start") == 1


def test_a_second_server_on_the_same_journal_is_refused(
    journaled: ServeProcess, tmp_path: Path, service_logs: Path
) -> None:
    with pytest.raises(RuntimeError) as failed:
        ServeProcess(
            "--profile", "scripted", "--run-journal", str(tmp_path / "runs.sqlite"),
            log_dir=service_logs,
        )  # fmt: skip
    message = str(failed.value)
    assert f"runs.sqlite is in use by lemon serve (pid {journaled.process.pid})" in message
    assert "Traceback" not in message
    assert call(journaled.target, lambda c: c.health()) == "SERVING"  # the first one serves on


def test_finished_runs_expire_oldest_first_by_count_and_by_age_and_stay_gone_after_a_restart(
    tmp_path: Path, service_logs: Path
) -> None:
    """--max-runs 3: a fourth run makes the oldest finished one go (never a running one);
    --run-retention-s: runs finished longer ago go at the next submit; the journal forgets
    what went, so a restarted server does not answer it again."""
    journal = str(tmp_path / "runs.sqlite")
    server = ServeProcess(
        "--profile", "scripted", "--max-runs", "3", "--run-retention-s", "4",
        "--run-journal", journal, log_dir=service_logs,
    )  # fmt: skip
    try:
        target = server.target

        def run(run_id: str) -> None:
            request = submit(run_id, spec=ONE, wait_s=30)
            state = call(target, lambda c: c.submit_run(request))
            assert (state.created, state.phase) == (True, pb.RunState.SUCCEEDED)

        def answers(run_id: str) -> bool:
            try:
                call(target, lambda c: c.get_run(run_id))
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.NOT_FOUND:
                    raise
                return False
            return True

        def known() -> set[str]:
            return {run_id for run_id in (f"e{i}" for i in range(6)) if answers(run_id)}

        for run_id in ("e0", "e1", "e2", "e3", "e4"):
            run(run_id)
        assert known() == {"e2", "e3", "e4"}
        server.restart()  # the journal holds exactly the runs kept
        assert known() == {"e2", "e3", "e4"}
        assert call(target, lambda c: c.get_run("e4")).phase == pb.RunState.SUCCEEDED
        time.sleep(4.5)  # every run finished more than 4 s ago
        run("e5")
        assert known() == {"e5"}
        server.restart()
        assert known() == {"e5"}
        assert starts(server, "e0") == 1
    finally:
        server.stop()
