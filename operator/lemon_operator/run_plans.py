"""What a ``LemonRun`` asks the service to run, or why it cannot start yet (pure: the objects it
reads are handed in).

The spec comes from the run (inline), a LemonSpec (``specRef``) or a LemonPolicy's served
version (``policyRef``); a run that gives only its task gets the namespace's default
LemonPolicy (``spec.default: true``), else none: the service's default policy writes it (its
own, else LEMON's built-in default; the one resolution order of :mod:`lemon.policy.defaults`).
A policy's built-in version (``lemon://<name>``) is run by the service itself. The tiers
from the capacity profile's status (the run's ``profile``,
else the referenced LemonSpec's, else ``default``), each at KServe's OpenAI path. A run whose
inputs are missing or not ready waits (:class:`Waiting`, a Pending reason); one that cannot run
as it is (an invalid inline spec; a spec on a tier its profile does not serve) is
:class:`Refused`. A tier the profile does not serve is never waited for and never borrowed:
for a given spec the run fails at once (``TierNotInProfile``); for a policy, which may write any
team, the service fails the agents on such a tier (failure kind ``tier_unavailable``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from lemon.pricing import TierPrices
from lemon.resources import CapacityProfileSpec, TierStatus
from lemon.resources.lemon_budget import LemonBudgetSpec, shared_budget_name
from lemon.resources.lemon_policy import PolicySpec
from lemon.resources.lemon_run import (
    KSERVE_OPENAI_PATH,
    LemonRunSpec,
    TierEndpoint,
    needed_tiers,
    tier_endpoint,
)
from lemon.spec import Capacity, SpecError, parse_spec
from lemon_operator import locking, manifests, specs
from lemon_operator.run_results import NamespaceLimits, PolicyTarget, RunOrder

__all__ = [
    "Ready",
    "Refused",
    "Waiting",
    "default_policy",
    "namespace_budget",
    "plan_run",
    "profile_tiers",
    "referenced",
    "task_only",
]

Body = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Waiting:
    """Not startable yet; ``tiers_ready`` says what is known of the tiers."""

    reason: str
    message: str
    tiers_ready: bool | None = None


@dataclass(frozen=True, slots=True)
class Refused:
    """Never startable (an invalid inline spec, a tier the profile does not serve)."""

    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Ready:
    order: RunOrder
    profile: str
    prices: TierPrices = field(default_factory=lambda: TierPrices.as_given({}))
    """The profile's prices, relative to its medium tier's (tier-priced tokens)."""


def referenced(body: Body) -> tuple[Literal["LemonSpec", "LemonPolicy"], str] | None:
    """The object the run's spec comes from (kind, name), or None for an inline spec."""
    spec = body.get("spec") or {}
    for key, kind in (("specRef", "LemonSpec"), ("policyRef", "LemonPolicy")):
        ref = spec.get(key)
        if isinstance(ref, dict) and ref.get("name"):
            return kind, str(ref["name"])  # type: ignore[return-value]  # one of the two kinds
    return None


def task_only(body: Body) -> bool:
    """Whether the run gives only its task (no specRef, spec or policyRef)."""
    spec = body.get("spec") or {}
    return not any(spec.get(key) for key in ("specRef", "spec", "policyRef"))


def default_policy(policies: list[Body]) -> Body | Waiting | None:
    """The namespace's default LemonPolicy among ``policies`` (those with ``spec.default``),
    None when there is none; two or more wait (``DefaultPolicyAmbiguous``)."""
    found = sorted(
        (p for p in policies if locking.live(p) and (p.get("spec") or {}).get("default")),
        key=lambda p: str(p["metadata"]["name"]),
    )
    if len(found) > 1:
        names = ", ".join(str(p["metadata"]["name"]) for p in found)
        return Waiting(
            "DefaultPolicyAmbiguous",
            f"LemonPolicies {names} all say default: true; a namespace has at most one",
        )
    return found[0] if found else None


def namespace_budget(budgets: list[Body]) -> NamespaceLimits | Waiting | None:
    """The namespace's LemonBudget among ``budgets`` as the service is told it, None when
    there is none; two or more, or an invalid one, wait (``NamespaceBudgetAmbiguous``,
    ``NamespaceBudgetInvalid``): a run never goes unbudgeted where a budget was meant."""
    found = sorted(
        (b for b in budgets if locking.live(b)), key=lambda b: str(b["metadata"]["name"])
    )
    if len(found) > 1:
        names = ", ".join(str(b["metadata"]["name"]) for b in found)
        return Waiting(
            "NamespaceBudgetAmbiguous",
            f"LemonBudgets {names}: a namespace has at most one; its runs wait",
        )
    if not found:
        return None
    metadata = found[0]["metadata"]
    try:
        spec = LemonBudgetSpec.model_validate(found[0].get("spec") or {})
    except ValidationError as error:
        return Waiting(
            "NamespaceBudgetInvalid",
            f"LemonBudget {metadata['name']} is invalid: {located(error, prefix='spec')}",
        )
    return NamespaceLimits(
        name=shared_budget_name(str(metadata["namespace"]), str(metadata["name"])),
        tokens=spec.tokens,
        cost=spec.cost,
        window_s=float(spec.window_seconds),
    )


def located(error: ValidationError, *, prefix: str) -> str:
    """A model's errors, each at its field: ``spec.budget.tokens: Input should be ...``."""
    return "; ".join(
        f"{'.'.join([prefix, *(str(part) for part in issue['loc'])])}: {issue['msg']}"
        for issue in error.errors()
    )


def _errors(error: SpecError) -> str:
    return "; ".join(f"{issue.line}:{issue.column}: {issue.message}" for issue in error.issues)


def _origin(namespace: str, name: str, metadata: Body) -> str:
    spec = (metadata.get("labels") or {}).get(manifests.SPEC_LABEL)
    generation = (metadata.get("annotations") or {}).get(manifests.SPEC_GENERATION_ANNOTATION)
    if spec and generation:
        return f"LemonSpec {namespace}/{spec} (generation {generation}, its task)"
    return f"LemonRun {namespace}/{name} (inline spec)"


@dataclass(frozen=True, slots=True)
class _Source:
    """Where a run's spec comes from: its origin in words, its text (None: a policy writes
    it), the policy, the tiers it needs (None: any of the profile's) and the profile it names."""

    origin: str
    text: str | None = None
    policy: PolicyTarget | None = None
    needed: list[Capacity] | None = None
    profile: str | None = None


def plan_run(
    body: Body,
    *,
    source: Body | None,
    profile_of: Callable[[str], Body | None],
    default: Body | None = None,
    shared: NamespaceLimits | None = None,
) -> Ready | Waiting | Refused:
    """The run's order for the service. ``source`` is the object :func:`referenced` names (None
    when it does not exist or the spec is inline); ``default`` the namespace's default
    LemonPolicy (:func:`default_policy`; read for a task-only run); ``profile_of`` finds a
    capacity profile; ``shared`` is the namespace's LemonBudget (:func:`namespace_budget`)."""
    metadata = body["metadata"]
    try:
        run = LemonRunSpec.model_validate(body.get("spec") or {})
    except ValidationError as error:
        return Refused("Invalid", located(error, prefix="spec"))
    spec = _spec_source(run, metadata=metadata, source=source, default=default)
    if not isinstance(spec, _Source):
        return spec
    profile = run.profile or spec.profile or specs.DEFAULT_PROFILE
    tiers = profile_tiers(profile_of(profile), profile=profile, needed=spec.needed)
    if not isinstance(tiers, tuple):
        return tiers
    endpoints, prices = tiers
    order = RunOrder(
        run_id=metadata["uid"],
        source=spec.origin,
        task=run.task,
        tiers=endpoints,
        spec=spec.text,
        policy=spec.policy,
        max_tokens=run.max_tokens or 0,
        deadline_s=float(run.deadline_seconds or 0),
        budget=run.budget,
        namespace_budget=shared,
    )
    return Ready(order, profile, prices)


def _spec_source(
    run: LemonRunSpec, *, metadata: Body, source: Body | None, default: Body | None = None
) -> _Source | Waiting | Refused:
    namespace, name = metadata["namespace"], metadata["name"]
    if run.spec is None and run.spec_ref is None and run.policy_ref is None:
        if default is None:  # the service's default policy writes it
            return _Source(f"LemonRun {namespace}/{name} (task only)")
        return _policy_source(default, namespace=namespace, is_default=True)
    if run.spec is not None:
        origin = _origin(namespace, name, metadata)
        # JSON is YAML, and much quicker to write; positions in it mean nothing to the user,
        # so the errors are given without them
        text = json.dumps(run.spec.model_dump(mode="json", exclude_none=True))
        try:
            needed = needed_tiers(parse_spec(text, source=origin).spec)
        except SpecError as error:
            messages = "; ".join(issue.message for issue in error.issues)
            return Refused("SpecInvalid", f"the inline spec is invalid: {messages}")
        return _Source(origin, text, needed=needed)
    if run.spec_ref is not None:
        ref = run.spec_ref.name
        if not locking.live(source):
            return Waiting("SpecNotFound", f"no LemonSpec {ref} in {namespace}")
        generation = source["metadata"].get("generation", 1)
        origin = f"LemonSpec {namespace}/{ref} (generation {generation})"
        text = specs.render_resource(name=ref, spec=source.get("spec") or {})
        try:
            needed = needed_tiers(parse_spec(text, source=origin).spec)
        except SpecError as error:
            return Waiting("SpecInvalid", f"LemonSpec {ref} is invalid: {_errors(error)}")
        return _Source(
            origin, text, needed=needed, profile=(source.get("spec") or {}).get("profile")
        )
    assert run.policy_ref is not None  # at most one source: LemonRunSpec checked it
    ref = run.policy_ref.name
    if not locking.live(source):
        return Waiting(
            "PolicyNotFound",
            f"policyRef names LemonPolicy {ref}, and {namespace} has none; the run waits for it",
        )
    return _policy_source(source, namespace=namespace, is_default=False)


def _policy_source(found: Body, *, namespace: str, is_default: bool) -> _Source | Waiting:
    """A LemonPolicy's served version as the run's policy: its endpoint, or the built-in
    policy its version names (which the service runs: ready at once)."""
    ref = str(found["metadata"]["name"])
    served = found.get("status") or {}
    version = served.get("servedVersion")
    builtin = _builtin(found, version)
    what = "the namespace's default LemonPolicy" if is_default else "LemonPolicy"
    if not served.get("ready") or not version or (builtin is None and not served.get("url")):
        return Waiting("PolicyNotReady", f"{what} {ref} serves no ready version yet")
    origin = f"LemonPolicy {namespace}/{ref}@{version}"
    if is_default:
        origin = f"default {origin}"
    if builtin is not None:
        policy = PolicyTarget(url="", model="", name=origin, builtin=builtin, default=is_default)
        return _Source(origin, policy=policy)
    policy = PolicyTarget(
        url=str(served["url"]).rstrip("/") + KSERVE_OPENAI_PATH,
        model=ref,  # the operator serves a policy under its own name (--model_name)
        name=origin,
        default=is_default,
    )
    return _Source(origin, policy=policy)


def _builtin(found: Body, version: object) -> str | None:
    """The built-in policy the served version names (``lemon://<name>``), else None."""
    try:
        spec = PolicySpec.model_validate(found.get("spec") or {})
    except ValidationError:
        return None
    entry = spec.version(str(version)) if version else None
    return entry.builtin if entry is not None else None


def profile_tiers(
    found: Body | None, *, profile: str, needed: list[Capacity] | None
) -> tuple[tuple[TierEndpoint, ...], TierPrices] | Waiting | Refused:
    """The endpoint of each tier needed (all the profile's for a policy, which may write any
    team), from the profile's status once every one is ready; and the profile's prices. A
    needed tier the profile does not have refuses the run (it is not waited for)."""
    if not locking.live(found):
        return Waiting("ProfileNotFound", f"no LemonCapacityProfile {profile}", False)
    try:
        profile_spec = CapacityProfileSpec.model_validate(found.get("spec") or {})
    except ValidationError:
        return Waiting("ProfileInvalid", f"LemonCapacityProfile {profile} is invalid", False)
    available = profile_spec.tiers()
    wanted = needed if needed is not None else list(available)
    missing = [tier.value for tier in wanted if tier not in available]
    if missing:
        return Refused(
            "TierNotInProfile",
            f"profile {profile} has no {', '.join(missing)} tier (the spec's agents need it)",
        )
    reported: dict[Capacity, TierStatus] = {}
    for entry in (found.get("status") or {}).get("tiers") or []:
        try:
            seen = TierStatus.model_validate(entry)
        except ValidationError:
            continue
        reported[seen.tier] = seen
    endpoints: dict[Capacity, TierEndpoint] = {}
    for tier in wanted:
        status = reported.get(tier)
        endpoint = tier_endpoint(status) if status is not None and status.ready else None
        if endpoint is not None:
            endpoints[tier] = endpoint
    waiting = [tier.value for tier in wanted if tier not in endpoints]
    if waiting:
        return Waiting(
            "TiersNotReady", f"waiting for {', '.join(waiting)} of profile {profile}", False
        )
    return tuple(endpoints[tier] for tier in wanted), profile_spec.tier_prices()
