"""The execution engine: runs a spec's DAG on capacity-tier backends."""

from lemon.engine.executor import CallCache, ExecutionOptions, build_request, execute
from lemon.engine.results import AgentResult, AgentStatus, RunResult, RunStatus

__all__ = [
    "AgentResult",
    "AgentStatus",
    "CallCache",
    "ExecutionOptions",
    "RunResult",
    "RunStatus",
    "build_request",
    "execute",
]
