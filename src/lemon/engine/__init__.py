"""The execution engine: runs a spec's DAG on capacity-tier backends."""

from lemon.engine.executor import CallCache, ExecutionOptions, build_request, execute
from lemon.engine.results import AgentResult, AgentStatus, RunResult, RunStatus
from lemon.events import TraceWriter, read_trace, render_table, render_timeline

__all__ = [
    "AgentResult",
    "AgentStatus",
    "CallCache",
    "ExecutionOptions",
    "RunResult",
    "RunStatus",
    "TraceWriter",
    "build_request",
    "execute",
    "read_trace",
    "render_table",
    "render_timeline",
]
