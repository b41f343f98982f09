from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BudgetStop(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BUDGET_STOP_UNSPECIFIED: _ClassVar[BudgetStop]
    BUDGET_STOP_RUN: _ClassVar[BudgetStop]
    BUDGET_STOP_NAMESPACE: _ClassVar[BudgetStop]
    BUDGET_STOP_REFUSED: _ClassVar[BudgetStop]

class FailureKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FAILURE_KIND_UNSPECIFIED: _ClassVar[FailureKind]
    FAILURE_KIND_DEADLINE: _ClassVar[FailureKind]
    FAILURE_KIND_TIER_UNAVAILABLE: _ClassVar[FailureKind]
    FAILURE_KIND_AGENT_FAILED: _ClassVar[FailureKind]
    FAILURE_KIND_DEPENDENCY: _ClassVar[FailureKind]
    FAILURE_KIND_CANCELLED: _ClassVar[FailureKind]
    FAILURE_KIND_INVALID_SPEC: _ClassVar[FailureKind]
    FAILURE_KIND_NOT_IN_TABLE: _ClassVar[FailureKind]
    FAILURE_KIND_INTERRUPTED: _ClassVar[FailureKind]
    FAILURE_KIND_BUDGET_EXCEEDED: _ClassVar[FailureKind]

class SpecChoice(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SPEC_CHOICE_UNSPECIFIED: _ClassVar[SpecChoice]
    SPEC_CHOICE_SPEC: _ClassVar[SpecChoice]
    SPEC_CHOICE_POLICY: _ClassVar[SpecChoice]
    SPEC_CHOICE_DEFAULT_POLICY: _ClassVar[SpecChoice]
    SPEC_CHOICE_BUILTIN_DEFAULT: _ClassVar[SpecChoice]
BUDGET_STOP_UNSPECIFIED: BudgetStop
BUDGET_STOP_RUN: BudgetStop
BUDGET_STOP_NAMESPACE: BudgetStop
BUDGET_STOP_REFUSED: BudgetStop
FAILURE_KIND_UNSPECIFIED: FailureKind
FAILURE_KIND_DEADLINE: FailureKind
FAILURE_KIND_TIER_UNAVAILABLE: FailureKind
FAILURE_KIND_AGENT_FAILED: FailureKind
FAILURE_KIND_DEPENDENCY: FailureKind
FAILURE_KIND_CANCELLED: FailureKind
FAILURE_KIND_INVALID_SPEC: FailureKind
FAILURE_KIND_NOT_IN_TABLE: FailureKind
FAILURE_KIND_INTERRUPTED: FailureKind
FAILURE_KIND_BUDGET_EXCEEDED: FailureKind
SPEC_CHOICE_UNSPECIFIED: SpecChoice
SPEC_CHOICE_SPEC: SpecChoice
SPEC_CHOICE_POLICY: SpecChoice
SPEC_CHOICE_DEFAULT_POLICY: SpecChoice
SPEC_CHOICE_BUILTIN_DEFAULT: SpecChoice

class Budget(_message.Message):
    __slots__ = ("tokens", "cost", "wall_s")
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    WALL_S_FIELD_NUMBER: _ClassVar[int]
    tokens: int
    cost: float
    wall_s: float
    def __init__(self, tokens: _Optional[int] = ..., cost: _Optional[float] = ..., wall_s: _Optional[float] = ...) -> None: ...

class BudgetReport(_message.Message):
    __slots__ = ("limits", "spent_tokens", "spent_cost", "spent_wall_s", "reason", "stop", "estimate", "replaced", "namespace_budget")
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    SPENT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SPENT_COST_FIELD_NUMBER: _ClassVar[int]
    SPENT_WALL_S_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    ESTIMATE_FIELD_NUMBER: _ClassVar[int]
    REPLACED_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_BUDGET_FIELD_NUMBER: _ClassVar[int]
    limits: Budget
    spent_tokens: int
    spent_cost: float
    spent_wall_s: float
    reason: str
    stop: BudgetStop
    estimate: str
    replaced: str
    namespace_budget: str
    def __init__(self, limits: _Optional[_Union[Budget, _Mapping]] = ..., spent_tokens: _Optional[int] = ..., spent_cost: _Optional[float] = ..., spent_wall_s: _Optional[float] = ..., reason: _Optional[str] = ..., stop: _Optional[_Union[BudgetStop, str]] = ..., estimate: _Optional[str] = ..., replaced: _Optional[str] = ..., namespace_budget: _Optional[str] = ...) -> None: ...

class NamespaceBudget(_message.Message):
    __slots__ = ("name", "tokens", "cost", "window_s")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    WINDOW_S_FIELD_NUMBER: _ClassVar[int]
    name: str
    tokens: int
    cost: float
    window_s: float
    def __init__(self, name: _Optional[str] = ..., tokens: _Optional[int] = ..., cost: _Optional[float] = ..., window_s: _Optional[float] = ...) -> None: ...

class NamespaceBudgetState(_message.Message):
    __slots__ = ("name", "limits", "window_start", "spent_tokens", "spent_cost", "remaining_tokens", "remaining_cost", "held_tokens", "runs", "stopped")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_FIELD_NUMBER: _ClassVar[int]
    SPENT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SPENT_COST_FIELD_NUMBER: _ClassVar[int]
    REMAINING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REMAINING_COST_FIELD_NUMBER: _ClassVar[int]
    HELD_TOKENS_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    STOPPED_FIELD_NUMBER: _ClassVar[int]
    name: str
    limits: NamespaceBudget
    window_start: float
    spent_tokens: int
    spent_cost: float
    remaining_tokens: int
    remaining_cost: float
    held_tokens: int
    runs: int
    stopped: int
    def __init__(self, name: _Optional[str] = ..., limits: _Optional[_Union[NamespaceBudget, _Mapping]] = ..., window_start: _Optional[float] = ..., spent_tokens: _Optional[int] = ..., spent_cost: _Optional[float] = ..., remaining_tokens: _Optional[int] = ..., remaining_cost: _Optional[float] = ..., held_tokens: _Optional[int] = ..., runs: _Optional[int] = ..., stopped: _Optional[int] = ...) -> None: ...

class RunOptions(_message.Message):
    __slots__ = ("max_tokens", "seed", "template", "budget", "budget_fallback")
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FALLBACK_FIELD_NUMBER: _ClassVar[int]
    max_tokens: int
    seed: int
    template: str
    budget: Budget
    budget_fallback: bool
    def __init__(self, max_tokens: _Optional[int] = ..., seed: _Optional[int] = ..., template: _Optional[str] = ..., budget: _Optional[_Union[Budget, _Mapping]] = ..., budget_fallback: _Optional[bool] = ...) -> None: ...

class OrchestrateRequest(_message.Message):
    __slots__ = ("task", "options", "request_id")
    TASK_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    task: str
    options: RunOptions
    request_id: str
    def __init__(self, task: _Optional[str] = ..., options: _Optional[_Union[RunOptions, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class ExecuteSpecRequest(_message.Message):
    __slots__ = ("task", "spec", "options", "request_id", "source")
    TASK_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    task: str
    spec: str
    options: RunOptions
    request_id: str
    source: str
    def __init__(self, task: _Optional[str] = ..., spec: _Optional[str] = ..., options: _Optional[_Union[RunOptions, _Mapping]] = ..., request_id: _Optional[str] = ..., source: _Optional[str] = ...) -> None: ...

class ValidateSpecRequest(_message.Message):
    __slots__ = ("spec", "source")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    spec: str
    source: str
    def __init__(self, spec: _Optional[str] = ..., source: _Optional[str] = ...) -> None: ...

class SpecIssue(_message.Message):
    __slots__ = ("line", "column", "message", "rendered")
    LINE_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RENDERED_FIELD_NUMBER: _ClassVar[int]
    line: int
    column: int
    message: str
    rendered: str
    def __init__(self, line: _Optional[int] = ..., column: _Optional[int] = ..., message: _Optional[str] = ..., rendered: _Optional[str] = ...) -> None: ...

class ValidateSpecResponse(_message.Message):
    __slots__ = ("valid", "errors", "warnings", "output", "agents")
    VALID_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    valid: bool
    errors: _containers.RepeatedCompositeFieldContainer[SpecIssue]
    warnings: _containers.RepeatedCompositeFieldContainer[SpecIssue]
    output: str
    agents: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, valid: _Optional[bool] = ..., errors: _Optional[_Iterable[_Union[SpecIssue, _Mapping]]] = ..., warnings: _Optional[_Iterable[_Union[SpecIssue, _Mapping]]] = ..., output: _Optional[str] = ..., agents: _Optional[_Iterable[str]] = ...) -> None: ...

class Tokens(_message.Message):
    __slots__ = ("prompt", "completion", "total")
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    prompt: int
    completion: int
    total: int
    def __init__(self, prompt: _Optional[int] = ..., completion: _Optional[int] = ..., total: _Optional[int] = ...) -> None: ...

class AgentReport(_message.Message):
    __slots__ = ("name", "role", "capacity", "model", "status", "prompt_tokens", "completion_tokens", "latency_s", "attempts", "reused", "error", "output", "failure")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_S_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    REUSED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    name: str
    role: str
    capacity: str
    model: str
    status: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    attempts: int
    reused: bool
    error: str
    output: str
    failure: FailureKind
    def __init__(self, name: _Optional[str] = ..., role: _Optional[str] = ..., capacity: _Optional[str] = ..., model: _Optional[str] = ..., status: _Optional[str] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., latency_s: _Optional[float] = ..., attempts: _Optional[int] = ..., reused: _Optional[bool] = ..., error: _Optional[str] = ..., output: _Optional[str] = ..., failure: _Optional[_Union[FailureKind, str]] = ...) -> None: ...

class RunResponse(_message.Message):
    __slots__ = ("request_id", "status", "answer", "spec", "spec_origin", "agents", "tokens", "wall_s", "error", "profile", "profile_note", "critical_path", "calls", "failure", "spec_choice", "cost", "cost_unit", "budget")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    SPEC_ORIGIN_FIELD_NUMBER: _ClassVar[int]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    WALL_S_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    PROFILE_NOTE_FIELD_NUMBER: _ClassVar[int]
    CRITICAL_PATH_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    SPEC_CHOICE_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    COST_UNIT_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    status: str
    answer: str
    spec: str
    spec_origin: str
    agents: _containers.RepeatedCompositeFieldContainer[AgentReport]
    tokens: Tokens
    wall_s: float
    error: str
    profile: str
    profile_note: str
    critical_path: _containers.RepeatedScalarFieldContainer[str]
    calls: int
    failure: FailureKind
    spec_choice: SpecChoice
    cost: float
    cost_unit: str
    budget: BudgetReport
    def __init__(self, request_id: _Optional[str] = ..., status: _Optional[str] = ..., answer: _Optional[str] = ..., spec: _Optional[str] = ..., spec_origin: _Optional[str] = ..., agents: _Optional[_Iterable[_Union[AgentReport, _Mapping]]] = ..., tokens: _Optional[_Union[Tokens, _Mapping]] = ..., wall_s: _Optional[float] = ..., error: _Optional[str] = ..., profile: _Optional[str] = ..., profile_note: _Optional[str] = ..., critical_path: _Optional[_Iterable[str]] = ..., calls: _Optional[int] = ..., failure: _Optional[_Union[FailureKind, str]] = ..., spec_choice: _Optional[_Union[SpecChoice, str]] = ..., cost: _Optional[float] = ..., cost_unit: _Optional[str] = ..., budget: _Optional[_Union[BudgetReport, _Mapping]] = ...) -> None: ...

class SpecReady(_message.Message):
    __slots__ = ("origin", "output", "levels")
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    LEVELS_FIELD_NUMBER: _ClassVar[int]
    origin: str
    output: str
    levels: _containers.RepeatedCompositeFieldContainer[Level]
    def __init__(self, origin: _Optional[str] = ..., output: _Optional[str] = ..., levels: _Optional[_Iterable[_Union[Level, _Mapping]]] = ...) -> None: ...

class Level(_message.Message):
    __slots__ = ("agents",)
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, agents: _Optional[_Iterable[str]] = ...) -> None: ...

class AgentStarted(_message.Message):
    __slots__ = ("agent", "role", "capacity", "model", "reused")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    REUSED_FIELD_NUMBER: _ClassVar[int]
    agent: str
    role: str
    capacity: str
    model: str
    reused: bool
    def __init__(self, agent: _Optional[str] = ..., role: _Optional[str] = ..., capacity: _Optional[str] = ..., model: _Optional[str] = ..., reused: _Optional[bool] = ...) -> None: ...

class AgentRetry(_message.Message):
    __slots__ = ("agent", "attempt", "error")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    agent: str
    attempt: int
    error: str
    def __init__(self, agent: _Optional[str] = ..., attempt: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class AgentFinished(_message.Message):
    __slots__ = ("agent", "status", "prompt_tokens", "completion_tokens", "latency_s", "attempts", "reused", "error", "output")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_S_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    REUSED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    agent: str
    status: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    attempts: int
    reused: bool
    error: str
    output: str
    def __init__(self, agent: _Optional[str] = ..., status: _Optional[str] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., latency_s: _Optional[float] = ..., attempts: _Optional[int] = ..., reused: _Optional[bool] = ..., error: _Optional[str] = ..., output: _Optional[str] = ...) -> None: ...

class RunEvent(_message.Message):
    __slots__ = ("t", "spec_ready", "agent_started", "agent_retry", "agent_finished", "result")
    T_FIELD_NUMBER: _ClassVar[int]
    SPEC_READY_FIELD_NUMBER: _ClassVar[int]
    AGENT_STARTED_FIELD_NUMBER: _ClassVar[int]
    AGENT_RETRY_FIELD_NUMBER: _ClassVar[int]
    AGENT_FINISHED_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    t: float
    spec_ready: SpecReady
    agent_started: AgentStarted
    agent_retry: AgentRetry
    agent_finished: AgentFinished
    result: RunResponse
    def __init__(self, t: _Optional[float] = ..., spec_ready: _Optional[_Union[SpecReady, _Mapping]] = ..., agent_started: _Optional[_Union[AgentStarted, _Mapping]] = ..., agent_retry: _Optional[_Union[AgentRetry, _Mapping]] = ..., agent_finished: _Optional[_Union[AgentFinished, _Mapping]] = ..., result: _Optional[_Union[RunResponse, _Mapping]] = ...) -> None: ...

class TierEndpoint(_message.Message):
    __slots__ = ("tier", "url", "model")
    TIER_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    tier: str
    url: str
    model: str
    def __init__(self, tier: _Optional[str] = ..., url: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...

class BuiltinPolicy(_message.Message):
    __slots__ = ("policy", "name")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    policy: str
    name: str
    def __init__(self, policy: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class PolicyEndpoint(_message.Message):
    __slots__ = ("url", "model", "name")
    URL_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    url: str
    model: str
    name: str
    def __init__(self, url: _Optional[str] = ..., model: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class SubmitRunRequest(_message.Message):
    __slots__ = ("run_id", "task", "spec", "policy", "builtin_policy", "default_policy", "options", "tiers", "deadline_s", "source", "wait_s", "include_trace", "max_trace_bytes", "namespace_budget")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    BUILTIN_POLICY_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_POLICY_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    TIERS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_S_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    WAIT_S_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_TRACE_FIELD_NUMBER: _ClassVar[int]
    MAX_TRACE_BYTES_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_BUDGET_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    task: str
    spec: str
    policy: PolicyEndpoint
    builtin_policy: BuiltinPolicy
    default_policy: bool
    options: RunOptions
    tiers: _containers.RepeatedCompositeFieldContainer[TierEndpoint]
    deadline_s: float
    source: str
    wait_s: float
    include_trace: bool
    max_trace_bytes: int
    namespace_budget: NamespaceBudget
    def __init__(self, run_id: _Optional[str] = ..., task: _Optional[str] = ..., spec: _Optional[str] = ..., policy: _Optional[_Union[PolicyEndpoint, _Mapping]] = ..., builtin_policy: _Optional[_Union[BuiltinPolicy, _Mapping]] = ..., default_policy: _Optional[bool] = ..., options: _Optional[_Union[RunOptions, _Mapping]] = ..., tiers: _Optional[_Iterable[_Union[TierEndpoint, _Mapping]]] = ..., deadline_s: _Optional[float] = ..., source: _Optional[str] = ..., wait_s: _Optional[float] = ..., include_trace: _Optional[bool] = ..., max_trace_bytes: _Optional[int] = ..., namespace_budget: _Optional[_Union[NamespaceBudget, _Mapping]] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ("run_id", "wait_s", "include_trace", "max_trace_bytes")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_S_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_TRACE_FIELD_NUMBER: _ClassVar[int]
    MAX_TRACE_BYTES_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    wait_s: float
    include_trace: bool
    max_trace_bytes: int
    def __init__(self, run_id: _Optional[str] = ..., wait_s: _Optional[float] = ..., include_trace: _Optional[bool] = ..., max_trace_bytes: _Optional[int] = ...) -> None: ...

class CancelRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class RunState(_message.Message):
    __slots__ = ("run_id", "phase", "created", "result", "error", "trace", "age_s", "failure", "budget")
    class Phase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        PHASE_UNSPECIFIED: _ClassVar[RunState.Phase]
        QUEUED: _ClassVar[RunState.Phase]
        RUNNING: _ClassVar[RunState.Phase]
        SUCCEEDED: _ClassVar[RunState.Phase]
        FAILED: _ClassVar[RunState.Phase]
        CANCELLED: _ClassVar[RunState.Phase]
    PHASE_UNSPECIFIED: RunState.Phase
    QUEUED: RunState.Phase
    RUNNING: RunState.Phase
    SUCCEEDED: RunState.Phase
    FAILED: RunState.Phase
    CANCELLED: RunState.Phase
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    AGE_S_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    phase: RunState.Phase
    created: bool
    result: RunResponse
    error: str
    trace: _containers.RepeatedScalarFieldContainer[str]
    age_s: float
    failure: FailureKind
    budget: BudgetReport
    def __init__(self, run_id: _Optional[str] = ..., phase: _Optional[_Union[RunState.Phase, str]] = ..., created: _Optional[bool] = ..., result: _Optional[_Union[RunResponse, _Mapping]] = ..., error: _Optional[str] = ..., trace: _Optional[_Iterable[str]] = ..., age_s: _Optional[float] = ..., failure: _Optional[_Union[FailureKind, str]] = ..., budget: _Optional[_Union[BudgetReport, _Mapping]] = ...) -> None: ...
