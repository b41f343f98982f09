"""One task end to end: pick the spec, bring up the profile's backends, execute, clean up."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from lemon.backends.base import Backend
from lemon.engine.executor import CallCache, ExecutionOptions, execute
from lemon.engine.results import RunResult
from lemon.engine.trace import TraceWriter
from lemon.policy.inference import SpecPolicy
from lemon.profiles import CapacityProfile, build_backends, close_backends
from lemon.spec.models import Capacity
from lemon.spec.roles import RoleLibrary
from lemon.spec.validation import ParsedSpec

__all__ = ["profile_note", "run_task"]


def profile_note(profile: CapacityProfile, backends: Mapping[Capacity, Backend]) -> str:
    labels = {tier.value: backend.label for tier, backend in backends.items()}
    if len(set(labels.values())) == 1:
        only = next(iter(labels.values()))
        return f"profile {profile.name}: all tiers (small, medium, large) run {only}"
    return f"profile {profile.name}: " + "; ".join(f"{t}: {label}" for t, label in labels.items())


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
    template_variant: str = "default",
    policy: SpecPolicy | None = None,
) -> RunResult:
    """Run ``task`` with the given spec, or the one ``policy`` writes (the template policy's
    when ``policy`` is None)."""
    from lemon.policy.inference import TemplatePolicy
    from lemon.policy.template import classify_task, prefills

    output: str | None
    decision = None
    if parsed is not None:
        spec, output, origin = parsed.spec, parsed.output, parsed.source
    else:
        writer = policy if policy is not None else TemplatePolicy(template_variant)
        decision = await writer.write_spec(task, roles=roles, trace=trace)
        spec, output, origin = decision.spec, decision.output, decision.origin
    options = options or ExecutionOptions()
    if options.prefill is None:
        options = replace(options, prefill=prefills(classify_task(task)))
    if trace is not None:
        trace.emit("spec_ready", origin=origin)
    owned = backends is None
    backends = backends or build_backends(profile)
    try:
        result = await execute(
            spec,
            task=task,
            backends=backends,
            output=output,
            roles=roles,
            options=options,
            trace=trace,
            cache=cache,
            profile=profile.name,
            profile_note=profile_note(profile, backends),
        )
    finally:
        if owned:
            await close_backends(backends)
    from lemon.pricing import resolve_prices

    prices = resolve_prices(profile=profile)
    result.extra["priced_tokens"] = round(prices.priced(result.tokens_by_tier()), 3)
    result.extra["tier_prices"] = prices.to_json()
    result.extra["spec_origin"] = origin
    if decision is not None and decision.attempts:
        result.extra["policy"] = decision.to_json()
    return result
