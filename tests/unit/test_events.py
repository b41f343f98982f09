"""Typed trace events: one JSON encoding, read back to the same events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lemon import events
from lemon.events import TraceWriter, decode_event, encode_event, read_trace
from tests.conftest import run_lemon

SAMPLES: list[events.Event] = [
    events.RunStarted(
        task="t",
        output="b",
        profile="scripted",
        levels=(("a",), ("b",)),
        spec="agents: []\n",
        tier_prices={"small": 0.5, "medium": 1.0, "large": 2.0},
    ),
    events.SpecReady(origin="template policy (math)"),
    events.PolicyAttempted(attempt=1, valid=False, errors=("3:11: unknown role",)),
    events.PolicyFellBack(origin="template policy (math): fallback"),
    events.AgentStarted(
        agent="a", role="planner", capacity="small", model="m", reused=True, prompt="Plan."
    ),
    events.AgentRetrying(agent="a", attempt=1, error="503", transient=True),
    events.AgentFailed(agent="a", attempt=4, error="503", transient=True),
    events.AgentFinished(agent="a", status="failed", attempts=4, error="503"),
    events.RunFinished(status="failed", tokens={"prompt": 1, "completion": 2, "total": 3}),
    events.RunScored(item="gsm8k:0", expected="18", extracted="18", correct=True),
    events.TraceTruncated(left_out=7, limit_bytes=262144),
]


def test_every_kind_has_a_sample() -> None:
    assert {type(e) for e in SAMPLES} == set(events.EVENT_TYPES.values())


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: e.kind)
def test_round_trip_through_json(event: events.Event) -> None:
    record = json.loads(json.dumps(encode_event(event)))
    assert record["event"] == event.kind
    assert list(record)[:2] == ["event", "t"]
    assert decode_event(record) == event


def test_writer_stamps_times_and_the_file_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    seen: list[events.Event] = []
    trace = TraceWriter(path, on_event=seen.append)
    for event in SAMPLES:
        trace.emit(event)
    trace.close()
    assert seen == trace.events
    times = [e.t for e in trace.events]
    assert times == sorted(times)
    assert read_trace(path) == trace.events
    first = json.loads(path.read_text().splitlines()[0])
    assert first["levels"] == [["a"], ["b"]]  # the file format: plain JSON lists


def test_unknown_kinds_and_missing_fields_are_located(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown trace event 'nope'"):
        decode_event({"event": "nope", "t": 0})
    with pytest.raises(ValueError, match="agent_start"):
        decode_event({"event": "agent_start", "t": 0, "agent": "a"})
    path = tmp_path / "bad.jsonl"
    path.write_text('{"event": "spec_ready", "t": 0, "origin": "x"}\n{"event": "nope"}\n{}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: unknown trace event"):
        read_trace(path)
    assert decode_event({"event": "spec_ready", "t": 1.5, "origin": "x", "new": 1}).t == 1.5


def test_lemon_trace_reads_standard_input() -> None:
    """``lemon trace -``: a LemonRun's trace piped from its ConfigMap, cut by the service."""
    lines = [json.dumps(encode_event(event)) for event in SAMPLES[4:]]
    result = run_lemon("trace", "-", stdin="\n".join(lines) + "\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[2].split()[:2] == ["a", "failed"]
    assert "(7 events left out of this trace)" in result.stdout
    assert "run failed: 3 tokens" in result.stdout
    timeline = run_lemon("trace", "-", "--timeline", stdin="\n".join(lines) + "\n")
    assert timeline.returncode == 0, timeline.stderr
    assert timeline.stdout.startswith("a ")


def test_emit_stamps_a_new_event_in_place_and_copies_a_stamped_one() -> None:
    """Each emit site builds its event for one emit, so it is stamped in place; an event that
    carries a time already (emitted to another writer, or read back) is copied, and the first
    writer's record keeps its own time."""
    import time as _time

    from lemon.events import SpecReady, TraceWriter

    first, second = TraceWriter(), TraceWriter()
    event = SpecReady(origin="template")
    _time.sleep(0.002)
    stamped = first.emit(event)
    assert stamped is event
    assert stamped.t > 0
    _time.sleep(0.002)
    again = second.emit(stamped)
    assert again is not stamped
    assert again.origin == "template"
    assert first.events[0].t == stamped.t  # untouched by the second writer
    assert second.events == [again]
