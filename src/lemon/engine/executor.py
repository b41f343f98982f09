"""The executor: runs a spec's DAG on its tiers' backends, as parallel as the DAG allows.

Every agent starts as soon as all of its dependencies have finished; ready agents run
concurrently, bounded per tier. An agent's prompt is its base role's template filled with its
duties, the task and the outputs of the agents it depends on (named by agent and role). The
output agent's text is the answer.

Failures never hang a run and never lose its trace: a backend error, timeout or empty answer
marks that agent failed with the reason; its dependants are skipped; transient errors (429,
5xx, resets) are retried with exponential backoff, bounded by the run's deadline; at the
deadline every unfinished agent is cancelled and recorded.

Budgets: with ``ExecutionOptions.budget`` (:class:`lemon.budget.Budget`), every model call
reserves what it can spend before it starts and settles after (:mod:`lemon.engine.metering`):
no agent starts once the budget is spent, a call's ``max_tokens`` is cut to what remains, an
agent whose answer the cut truncated fails (its partial output stays in the trace), and the run
then fails as ``budget_exceeded`` with what it spent; a ``wall`` limit is the run's deadline
when it is the earlier. Tool agents spend no tokens and are not held back.

Counterfactual reuse: with a :class:`CallCache`, an agent whose exact call (agent, model, tier,
decoding, prompt) was answered before gets that answer without a model call, so running a
mutant after its original re-runs only the agents whose inputs changed.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from lemon.backends.base import (
    Backend,
    BackendError,
    Decoding,
    Generation,
    GenerationRequest,
    Message,
)
from lemon.budget import Budget, BudgetUse, prompt_bound
from lemon.engine.metering import Grant, Meter, SharedBudget
from lemon.engine.results import AgentResult, AgentStatus, FailureKind, RunResult, RunStatus
from lemon.engine.tracing import RunSpans
from lemon.events import (
    AgentFailed,
    AgentFinished,
    AgentRetrying,
    AgentStarted,
    RunFinished,
    RunStarted,
    TraceWriter,
)
from lemon.pricing import DEFAULT_TIER_PRICES, TierPrices
from lemon.spec.dag import compile_spec
from lemon.spec.formatting import format_spec
from lemon.spec.models import Agent, Capacity, Spec
from lemon.spec.roles import RoleLibrary, default_roles

__all__ = ["CallCache", "ExecutionOptions", "build_request", "execute"]

CacheKey = tuple[object, ...]


class CallCache:
    """Answers of past model calls, keyed by agent name, model, tier, decoding and prompt."""

    def __init__(self) -> None:
        self._entries: dict[CacheKey, Generation] = {}
        self.hits = 0
        self.misses = 0

    def get(self, key: CacheKey) -> Generation | None:
        found = self._entries.get(key)
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def put(self, key: CacheKey, value: Generation) -> None:
        self._entries[key] = value

    def __len__(self) -> int:
        return len(self._entries)

    def copy(self) -> CallCache:
        """A cache with the same entries and fresh counters (e.g. one per mutant)."""
        twin = CallCache()
        twin._entries = dict(self._entries)
        return twin


@dataclass(frozen=True, slots=True)
class ExecutionOptions:
    decoding: Decoding = field(default_factory=Decoding)
    deadline_s: float = 900.0
    """The whole run's budget; unfinished agents are cancelled at the deadline."""
    max_attempts: int = 4
    backoff_s: float = 0.5
    backoff_max_s: float = 8.0
    concurrency: Mapping[Capacity, int] | None = None
    """Agents running at once per tier (default: 8 per tier)."""
    prefill: Mapping[str, str] | None = None
    """Assistant prefill per role name (e.g. start a programmer's code block)."""
    budget: Budget | None = None
    """The run's budget, enforced during the run (see the module); None: unlimited."""
    shared_budget: SharedBudget | None = None
    """A budget this run draws from with others (its namespace's), enforced as ``budget`` is:
    the tighter of the two cuts (:mod:`lemon.engine.metering`); None: none."""

    def stop_limit(self) -> tuple[float, str, FailureKind]:
        """When the run is cut, in seconds, why in words and as a failure kind: the deadline,
        or the budget's wall time where that is the earlier."""
        wall = self.budget.wall_s if self.budget is not None else None
        if wall is not None and wall <= self.deadline_s:
            return wall, f"wall budget of {wall:g} s reached", FailureKind.BUDGET_EXCEEDED
        return (
            self.deadline_s,
            f"run deadline of {self.deadline_s:g} s reached",
            FailureKind.DEADLINE,
        )


def _inputs_text(
    agent: Agent, role_of: Mapping[str, str], results: Mapping[str, AgentResult]
) -> str:
    if not agent.depends_on:
        return ""
    parts = ["", "Work from the other agents:"]
    for dep in agent.depends_on:
        parts.append(f"--- {dep} ({role_of[dep]}) ---")
        parts.append(results[dep].output.strip())
    parts.append("---")
    return "\n".join(parts) + "\n"


def build_request(
    agent: Agent,
    *,
    spec: Spec,
    task: str,
    roles: RoleLibrary,
    results: Mapping[str, AgentResult],
    options: ExecutionOptions,
    role_of: Mapping[str, str] | None = None,
) -> GenerationRequest:
    """The model call for ``agent``: its role's template with duties, task and inputs.

    ``role_of`` (agent name → role) may be passed in to avoid rebuilding it for every agent.
    """
    role = roles[agent.role]
    role_of = role_of if role_of is not None else {a.name: a.role for a in spec.agents}
    prompt = role.render(
        task=task, duties=agent.duties, inputs=_inputs_text(agent, role_of, results)
    )
    prefill = (options.prefill or {}).get(agent.role, "")
    decoding = options.decoding
    if prefill.count("```") % 2 == 1 and "```" not in decoding.stop:
        decoding = replace(decoding, stop=(*decoding.stop, "```"))  # stop at the fence's end
    return GenerationRequest((Message("user", prompt),), decoding, prefill)


class _Run:
    def __init__(
        self,
        spec: Spec,
        *,
        task: str,
        output: str,
        backends: Mapping[Capacity, Backend],
        roles: RoleLibrary,
        options: ExecutionOptions,
        trace: TraceWriter,
        cache: CallCache | None,
        spans: RunSpans | None = None,
        prices: TierPrices = DEFAULT_TIER_PRICES,
    ) -> None:
        self.spec = spec
        self.task = task
        self.output = output
        self.backends = backends
        self.roles = roles
        self.options = options
        self.trace = trace
        self.cache = cache
        self.spans = spans
        """OpenTelemetry spans of the run; None (every hook skipped) when tracing is off."""
        self.t0 = time.perf_counter()
        self.results = {a.name: self._result(a) for a in spec.agents}
        self.tool_slots = asyncio.Semaphore(8)
        self.role_of = {a.name: a.role for a in spec.agents}
        self.done = {a.name: asyncio.Event() for a in spec.agents}
        limits = options.concurrency or {}
        self.slots = {tier: asyncio.Semaphore(limits.get(tier, 8)) for tier in Capacity}
        self.reused = 0
        self.meter = (
            Meter(options.budget, prices, shared=options.shared_budget)
            if options.budget is not None or options.shared_budget is not None
            else None
        )
        _, self.stop_reason, self.stop_kind = options.stop_limit()

    def _result(self, agent: Agent) -> AgentResult:
        role = self.roles[agent.role]
        if role.is_tool:
            model, tool = f"tool:{role.tool}", True
        else:
            model, tool = self.backends[agent.capacity].model_id, False
        return AgentResult(agent.name, agent.role, agent.capacity.value, model, tool=tool)

    def _now(self) -> float:
        return time.perf_counter() - self.t0

    def _finish(
        self,
        result: AgentResult,
        status: AgentStatus,
        error: str | None = None,
        failure: FailureKind | None = None,
    ) -> None:
        result.status = status
        result.error = error
        if status is not AgentStatus.SUCCEEDED:
            result.failure = failure or FailureKind.AGENT_FAILED
        result.finished_s = self._now()
        self.trace.emit(
            AgentFinished(
                agent=result.name,
                status=status.value,
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
                latency_s=round(result.latency_s, 4),
                attempts=result.attempts,
                reused=result.reused,
                error=error,
                output=result.output,
            )
        )
        if self.spans is not None:
            self.spans.agent_finished(result)
        self.done[result.name].set()

    async def run_agent(self, agent: Agent) -> None:
        result = self.results[agent.name]
        try:
            for dep in agent.depends_on:
                await self.done[dep].wait()
            failed = [
                d for d in agent.depends_on if self.results[d].status != AgentStatus.SUCCEEDED
            ]
            if failed:
                self._finish(
                    result,
                    AgentStatus.SKIPPED,
                    f"dependency {failed[0]!r} did not succeed",
                    FailureKind.DEPENDENCY,
                )
                return
            if result.tool:
                await self._run_tool(agent, result)
                return
            request = build_request(
                agent,
                spec=self.spec,
                task=self.task,
                roles=self.roles,
                results=self.results,
                options=self.options,
                role_of=self.role_of,
            )
            backend = self.backends[agent.capacity]
            key: CacheKey = (
                agent.name,
                backend.model_id,
                agent.capacity.value,
                request.decoding.key(),
                request.messages,
                request.prefill,
            )
            prompt = "\n\n".join(message.content for message in request.messages)
            if self._reuse(agent, result, key, prompt=prompt):
                return
            grant: Grant | None = None
            async with self.slots[agent.capacity]:
                if self.meter is not None:
                    grant = await self._reserve(agent, result, backend, request)
                    if grant is None:
                        return
                    if grant.cut:
                        decoding = replace(request.decoding, max_tokens=grant.max_tokens)
                        request = replace(request, decoding=decoding)
                self._start(agent, result, prompt=prompt)
                try:
                    generation = await self._call(result, backend, request)
                finally:
                    if grant is not None and self.meter is not None:
                        self.meter.settle(
                            grant,
                            prompt_tokens=result.prompt_tokens,
                            completion_tokens=result.completion_tokens,
                        )
            if generation is None:
                return
            if grant is not None and grant.cut and _truncated(generation, grant):
                assert self.meter is not None
                scope = grant.scope
                reason = (
                    f"answer cut at {grant.max_tokens} completion tokens by the "
                    f"{self.meter.label(scope)}"
                )
                self.meter.stop(f"agent {agent.name!r}'s {reason}", scope=scope)
                self._finish(result, AgentStatus.FAILED, reason, FailureKind.BUDGET_EXCEEDED)
                return
            if not generation.text.strip():
                self._finish(result, AgentStatus.FAILED, "empty output from the model")
                return
            if self.cache is not None and (grant is None or not grant.cut):
                self.cache.put(key, generation)  # a cut answer is another call's
            self._finish(result, AgentStatus.SUCCEEDED)
        except asyncio.CancelledError:
            self.cut(agent)
            raise

    def cut(self, agent: Agent) -> None:
        """The run was cut (its deadline or wall budget, or cancelled) before ``agent``
        finished: failed if it had started its call, skipped if not. Nothing for an agent that
        finished."""
        if self.done[agent.name].is_set():
            return
        result = self.results[agent.name]
        status = AgentStatus.FAILED if result.started_s is not None else AgentStatus.SKIPPED
        self._finish(
            result, status, f"{self.stop_reason} before the agent finished", self.stop_kind
        )

    async def _reserve(
        self, agent: Agent, result: AgentResult, backend: Backend, request: GenerationRequest
    ) -> Grant | None:
        """Hold the call's tokens on the run's meter; None (the agent skipped, never started)
        when the budget has not one completion token left for it."""
        assert self.meter is not None
        prompt_tokens = await _prompt_tokens(backend, request)
        grant = await self.meter.reserve(
            agent.capacity.value, prompt_tokens=prompt_tokens, wanted=request.decoding.max_tokens
        )
        if grant is None:
            scope = self.meter.binding(agent.capacity.value)
            reason = (
                f"{self.meter.label(scope)} spent before the agent started "
                f"({self.meter.spent_words()}; its prompt alone is {prompt_tokens} tokens)"
            )
            self.meter.stop(f"agent {agent.name!r} not started: {reason}", scope=scope)
            self._finish(result, AgentStatus.SKIPPED, reason, FailureKind.BUDGET_EXCEEDED)
        return grant

    def _start(
        self, agent: Agent, result: AgentResult, *, reused: bool = False, prompt: str = ""
    ) -> None:
        result.started_s = self._now()
        self.trace.emit(
            AgentStarted(
                agent=agent.name,
                role=agent.role,
                capacity=agent.capacity.value,
                model=result.model,
                reused=reused,
                prompt=prompt,
            )
        )
        if self.spans is not None:
            self.spans.agent_started(agent, result)

    def _reuse(self, agent: Agent, result: AgentResult, key: CacheKey, *, prompt: str = "") -> bool:
        """Finish ``agent`` from the cache if its exact call was answered before."""
        cached = self.cache.get(key) if self.cache is not None else None
        if cached is None:
            return False
        if self.meter is not None and not result.tool:
            spent = cached.prompt_tokens + cached.completion_tokens
            if not self.meter.fits(agent.capacity.value, spent):
                return False  # asked again, under the budget's cut
            self.meter.charge(agent.capacity.value, spent)
        result.reused = True
        self.reused += 1
        self._start(agent, result, reused=True, prompt=prompt)
        self._accept(result, cached, latency=0.0)
        self._finish(result, AgentStatus.SUCCEEDED)
        return True

    async def _run_tool(self, agent: Agent, result: AgentResult) -> None:
        """A tool role's work: no model call, zero tokens, the time counted."""
        from lemon.engine.toolbox import run_tool

        inputs = [self.results[dep].output for dep in agent.depends_on]
        key: CacheKey = (agent.name, result.model, tuple(inputs))
        if self._reuse(agent, result, key):
            return
        async with self.tool_slots:
            self._start(agent, result)
            result.attempts = 1
            started = time.perf_counter()
            tool = self.roles[agent.role].tool or "tool"
            outcome = await (
                self.spans.tool(result, tool, lambda: run_tool(tool, inputs, task=self.task))
                if self.spans is not None
                else run_tool(tool, inputs, task=self.task)
            )
            result.latency_s = time.perf_counter() - started
        if not outcome.ok:  # the tool itself could not run: the machine, not the team
            self._finish(result, AgentStatus.FAILED, outcome.error, FailureKind.TIER_UNAVAILABLE)
            return
        generation = Generation(outcome.output, 0, 0)
        self._accept(result, generation, latency=result.latency_s)
        if self.cache is not None:
            self.cache.put(key, generation)
        self._finish(result, AgentStatus.SUCCEEDED)

    def _accept(self, result: AgentResult, generation: Generation, *, latency: float) -> None:
        result.output = generation.text
        result.prompt_tokens = generation.prompt_tokens
        result.completion_tokens = generation.completion_tokens
        result.finish_reason = generation.finish_reason
        result.call_key = generation.key
        result.latency_s = latency

    async def _call(
        self, result: AgentResult, backend: Backend, request: GenerationRequest
    ) -> Generation | None:
        delay = self.options.backoff_s
        while True:
            result.attempts += 1
            started = time.perf_counter()
            try:
                generation = await (
                    self.spans.call(result, request, backend.generate)
                    if self.spans is not None
                    else backend.generate(request)
                )
            except BackendError as exc:
                retry = exc.transient and result.attempts < self.options.max_attempts
                failed = AgentRetrying if retry else AgentFailed
                self.trace.emit(
                    failed(
                        agent=result.name,
                        attempt=result.attempts,
                        error=exc.reason,
                        transient=exc.transient,
                    )
                )
                if not retry:
                    result.latency_s = time.perf_counter() - started
                    kind = FailureKind.TIER_UNAVAILABLE if exc.unavailable else None
                    if exc.kind is not None:
                        kind = FailureKind(exc.kind)
                    self._finish(result, AgentStatus.FAILED, exc.reason, kind)
                    return None
                await asyncio.sleep(delay * (0.5 + random.random()))  # jittered backoff
                delay = min(delay * 2, self.options.backoff_max_s)
                continue
            self._accept(result, generation, latency=time.perf_counter() - started)
            result.cached = generation.cached
            return generation


def _truncated(generation: Generation, grant: Grant) -> bool:
    """Whether a call whose ``max_tokens`` the budget cut stopped at that cut."""
    return generation.finish_reason == "length" or generation.completion_tokens >= grant.max_tokens


async def _prompt_tokens(backend: Backend, request: GenerationRequest) -> int:
    """The call's prompt tokens as the backend counts them (``count_prompt_tokens``, where it
    has one), else :func:`lemon.budget.prompt_bound` of its text (an upper bound)."""
    count = getattr(backend, "count_prompt_tokens", None)
    if callable(count):
        try:
            counted = await count(request)
        except BackendError:  # a model that cannot load: its call fails, with the reason
            counted = None
        if counted is not None:
            return int(counted)
    text = request.raw_prompt or "\n".join(m.content for m in request.messages)
    return prompt_bound(text + request.prefill)


async def _cancel(tasks: Sequence[asyncio.Future[None]]) -> None:
    for task_ in tasks:
        task_.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _run_chain(
    run: _Run, agents: Sequence[Agent], *, deadline_s: float, spans: RunSpans | None
) -> tuple[str | None, FailureKind | None]:
    """A DAG with one agent per level (a chain: nothing could run beside anything) runs in the
    caller's task, agent after agent in DAG order: the outcomes and events of one task per
    agent (:func:`_run_agents`), without the tasks, their wake-ups and the gather. On a small
    team these were most of the engine's own CPU per run (``lemon bench grpc``)."""
    try:
        async with asyncio.timeout(deadline_s):
            for agent in agents:
                await run.run_agent(agent)
    except TimeoutError:
        for agent in agents:
            run.cut(agent)
        return run.stop_reason, run.stop_kind
    except asyncio.CancelledError:
        for agent in agents:
            run.cut(agent)
        if spans is not None:
            spans.cancelled()
        raise
    except Exception:  # an agent's bug: the rest end as cut, as their cancelled tasks would
        for agent in agents:
            run.cut(agent)
        raise
    return None, None


async def _run_agents(
    run: _Run,
    tasks: Sequence[asyncio.Future[None]],
    *,
    deadline_s: float,
    spans: RunSpans | None,
) -> tuple[str | None, FailureKind | None]:
    """Wait for every agent, up to the deadline: (the run's error, its failure kind) when the
    deadline (or the wall budget) cut it; a cancelled run cancels its agents (their spans end
    first)."""
    try:
        async with asyncio.timeout(deadline_s):
            await asyncio.gather(*tasks)
    except TimeoutError:
        return run.stop_reason, run.stop_kind
    except asyncio.CancelledError:
        if spans is not None:
            await _cancel(tasks)
            spans.cancelled()
        raise
    finally:
        await _cancel(tasks)
    return None, None


def _result(
    run: _Run,
    spec: Spec,
    dag: Any,
    canonical: str,
    *,
    error: str | None,
    failure: FailureKind | None,
) -> RunResult:
    """The run's result from its agents': the output agent's answer, or why it failed (the
    deadline or wall budget, else the budget's tokens, else a tier that could not serve, else a
    call no table held, else an agent). A run whose tier spent past the budget fails for it."""
    final = run.results[dag.output]
    succeeded = final.status == AgentStatus.SUCCEEDED
    meter = run.meter
    if succeeded and meter is not None and meter.overrun is not None:
        succeeded = False
        error, failure = f"budget exceeded: {meter.overrun}", FailureKind.BUDGET_EXCEEDED
    if not succeeded and error is None:
        error = f"output agent {dag.output!r} {final.status.value}: {final.error}"
    if not succeeded and failure is None:
        kinds = {a.failure for a in run.results.values()}
        first = (
            FailureKind.BUDGET_EXCEEDED,
            FailureKind.TIER_UNAVAILABLE,
            FailureKind.NOT_IN_TABLE,
        )
        failure = next((k for k in first if k in kinds), FailureKind.AGENT_FAILED)
        if failure is FailureKind.BUDGET_EXCEEDED and meter is not None and meter.stopped:
            error = f"{error}; {meter.stopped}"
    wall_s = run._now()
    use = None
    if meter is not None:
        reason = None
        if failure is FailureKind.BUDGET_EXCEEDED:
            reason = error
        elif meter is not None and meter.stopped is not None:
            reason = meter.stopped  # an agent off the output's path was cut or not started
        scope = None
        if reason is not None:
            scope = meter.bound_by or "run"  # an overrun, or the wall budget: the run's own
        use = BudgetUse(
            run.options.budget,
            tokens=meter.spent_tokens,
            cost=meter.spent_cost,
            wall_s=round(wall_s, 4),
            reason=reason,
            scope=scope,
            shared=meter.shared.label() if meter.shared is not None else None,
        )
    return RunResult(
        status=RunStatus.SUCCEEDED if succeeded else RunStatus.FAILED,
        answer=final.output if succeeded else None,
        spec=canonical,
        agents=[run.results[a.name] for a in spec.agents],
        wall_s=run._now(),
        critical_path=dag.critical_path,
        error=error,
        reused_calls=run.reused,
        failure=failure,
        budget=use,
    )


async def execute(
    spec: Spec,
    *,
    task: str,
    backends: Mapping[Capacity, Backend],
    output: str | None = None,
    roles: RoleLibrary | None = None,
    options: ExecutionOptions | None = None,
    trace: TraceWriter | None = None,
    cache: CallCache | None = None,
    profile: str = "",
    spec_text: str | None = None,
    origin: str = "",
    tier_prices: TierPrices | None = None,
) -> RunResult:
    """Run ``spec`` on ``task``; always returns a result (failed runs carry the reason).

    ``profile`` names the capacity profile in the trace; ``spec_text`` is the spec's canonical
    text when the caller has it already (else it is formatted here); ``origin`` says where the
    spec came from (a file, a policy), for the run's trace span; ``tier_prices``, when the
    caller knows them, go into the trace's ``run_start`` so a reader can price the run.
    """
    options = options or ExecutionOptions()
    dag = compile_spec(spec, output=output)
    canonical = spec_text if spec_text is not None else format_spec(spec, output=dag.output)
    spans = RunSpans.start(
        canonical=canonical,
        origin=origin,
        output=dag.output,
        profile=profile,
        agents=len(spec.agents),
    )
    owns_trace = trace is None
    trace = trace or TraceWriter()
    run = _Run(
        spec,
        prices=tier_prices or DEFAULT_TIER_PRICES,
        task=task,
        output=dag.output,
        backends=backends,
        roles=roles or default_roles(),
        options=options,
        trace=trace,
        cache=cache,
        spans=spans,
    )
    trace.emit(
        RunStarted(
            task=task,
            output=dag.output,
            profile=profile,
            levels=tuple(tuple(level) for level in dag.levels),
            spec=canonical,
            tier_prices=tier_prices.to_json() if tier_prices is not None else {},
        )
    )
    deadline_s, _, _ = options.stop_limit()
    if all(len(level) == 1 for level in dag.levels):
        by_name = {agent.name: agent for agent in spec.agents}
        chain = [by_name[name] for name in dag.order]
        error, failure = await _run_chain(run, chain, deadline_s=deadline_s, spans=spans)
    else:
        tasks = [asyncio.ensure_future(run.run_agent(agent)) for agent in spec.agents]
        error, failure = await _run_agents(run, tasks, deadline_s=deadline_s, spans=spans)
    result = _result(run, spec, dag, canonical, error=error, failure=failure)
    if spans is not None:
        spans.finished(result)
    trace.emit(
        RunFinished(
            status=result.status.value,
            tokens=result.tokens(),
            wall_s=round(result.wall_s, 4),
            error=error,
            answer=result.answer,
            budget=result.budget.to_json() if result.budget is not None else None,
        )
    )
    if owns_trace:
        trace.close()
    return result
