"""One task end to end: pick the spec, bring up the profile's backends, execute, clean up."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from lemon.backends.base import Backend
from lemon.engine.executor import CallCache, ExecutionOptions, execute
from lemon.engine.results import RunResult
from lemon.engine.trace import TraceWriter
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
) -> RunResult:
    """Run ``task`` with the given spec, or the template policy's when ``parsed`` is None."""
    from lemon.policy.template import template_spec

    output: str | None
    from lemon.policy.template import classify_task, prefills

    if parsed is not None:
        spec, output, origin = parsed.spec, parsed.output, parsed.source
    else:
        kind, spec, _ = template_spec(task, variant=template_variant)
        label = kind.value if template_variant == "default" else f"{kind.value}, {template_variant}"
        output, origin = spec.output, f"template policy ({label})"
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
    result.extra["spec_origin"] = origin
    return result
