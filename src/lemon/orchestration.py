"""One task end to end: decide what runs (once), bring up the profile's backends, execute, clean
up, and say where everything came from.

:func:`plan_task` classifies the task once and carries that :class:`~lemon.tasks.TaskKind` in
the :class:`Plan`: the policy writes its spec for that kind, the executor's prefills follow
from it, and the spec's canonical text is formatted once. :func:`run_task` runs a plan on
:class:`RunTiers` (a backend per tier, the name the run reports and the prices its cost is
weighed with: a capacity profile's, built for the run and closed after it, or backends the
caller holds, such as a server's or a LemonRun's endpoints) and returns a :class:`TaskRun`: the
engine's result with the spec's origin, the policy's decision, the tiers' name (with a note
saying in words what each tier runs) and the run's tier-priced cost (:mod:`lemon.pricing`: the
profile's prices, else the defaults).

Benchmark items have one way to be run and one way to be scored, used by evaluation, the
search teacher, GRPO's reward and the outcome tables alike: :func:`run_item` executes a spec
on an item (the item's task text and prefills, the worker budget of :class:`ItemSettings`) and
:func:`item_outcome` turns the result into an :class:`ItemOutcome` (success by
:func:`lemon.scoring.item_success`, worker tokens, tier-priced cost, the policy's own tokens
when a policy wrote the spec, the spec's structure, each agent's tier, call key and tokens):
the one record of an executed spec, of which a table cell, an evaluation's item record and a
teacher's row are projections. This module is the only caller of the executor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from pydantic import BaseModel, ConfigDict

from lemon.backends.base import Backend, Decoding
from lemon.budget import WORKER_MAX_TOKENS
from lemon.capacity import CapacityProfile, build_backends, close_backends
from lemon.data.items import CodeItem, Item
from lemon.engine.executor import CallCache, ExecutionOptions, execute
from lemon.engine.results import AgentResult, AgentStatus, FailureKind, RunResult, RunStatus
from lemon.events import SpecReady, TraceWriter
from lemon.policy.defaults import SpecChoice, resolve_policy, spec_choice
from lemon.policy.estimates import BudgetFit
from lemon.policy.inference import PolicyDecision, SpecPolicy, TemplatePolicy
from lemon.policy.template import TemplateVariant
from lemon.pricing import COST_UNIT, DEFAULT_TIER_PRICES, TierPrices, resolve_prices
from lemon.reward import Outcome
from lemon.spec.formatting import format_spec
from lemon.spec.models import Capacity, Spec
from lemon.spec.roles import RoleLibrary
from lemon.spec.validation import ParsedSpec
from lemon.tasks import TaskKind, classify_task, item_prefills, prefills, task_text

__all__ = [
    "AgentRun",
    "ItemOutcome",
    "ItemSettings",
    "Plan",
    "RunTiers",
    "TaskRun",
    "item_options",
    "item_outcome",
    "plan_task",
    "profile_note",
    "run_item",
    "run_task",
    "within_budget",
]


@dataclass(frozen=True, slots=True)
class Plan:
    """What runs for a task, decided before any agent starts."""

    task: str
    kind: TaskKind
    spec: Spec
    output: str | None
    text: str
    """The spec's canonical text."""
    origin: str
    """Where the spec came from, in words: the spec file, or the policy that wrote it."""
    decision: PolicyDecision | None = None
    """The policy's decision (None for a given spec)."""
    choice: SpecChoice = SpecChoice.SPEC
    """Which step of the resolution order (:mod:`lemon.policy.defaults`) chose the spec."""


@dataclass(slots=True)
class TaskRun(RunResult):
    """The engine's result for a task, with where its spec came from and what it ran on."""

    spec_origin: str = ""
    spec_choice: SpecChoice = SpecChoice.SPEC
    """Which step of the resolution order chose the spec (:mod:`lemon.policy.defaults`)."""
    policy: PolicyDecision | None = None
    profile: str = ""
    profile_note: str = ""
    """The profile in words: which model each tier runs (all tiers may share one)."""
    tier_prices: TierPrices = DEFAULT_TIER_PRICES
    """The prices the run's cost is weighed with (the profile's, else the defaults)."""

    @property
    def priced_tokens(self) -> float:
        """Worker tokens weighed by their tier's price."""
        return self.tier_prices.priced(self.tokens_by_tier())

    def to_json(self) -> dict[str, Any]:
        data = RunResult.to_json(self)
        data |= {
            "profile": self.profile,
            "profile_note": self.profile_note,
            "spec_origin": self.spec_origin,
            "spec_choice": self.spec_choice.value,
            "priced_tokens": round(self.priced_tokens, 3),
            "cost_unit": COST_UNIT,
            "tier_prices": self.tier_prices.model_dump(),  # unrounded: from_json prices alike
        }
        if self.policy is not None and self.policy.attempts:
            data["policy"] = self.policy.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskRun:
        """The run :meth:`to_json` wrote (what the service's run journal keeps), without the
        policy's decision: the JSON says what its attempts were, not the spec objects they
        made, so ``policy`` reads back None."""
        engine = RunResult.from_json(data)
        return cls(
            **{name: getattr(engine, name) for name in _RESULT_FIELDS},
            spec_origin=str(data.get("spec_origin", "")),
            spec_choice=SpecChoice(data.get("spec_choice", SpecChoice.SPEC.value)),
            profile=str(data.get("profile", "")),
            profile_note=str(data.get("profile_note", "")),
            tier_prices=TierPrices.model_validate(data["tier_prices"])
            if "tier_prices" in data
            else DEFAULT_TIER_PRICES,
        )


@dataclass(frozen=True, slots=True)
class RunTiers:
    """What a run's agents run on: one backend per tier (a tier may have a backend that fails
    every call, such as a run's tier without an endpoint), the name the run reports as its
    profile, and the prices its cost is weighed with."""

    name: str
    backends: Mapping[Capacity, Backend]
    prices: TierPrices = DEFAULT_TIER_PRICES
    note: str = field(init=False, compare=False, repr=False)
    """:func:`profile_note` of these tiers, worded once (every run reports it)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "note", profile_note(self))

    @classmethod
    def of(cls, profile: CapacityProfile, backends: Mapping[Capacity, Backend]) -> RunTiers:
        """``profile``'s name and prices (:func:`lemon.pricing.resolve_prices`) on
        ``backends`` (built from it: :func:`lemon.capacity.build_backends`)."""
        return cls(profile.name, backends, resolve_prices(profile=profile))


def profile_note(tiers: RunTiers) -> str:
    """The tiers in words: which backend serves each tier (all tiers may share one)."""
    labels = {tier.value: backend.label for tier, backend in tiers.backends.items()}
    if len(set(labels.values())) == 1:
        only = next(iter(labels.values()))
        return f"profile {tiers.name}: all tiers (small, medium, large) run {only}"
    return f"profile {tiers.name}: " + "; ".join(f"{t}: {label}" for t, label in labels.items())


async def plan_task(
    task: str,
    *,
    parsed: ParsedSpec | None = None,
    policy: SpecPolicy | None = None,
    template_variant: TemplateVariant | None = None,
    roles: RoleLibrary | None = None,
    trace: TraceWriter | None = None,
) -> Plan:
    """The plan for ``task``, by the one resolution order (:mod:`lemon.policy.defaults`): the
    given spec; else the one ``policy`` writes (a policy the request named, or a default that
    :func:`~lemon.policy.defaults.resolve_policy` chose); else the template policy's when
    ``template_variant`` names one; else LEMON's built-in default policy's."""
    kind = classify_task(task)
    if parsed is not None:
        text = format_spec(parsed.spec, output=parsed.output)
        plan = Plan(task, kind, parsed.spec, parsed.output, text, parsed.source)
    else:
        if policy is None and template_variant is not None:
            policy = TemplatePolicy(template_variant)
        writer = resolve_policy(policy=policy)
        decision = await writer.write_spec(task, kind=kind, roles=roles, trace=trace)
        plan = Plan(
            task,
            kind,
            decision.spec,
            decision.output,
            decision.text,
            decision.origin,
            decision,
            spec_choice(writer),
        )
    if trace is not None:
        trace.emit(SpecReady(origin=plan.origin))
    return plan


_RESULT_FIELDS = tuple(f.name for f in fields(RunResult))
"""The engine's result fields a :class:`TaskRun` carries over (read once, not per run)."""


async def run_task(
    task: str,
    *,
    profile: CapacityProfile | None = None,
    tiers: RunTiers | None = None,
    parsed: ParsedSpec | None = None,
    roles: RoleLibrary | None = None,
    options: ExecutionOptions | None = None,
    trace: TraceWriter | None = None,
    cache: CallCache | None = None,
    template_variant: TemplateVariant | None = None,
    policy: SpecPolicy | None = None,
    budget_fallback: bool = False,
) -> TaskRun:
    """Run ``task`` with the given spec, or the one ``policy`` writes (see :func:`plan_task`:
    with neither, the template policy's when ``template_variant`` names one, else the default
    policy's), on exactly one of ``tiers`` (the caller's backends, left open) or ``profile``
    (its backends built for this run and closed after it).

    With ``options.budget``, the spec is first checked against it (:func:`within_budget`):
    refused with :class:`lemon.budget.BudgetRefused` before any backend is built, or, with
    ``budget_fallback``, replaced by the best fixed team within it; the executor then holds the
    run to it, and the result's ``budget`` carries the estimate."""
    if (profile is None) == (tiers is None):
        raise ValueError("run_task needs exactly one of profile or tiers")
    plan = await plan_task(
        task,
        parsed=parsed,
        policy=policy,
        template_variant=template_variant,
        roles=roles,
        trace=trace,
    )
    options = options or ExecutionOptions()
    fit = None
    if options.budget is not None:
        prices = tiers.prices if tiers is not None else resolve_prices(profile=profile)
        plan, fit = within_budget(
            plan, options, roles=roles, fallback=budget_fallback, prices=prices, trace=trace
        )
    if options.prefill is None:
        options = replace(options, prefill=prefills(plan.kind, task))
    owned = tiers is None
    if tiers is None:
        assert profile is not None  # exactly one of the two: checked above
        tiers = RunTiers.of(profile, build_backends(profile))
    try:
        result = await execute(
            plan.spec,
            task=task,
            backends=tiers.backends,
            output=plan.output,
            roles=roles,
            options=options,
            trace=trace,
            cache=cache,
            profile=tiers.name,
            spec_text=plan.text,
            origin=plan.origin,
            tier_prices=tiers.prices,
        )
    finally:
        if owned:
            await close_backends(tiers.backends)
    if fit is not None and result.budget is not None:
        result.budget = replace(result.budget, estimate=fit.estimate, replaced=fit.replaced)
    engine = {name: getattr(result, name) for name in _RESULT_FIELDS}
    return TaskRun(
        **engine,
        spec_origin=plan.origin,
        spec_choice=plan.choice,
        policy=plan.decision,
        profile=tiers.name,
        profile_note=tiers.note,
        tier_prices=tiers.prices,
    )


def within_budget(
    plan: Plan,
    options: ExecutionOptions,
    *,
    roles: RoleLibrary | None,
    fallback: bool,
    prices: TierPrices,
    trace: TraceWriter | None = None,
) -> tuple[Plan, BudgetFit]:
    """``plan`` checked against ``options.budget`` before it runs
    (:func:`lemon.policy.estimates.fit_budget`): as it is, with its estimate, or replaced by
    the best fixed team within the budget (``fallback``; the trace says so); raises
    :class:`lemon.budget.BudgetRefused` when neither."""
    from lemon.policy.estimates import fit_budget
    from lemon.spec.roles import default_roles

    if options.budget is None:
        raise ValueError("within_budget needs options.budget")
    fit = fit_budget(
        plan.spec,
        output=plan.output,
        kind=plan.kind,
        task=plan.task,
        budget=options.budget,
        fallback=fallback,
        roles=roles or default_roles(),
        prices=prices,
        max_tokens=options.decoding.max_tokens,
    )
    if fit.origin is None:
        return plan, fit
    text = format_spec(fit.spec, output=fit.output)
    plan = replace(plan, spec=fit.spec, output=fit.output, text=text, origin=fit.origin)
    if trace is not None:
        trace.emit(SpecReady(origin=fit.origin))
    return plan, fit


@dataclass(frozen=True, slots=True)
class ItemSettings:
    """How a benchmark item's spec is run: every worker's budget and decoding, the deadline.

    The defaults are the ones the outcome tables, the search teacher, GRPO and the policy
    evaluations share (:data:`lemon.budget.WORKER_MAX_TOKENS` per agent, greedy)."""

    worker_max_tokens: int = WORKER_MAX_TOKENS
    deadline_s: float = 900.0
    temperature: float = 0.0
    seed: int | None = None
    """A sampled run's seed (``temperature > 0``): seeded samples are reproducible and cached."""

    def decoding(self) -> Decoding:
        return Decoding(
            max_tokens=self.worker_max_tokens, temperature=self.temperature, seed=self.seed
        )


def item_options(item: Item, settings: ItemSettings) -> ExecutionOptions:
    """The executor's options for ``item``: its prefills, the settings' decoding and deadline."""
    return ExecutionOptions(
        decoding=settings.decoding(), deadline_s=settings.deadline_s, prefill=item_prefills(item)
    )


async def run_item(
    item: Item,
    spec: Spec,
    *,
    backends: Mapping[Capacity, Backend],
    settings: ItemSettings = ItemSettings(),
    output: str | None = None,
    cache: CallCache | None = None,
    roles: RoleLibrary | None = None,
    trace: TraceWriter | None = None,
    spec_text: str | None = None,
    origin: str = "",
) -> RunResult:
    """Run ``spec`` on ``item``'s task (see :func:`item_options`); always returns a result."""
    return await execute(
        spec,
        task=task_text(item),
        backends=backends,
        output=output,
        roles=roles,
        options=item_options(item, settings),
        trace=trace,
        cache=cache,
        spec_text=spec_text,
        origin=origin,
    )


class AgentRun(BaseModel):
    """One agent of an executed spec, as the records of the run keep it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    tier: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    answered: bool = False
    """A worker model's answer was used: a model agent that succeeded (tools never are)."""
    key: str | None = None
    """The content key of the worker call that answered it, where a call cache or an outcome
    table keyed it (:attr:`lemon.engine.results.AgentResult.call_key`); None when not
    ``answered``."""
    output: str = ""
    finish: str = ""
    """Why the model stopped (``stop``, ``length``); empty for tools and unanswered agents."""

    @classmethod
    def of(cls, agent: AgentResult) -> AgentRun:
        answered = not agent.tool and agent.status is AgentStatus.SUCCEEDED
        return cls(
            name=agent.name,
            tier=agent.capacity,
            prompt_tokens=agent.prompt_tokens,
            completion_tokens=agent.completion_tokens,
            answered=answered,
            key=agent.call_key if answered else None,
            output=agent.output,
            finish=agent.finish_reason,
        )


class ItemOutcome(Outcome):
    """One executed spec on one benchmark item: the one record the outcome table's cell
    (:meth:`lemon.tables.store.Cell.of`), the evaluation's item record
    (:meth:`lemon.evals.loop.ItemRecord.of`) and the teachers' rows
    (:func:`lemon.teaching.rows.outcome_facts`) are projections of.

    One name per fact, here and in every projection's code: ``success`` (a fraction in [0, 1];
    the evaluation's file calls it ``correct``), ``worker_tokens`` (prompt and completion of every
    worker call; ``tokens`` in the evaluation's file), ``tokens_by_tier`` (the table's
    ``tokens``), ``priced_tokens`` (worker tokens at their tier's price, :mod:`lemon.pricing`; the
    table's ``priced``). The file formats keep their keys; only the code says one name.

    :class:`Outcome`'s fields are what R_orch reads (``agents`` and ``edges`` count the spec's
    structure); the rest say what ran: each agent with its tier, call key and tokens
    (``agent_runs``), the answer and how it was read, the run's status, error, failure kind and
    wall time, and the model calls it made."""

    answer: str | None = None
    """The run's answer (None when the run failed)."""
    extracted: float | str | None = None
    """The number or letter read from the answer; for HumanEval the sandbox run's status."""
    policy_tokens: int = 0
    """The policy's own prompt and completion tokens (0: no policy wrote the spec)."""
    agent_runs: tuple[AgentRun, ...] = ()
    """Every agent of the spec, in the spec's order."""
    status: RunStatus = RunStatus.SUCCEEDED
    error: str | None = None
    failure: FailureKind | None = None
    """Why the run failed (:class:`lemon.engine.results.FailureKind`; None when it succeeded)."""
    wall_s: float = 0.0
    calls: int = 0
    """Model calls made (reused answers, call-cache hits and tools make none)."""
    cache_hits: int = 0
    """Calls answered from the persistent call cache."""

    @property
    def tokens_by_tier(self) -> dict[str, int]:
        """Worker tokens per tier, tiers in the order their first agent spends
        (:meth:`lemon.engine.results.RunResult.tokens_by_tier`)."""
        out: dict[str, int] = {}
        for agent in self.agent_runs:
            spent = agent.prompt_tokens + agent.completion_tokens
            if spent:
                out[agent.tier] = out.get(agent.tier, 0) + spent
        return out


async def item_outcome(
    item: Item,
    result: RunResult,
    *,
    spec: Spec,
    prices: TierPrices = DEFAULT_TIER_PRICES,
    policy_tokens: int = 0,
    policy_price: float = 0.0,
) -> ItemOutcome:
    """Score ``result`` on ``item`` (one success rule: :func:`lemon.scoring.item_success`;
    HumanEval runs its tests in the sandbox, off the event loop) and price it: the workers'
    tokens at ``prices``, the policy's ``policy_tokens`` at ``policy_price`` each."""
    from lemon.scoring.scorer import score_item

    answer = result.answer if result.status is RunStatus.SUCCEEDED else None
    success = 0.0
    extracted_value: float | str | None = None
    if answer is not None:
        if isinstance(item, CodeItem):
            from lemon.scoring.code import score_code

            (run,) = await asyncio.to_thread(score_code, [item], [answer])
            success, extracted_value = float(run.passed), run.status.value
        else:
            score = score_item(item, answer)
            success, extracted_value = float(score.correct), score.extracted
    return ItemOutcome(
        valid=True,
        success=success,
        worker_tokens=result.tokens()["total"],
        priced_tokens=prices.priced(result.tokens_by_tier()),
        policy_priced_tokens=policy_tokens * policy_price,
        policy_tokens=policy_tokens,
        agents=len(spec.agents),
        edges=sum(len(a.depends_on) for a in spec.agents),
        answer=answer,
        extracted=extracted_value,
        agent_runs=tuple(AgentRun.of(agent) for agent in result.agents),
        status=result.status,
        error=result.error,
        failure=result.failure,
        wall_s=result.wall_s,
        calls=result.calls,
        cache_hits=result.cache_hits,
    )
