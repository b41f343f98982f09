"""Run traces: typed events, their one JSON encoding, the writer and the reader.

A trace is one JSON object per line, one line per event, written as events happen:
``{"event": KIND, "t": SECONDS_SINCE_START, ...fields}``. The kinds are the classes below;
:func:`encode_event` and :func:`decode_event` are the only code that turns an event into JSON
and back, so the engine, the policy, the service and the CLI all handle typed events.

Each line is flushed when written, so a trace survives a crash or a kill up to its last event.
``lemon trace PATH`` renders a trace as a table or a timeline (:mod:`lemon.cli.rendering`).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar

__all__ = [
    "EVENT_TYPES",
    "AgentFailed",
    "AgentFinished",
    "AgentRetrying",
    "AgentStarted",
    "Event",
    "PolicyAttempted",
    "PolicyFellBack",
    "RunFinished",
    "RunScored",
    "RunStarted",
    "SpecReady",
    "TraceTruncated",
    "TraceWriter",
    "decode_event",
    "encode_event",
    "read_trace",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted:
    kind: ClassVar[str] = "run_start"
    task: str
    output: str
    profile: str = ""
    levels: tuple[tuple[str, ...], ...] = ()
    spec: str = ""
    """The spec that runs, in canonical YAML (agents, duties, tiers, dependencies)."""
    tier_prices: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """Each tier's relative token price the run is costed with (:mod:`lemon.pricing`); empty
    when the caller did not say (then the defaults apply)."""
    t: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SpecReady:
    """The spec to run is chosen; ``origin`` says where it came from, in words."""

    kind: ClassVar[str] = "spec_ready"
    origin: str
    t: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyAttempted:
    """One completion of a learned policy, and its located errors (none: a valid spec)."""

    kind: ClassVar[str] = "policy_attempt"
    attempt: int
    valid: bool
    errors: tuple[str, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    t: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyFellBack:
    """The learned policy wrote no valid spec; the template policy's is used."""

    kind: ClassVar[str] = "policy_fallback"
    origin: str
    t: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentStarted:
    kind: ClassVar[str] = "agent_start"
    agent: str
    role: str
    capacity: str
    model: str = ""
    reused: bool = False
    prompt: str = ""
    """What the agent was asked: its role's template filled with its duties, the task and its
    dependencies' outputs (empty for tool roles, which get their dependencies' outputs)."""
    t: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentRetrying:
    """A model call failed with a transient error and is tried again."""

    kind: ClassVar[str] = "agent_retry"
    agent: str
    attempt: int
    error: str
    transient: bool = True
    t: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentFailed:
    """A model call failed for good (a permanent error, or the last attempt)."""

    kind: ClassVar[str] = "agent_error"
    agent: str
    attempt: int
    error: str
    transient: bool = False
    t: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentFinished:
    kind: ClassVar[str] = "agent_finish"
    agent: str
    status: str
    """succeeded, failed or skipped."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    attempts: int = 0
    reused: bool = False
    error: str | None = None
    output: str = ""
    t: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished:
    kind: ClassVar[str] = "run_finish"
    status: str
    tokens: Mapping[str, int] = dataclasses.field(default_factory=dict)
    wall_s: float = 0.0
    error: str | None = None
    answer: str | None = None
    budget: Mapping[str, Any] | None = None
    """A budgeted run's account (:meth:`lemon.budget.BudgetUse.to_json`: limits, spent,
    reason, which budget stopped it); None when no budget applied."""
    t: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RunScored:
    """The run's answer scored against a benchmark item (``lemon run`` on its sample item)."""

    kind: ClassVar[str] = "run_scored"
    item: str
    expected: str
    extracted: str = ""
    """What was read from the answer (a number, a letter); empty when nothing was."""
    correct: bool = False
    t: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceTruncated:
    """A trace bounded to ``limit_bytes`` (a served run's, a LemonRun's ConfigMap) left out
    ``left_out`` events here."""

    kind: ClassVar[str] = "trace_truncated"
    left_out: int
    limit_bytes: int
    t: float = 0.0


Event = (
    RunStarted
    | SpecReady
    | PolicyAttempted
    | PolicyFellBack
    | AgentStarted
    | AgentRetrying
    | AgentFailed
    | AgentFinished
    | RunFinished
    | RunScored
    | TraceTruncated
)
EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        RunStarted,
        SpecReady,
        PolicyAttempted,
        PolicyFellBack,
        AgentStarted,
        AgentRetrying,
        AgentFailed,
        AgentFinished,
        RunFinished,
        RunScored,
        TraceTruncated,
    )
}
"""Every event class by its ``kind`` (the ``event`` key of its JSON)."""

_FIELDS = {
    cls: tuple(f.name for f in dataclasses.fields(cls) if f.name != "t")
    for cls in EVENT_TYPES.values()
}


def encode_event(event: Event) -> dict[str, Any]:
    """The event's JSON object: ``event`` (its kind), ``t``, then its fields in order."""
    record: dict[str, Any] = {"event": event.kind, "t": event.t}
    for name in _FIELDS[type(event)]:
        value = getattr(event, name)
        if name == "levels":
            value = [list(level) for level in value]
        elif isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, Mapping):
            value = dict(value)
        record[name] = value
    return record


def decode_event(record: Mapping[str, Any]) -> Event:
    """The event a JSON object encodes (:func:`encode_event`'s inverse); keys it does not know
    are ignored, a missing field or an unknown kind raises ``ValueError``."""
    cls = EVENT_TYPES.get(str(record.get("event")))
    if cls is None:
        raise ValueError(f"unknown trace event {record.get('event')!r}")
    values: dict[str, Any] = {}
    for name in (*_FIELDS[cls], "t"):
        if name not in record:
            continue
        value = record[name]
        if name == "levels":
            value = tuple(tuple(level) for level in value)
        elif isinstance(value, list):
            value = tuple(value)
        values[name] = value
    try:
        return cls(**values)
    except TypeError as exc:
        raise ValueError(f"{cls.kind}: {exc}") from None


class TraceWriter:
    """Collects a run's events (stamping each with the seconds since the writer was created),
    appends them to a JSONL file when ``path`` is given, and hands each to ``on_event``."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        on_event: Callable[[Event], None] | None = None,
    ) -> None:
        self.events: list[Event] = []
        self._on_event = on_event
        self._file: IO[str] | None = None
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._t0 = time.perf_counter()

    def emit(self, event: Event) -> Event:
        """Record ``event``, stamped with the writer's clock, and return the stamped event.

        An event not stamped yet (``t`` 0, as every emit site builds it) is stamped in place:
        copying it with ``dataclasses.replace`` built each event twice, a quarter of the
        engine's own CPU on a scripted run. One stamped already (emitted before, or read back
        from a trace) is copied, so a writer never changes an event another one holds."""
        t = round(time.perf_counter() - self._t0, 6)
        if event.t:
            stamped = dataclasses.replace(event, t=t)
        else:
            object.__setattr__(event, "t", t)
            stamped = event
        self.events.append(stamped)
        if self._file is not None:
            self._file.write(json.dumps(encode_event(stamped), ensure_ascii=False) + "\n")
            self._file.flush()
        if self._on_event is not None:
            self._on_event(stamped)
        return stamped

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_trace(path: str | Path) -> list[Event]:
    """Read a trace (``-``: standard input); a torn last line (a killed writer) is ignored,
    other bad lines raise ``ValueError`` as ``PATH:LINE: ...``."""
    events = []
    text = sys.stdin.read() if str(path) == "-" else Path(path).read_text(encoding="utf-8")
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines):
                break
            raise ValueError(f"{path}:{number}: not a JSON trace event ({exc.msg})") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}:{number}: not a JSON trace event (not an object)")
        try:
            events.append(decode_event(record))
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: {exc}") from None
    return events
