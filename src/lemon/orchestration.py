"""One task end to end: decide what runs (once), bring up the profile's backends, execute, clean
up, and say where everything came from.

:func:`plan_task` classifies the task once and carries that :class:`~lemon.tasks.TaskKind` in
the :class:`Plan`: the policy writes its spec for that kind, the executor's prefills follow
from it, and the spec's canonical text is formatted once. :func:`run_task` runs a plan on a
capacity profile and returns a :class:`TaskRun`: the engine's result with the spec's origin,
the policy's decision, the profile (with a note saying in words what each tier runs) and the
run's tier-priced cost (:mod:`lemon.pricing`: the profile's prices, else the defaults).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from lemon.backends.base import Backend
from lemon.capacity import CapacityProfile, build_backends, close_backends
from lemon.engine.executor import CallCache, ExecutionOptions, execute
from lemon.engine.results import RunResult
from lemon.events import SpecReady, TraceWriter
from lemon.policy.inference import PolicyDecision, SpecPolicy, TemplatePolicy
from lemon.policy.template import TemplateVariant
from lemon.pricing import DEFAULT_TIER_PRICES, TierPrices, resolve_prices
from lemon.spec.formatting import format_spec
from lemon.spec.models import Capacity, Spec
from lemon.spec.roles import RoleLibrary
from lemon.spec.validation import ParsedSpec
from lemon.tasks import TaskKind, classify_task, prefills

__all__ = ["Plan", "TaskRun", "plan_task", "profile_note", "run_task"]


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


@dataclass(slots=True)
class TaskRun(RunResult):
    """The engine's result for a task, with where its spec came from and what it ran on."""

    spec_origin: str = ""
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
            "priced_tokens": round(self.priced_tokens, 3),
            "tier_prices": self.tier_prices.to_json(),
        }
        if self.policy is not None and self.policy.attempts:
            data["policy"] = self.policy.to_json()
        return data


def profile_note(profile: CapacityProfile, backends: Mapping[Capacity, Backend]) -> str:
    labels = {tier.value: backend.label for tier, backend in backends.items()}
    if len(set(labels.values())) == 1:
        only = next(iter(labels.values()))
        return f"profile {profile.name}: all tiers (small, medium, large) run {only}"
    return f"profile {profile.name}: " + "; ".join(f"{t}: {label}" for t, label in labels.items())


async def plan_task(
    task: str,
    *,
    parsed: ParsedSpec | None = None,
    policy: SpecPolicy | None = None,
    template_variant: TemplateVariant = TemplateVariant.DEFAULT,
    roles: RoleLibrary | None = None,
    trace: TraceWriter | None = None,
) -> Plan:
    """The plan for ``task``: the given spec, or the one ``policy`` writes (the template
    policy's when ``policy`` is None)."""
    kind = classify_task(task)
    if parsed is not None:
        text = format_spec(parsed.spec, output=parsed.output)
        plan = Plan(task, kind, parsed.spec, parsed.output, text, parsed.source)
    else:
        writer = policy if policy is not None else TemplatePolicy(template_variant)
        decision = await writer.write_spec(task, kind=kind, roles=roles, trace=trace)
        plan = Plan(
            task, kind, decision.spec, decision.output, decision.text, decision.origin, decision
        )
    if trace is not None:
        trace.emit(SpecReady(origin=plan.origin))
    return plan


async def run_task(
    task: str,
    *,
    profile: CapacityProfile,
    parsed: ParsedSpec | None = None,
    roles: RoleLibrary | None = None,
    options: ExecutionOptions | None = None,
    trace: TraceWriter | None = None,
    cache: CallCache | None = None,
    backends: Mapping[Capacity, Backend] | None = None,
    template_variant: TemplateVariant = TemplateVariant.DEFAULT,
    policy: SpecPolicy | None = None,
) -> TaskRun:
    """Run ``task`` with the given spec, or the one ``policy`` writes (the template policy's
    when ``policy`` is None), on ``backends`` (built from ``profile`` and closed afterwards
    when not given)."""
    plan = await plan_task(
        task,
        parsed=parsed,
        policy=policy,
        template_variant=template_variant,
        roles=roles,
        trace=trace,
    )
    options = options or ExecutionOptions()
    if options.prefill is None:
        options = replace(options, prefill=prefills(plan.kind))
    owned = backends is None
    backends = backends or build_backends(profile)
    try:
        note = profile_note(profile, backends)
        result = await execute(
            plan.spec,
            task=task,
            backends=backends,
            output=plan.output,
            roles=roles,
            options=options,
            trace=trace,
            cache=cache,
            profile=profile.name,
            spec_text=plan.text,
            origin=plan.origin,
        )
    finally:
        if owned:
            await close_backends(backends)
    engine = {f.name: getattr(result, f.name) for f in fields(RunResult)}
    return TaskRun(
        **engine,
        spec_origin=plan.origin,
        policy=plan.decision,
        profile=profile.name,
        profile_note=note,
        tier_prices=resolve_prices(profile=profile),
    )
