"""Admission and dispatch: the server's tiers (backends built once per process), and the
admission control that bounds how many runs execute and wait before each is handed to the
core (:func:`lemon.orchestration.run_task`, which runs the engine).

:class:`Dispatcher` is what the servicer and the run store call: it checks a request against
the server's limits, admits it (:class:`Admission`) and runs it on the server's tiers, or on a
run's own (a LemonRun's endpoints); :class:`RunStats` counts what ran, for the metrics.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from lemon.backends.base import Decoding
from lemon.budget import Budget
from lemon.capacity import close_backends
from lemon.engine.executor import ExecutionOptions
from lemon.engine.metering import SharedBudget
from lemon.engine.results import RunResult
from lemon.events import TraceWriter
from lemon.orchestration import RunTiers, TaskRun, run_task
from lemon.policy.defaults import builtin_policy, resolve_policy
from lemon.policy.inference import SpecPolicy, TemplatePolicy
from lemon.policy.template import TemplateVariant
from lemon.spec.roles import RoleLibrary, default_roles
from lemon.spec.validation import ParsedSpec, ValidationOptions, parse_spec
from lemon_service.settings import Limits
from lemon_service.status_codes import BadRequest, LimitExceeded, RunDeadline

__all__ = ["Admission", "Dispatcher", "RunRequest", "RunStats", "SharedLimits", "Ticket"]

DEADLINE_MARGIN_S = 0.05
"""The run ends this much before the call's deadline, so the server still answers with why."""


class Admission:
    """At most ``running`` runs execute and ``waiting`` more wait; the next one is refused
    at once (RESOURCE_EXHAUSTED) instead of joining an unbounded queue."""

    def __init__(self, *, running: int, waiting: int) -> None:
        self._slots = asyncio.Semaphore(running)
        self._capacity = running + waiting
        self.admitted = 0
        """Runs in flight: running plus waiting for a slot."""
        self.running = 0
        self.refused = 0

    def admit(self) -> Ticket:
        """Count a run in now (or refuse it); it executes once its ticket is entered."""
        if self.admitted >= self._capacity:
            self.refused += 1
            raise LimitExceeded(
                f"server busy: {self.admitted} runs in flight (limit {self._capacity}); retry later"
            )
        self.admitted += 1
        return Ticket(self)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        async with self.admit():
            yield


class Ticket:
    """An admitted run: entering waits for a slot; leaving (or :meth:`close`, for a run that
    never started) frees its place."""

    def __init__(self, admission: Admission) -> None:
        self._admission = admission
        self._held = False
        self._closed = False

    async def __aenter__(self) -> Ticket:
        try:
            await self._admission._slots.acquire()
        except BaseException:
            self.close()
            raise
        self._held = True
        self._admission.running += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._held:
            self._admission._slots.release()
            self._admission.running -= 1
            self._held = False
        if not self._closed:
            self._admission.admitted -= 1
            self._closed = True


class RunStats:
    """What the server has run since it started (the metrics endpoint reads it)."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        """Finished runs by status."""
        self.tokens: Counter[tuple[str, str]] = Counter()
        """Tokens of the model calls made, by (tier, "prompt" | "completion")."""

    def record(self, result: RunResult) -> None:
        self.runs[result.status.value] += 1
        for agent in result.agents:
            if not agent.reused:
                self.tokens[agent.capacity, "prompt"] += agent.prompt_tokens
                self.tokens[agent.capacity, "completion"] += agent.completion_tokens


class SharedLimits:
    """A namespace's budget as a request declares it (checked): whose, its limits, its
    window (:class:`lemon.engine.metering.SharedBudget` is the account itself)."""

    def __init__(
        self, name: str, *, tokens: int | None, cost: float | None, window_s: float
    ) -> None:
        field = "namespace_budget"
        if not name.strip():
            raise BadRequest(f"{field}.name: must not be empty")
        if tokens is None and cost is None:
            raise BadRequest(f"{field}: give tokens, cost or both")
        if tokens is not None and tokens <= 0:
            raise BadRequest(f"{field}.tokens: must be a positive number, got {tokens}")
        if cost is not None and not (math.isfinite(cost) and cost > 0):
            raise BadRequest(f"{field}.cost: must be a positive number, got {cost:g}")
        if not (math.isfinite(window_s) and window_s > 0):
            raise BadRequest(f"{field}.window_s: must be a positive number, got {window_s:g}")
        self.name, self.tokens, self.cost, self.window_s = name, tokens, cost, window_s


class RunRequest:
    """A checked request: the task, the spec (None: the policy writes it), the template
    variant asked for (None: the default policy writes the spec) and run options (the run's
    budget, and whether a spec over it may be replaced by one within it)."""

    def __init__(
        self,
        task: str,
        *,
        limits: Limits,
        parsed: ParsedSpec | None = None,
        max_tokens: int = 0,
        seed: int | None = None,
        template: str = "",
        budget: Budget | None = None,
        budget_fallback: bool = False,
    ) -> None:
        if not task.strip():
            raise BadRequest("task: must not be empty")
        if len(task) > limits.max_task_chars:
            raise LimitExceeded(
                f"task: {len(task)} characters; the limit is {limits.max_task_chars}"
            )
        if max_tokens > limits.max_tokens:
            raise LimitExceeded(
                f"options.max_tokens: {max_tokens}; the server allows at most {limits.max_tokens}"
            )
        try:
            variant = TemplateVariant(template) if template else None
        except ValueError:
            known = ", ".join(TemplateVariant)
            raise BadRequest(
                f"options.template: unknown variant {template!r} (known: {known})"
            ) from None
        self.task = task
        self.parsed = parsed
        self.max_tokens = max_tokens or limits.max_tokens
        self.seed = seed
        self.template = variant
        if budget_fallback and budget is None:
            raise BadRequest("options.budget_fallback: set, but options.budget is not")
        self.budget = budget
        self.budget_fallback = budget_fallback


class Dispatcher:
    """Admits requests and runs them on the server's tiers (whose backends it owns: they live
    as long as the server) or on a run's own."""

    def __init__(
        self,
        tiers: RunTiers,
        *,
        limits: Limits,
        roles: RoleLibrary | None = None,
        policy: SpecPolicy | None = None,
    ) -> None:
        self.tiers = tiers
        self.limits = limits
        self.roles = roles or default_roles()
        self.policy = policy
        """The server's default policy (``lemon serve --policy``; None: none)."""
        self.default_policy = resolve_policy(
            default=policy, via="the server's default policy (lemon serve --policy)"
        )
        """Writes the spec when a request gives neither spec nor policy: the server's default,
        else LEMON's built-in default (:func:`lemon.policy.defaults.resolve_policy`); shared."""
        self._builtins: dict[str, SpecPolicy] = {}
        self.admission = Admission(running=limits.max_concurrency, waiting=limits.max_waiting)
        self.stats = RunStats()
        self.shared_budgets: dict[str, SharedBudget] = {}
        """The namespaces' budgets by name, as the last request declared them: every run
        naming one draws from it (they live as long as the server)."""

    def shared_budget(self, limits: SharedLimits) -> SharedBudget:
        """The shared budget ``limits`` names, made on first use and updated to its limits."""
        found = self.shared_budgets.get(limits.name)
        if found is None:
            found = SharedBudget(
                limits.name, tokens=limits.tokens, cost=limits.cost, window_s=limits.window_s
            )
            self.shared_budgets[limits.name] = found
        else:
            found.update(tokens=limits.tokens, cost=limits.cost, window_s=limits.window_s)
        return found

    def builtin(self, name: str) -> SpecPolicy:
        """The built-in policy ``name``, made once and shared by every run that names it
        (raises :class:`lemon.policy.defaults.UnknownPolicy`)."""
        if name not in self._builtins:
            self._builtins[name] = builtin_policy(name)
        return self._builtins[name]

    def parse(self, text: str, *, source: str) -> ParsedSpec:
        """Validate a spec with the server's roles (raises ``SpecError``, located)."""
        return parse_spec(text, source=source, options=ValidationOptions(roles=self.roles))

    def budget(self, time_remaining: float | None) -> float:
        """The run's deadline in seconds: the server's budget, cut to the call's deadline."""
        budget = self.limits.max_run_s
        if time_remaining is not None and math.isfinite(time_remaining):
            budget = min(budget, time_remaining - DEADLINE_MARGIN_S)
        if budget <= 0:
            raise RunDeadline("the call's deadline left no time to run")
        return budget

    async def run(self, request: RunRequest, *, deadline_s: float, trace: TraceWriter) -> TaskRun:
        """One run, once admitted. Cancelling the awaiting task cancels the DAG's agents."""
        async with self.admission.slot():
            return await self.execute(request, deadline_s=deadline_s, trace=trace)

    async def execute(
        self,
        request: RunRequest,
        *,
        deadline_s: float,
        trace: TraceWriter,
        tiers: RunTiers | None = None,
        policy: SpecPolicy | None = None,
        shared: SharedBudget | None = None,
    ) -> TaskRun:
        """One run, admission already settled; ``tiers`` replace the server's own for this run
        (a LemonRun's); the spec is the request's, else ``policy``'s (the run's, resolved by
        the caller), else the template variant's it asked for, else the default policy's. The
        run is held to its budget and to ``shared`` (its namespace's), if any; a spec over its
        budget raises :class:`lemon.budget.BudgetRefused` before anything runs."""
        options = ExecutionOptions(
            decoding=Decoding(max_tokens=request.max_tokens, seed=request.seed),
            deadline_s=deadline_s,
            max_attempts=self.limits.max_attempts,
            budget=request.budget,
            shared_budget=shared,
        )
        result = await run_task(
            request.task,
            tiers=tiers or self.tiers,
            parsed=request.parsed,
            roles=self.roles,
            options=options,
            trace=trace,
            policy=self._writer(request, policy),
            budget_fallback=request.budget_fallback,
        )
        self.stats.record(result)
        return result

    def _writer(self, request: RunRequest, policy: SpecPolicy | None) -> SpecPolicy | None:
        if request.parsed is not None:
            return None
        if policy is not None:
            return policy
        if request.template is not None:
            return TemplatePolicy(request.template)
        return self.default_policy

    async def aclose(self) -> None:
        await close_backends(self.tiers.backends)
        await self.default_policy.aclose()
        for builtin in self._builtins.values():
            await builtin.aclose()
