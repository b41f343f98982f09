"""Handlers for ``LemonSpec``: validate, compile the DAG into status, bring up the tiers.

Conditions: ``Validated`` (the core's located errors as ``LINE:COL: message``), ``TiersReady``
(the profile's InferenceServices for the tiers the agents use exist and report Ready) and
``Ready`` (both). A reconcile computes the whole status from the object and the cluster, so it is
idempotent and can be run again at any time: on create, update, resume after a restart, and
whenever an InferenceService of the spec's profile changes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import yaml

from lemon.resources import API_VERSION, CapacityProfileSpec, Condition, LemonSpecStatus, TierStatus
from lemon.resources.lemon_run import RunTokens
from lemon.resources.status import SpecRunStatus
from lemon.spec import Capacity, SpecError, compile_spec, parse_spec
from lemon.spec.models import Agent, LemonSpecBody
from lemon_operator import capacity_profiles, kube, locking, manifests, reconciling, statuses
from lemon_operator.reconciling import Observed

__all__ = ["DEFAULT_PROFILE", "reconcile_spec", "reconcile_specs_of_profile", "render_resource"]

log = logging.getLogger(__name__)
DEFAULT_PROFILE = "default"
_AGENT_ORDER = list(Agent.model_fields)


def _ordered(data: Mapping[str, Any], order: list[str]) -> dict[str, Any]:
    first = {key: data[key] for key in order if key in data}
    return {**first, **{key: value for key, value in data.items() if key not in first}}


def render_resource(*, name: str, spec: Mapping[str, Any]) -> str:
    """The resource in the canonical field order (that of ``lemon fmt``); validation positions
    refer to this text, which matches a manifest written in that layout."""
    body = _ordered(spec, ["profile", "task", "agents", "output"])
    agents = body.get("agents")
    if isinstance(agents, list):
        body["agents"] = [
            _ordered(agent, _AGENT_ORDER) if isinstance(agent, dict) else agent for agent in agents
        ]
    document = {
        "apiVersion": API_VERSION,
        "kind": "LemonSpec",
        "metadata": {"name": name},
        "spec": body,
    }
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False, width=1 << 30)


def reconcile_spec(client: kube.Client, *, namespace: str, name: str) -> None:
    """Compute and record the spec's whole status (one status patch, none if unchanged).

    The object is read afresh under a per-object lock, so concurrent triggers (its own events and
    its profile's readiness changes) never record a stale view over a fresher one.
    """
    reconciling.reconcile(client, kube.SPECS, namespace=namespace, name=name, handler=_reconcile)


def _reconcile(client: kube.Client, spec: Observed) -> None:
    made = spec.conditions
    text = render_resource(name=spec.name, spec=spec.spec)
    try:
        parsed = parse_spec(text, source=spec.label)
    except SpecError as error:
        errors = [f"{issue.line}:{issue.column}: {issue.message}" for issue in error.issues]
        conditions = [
            made.false("Validated", reason="Invalid", message="\n".join(errors)),
            made.unknown("TiersReady", reason="NotValidated", message="the spec is invalid"),
            made.false("Ready", reason="Invalid", message="the spec is invalid"),
        ]
        new = LemonSpecStatus(observed_generation=spec.generation, errors=errors)
        _record(client, spec, new=new, conditions=conditions)
        return
    body = parsed.spec
    assert isinstance(body, LemonSpecBody)
    dag = compile_spec(body, output=parsed.output)
    validated = made.true(
        "Validated",
        reason="Valid",
        message=f"{len(body.agents)} agents in {len(dag.levels)} levels; output {dag.output}",
    )
    profile = body.profile or DEFAULT_PROFILE
    needed = sorted({agent.capacity for agent in body.agents}, key=list(Capacity).index)
    tiers, tiers_ready = _tiers(client, spec, profile=profile, needed=needed)
    ok = tiers_ready.status == "True"
    ready = made.of(
        "Ready",
        ok,
        reason="Ready" if ok else tiers_ready.reason,
        message="validated and every tier is ready" if ok else tiers_ready.message,
    )
    run = None
    if body.task or spec.status.get("run"):
        run = _task_run(client, spec, profile=profile)
    new = LemonSpecStatus(
        observed_generation=spec.generation,
        output=dag.output,
        order=list(dag.order),
        levels=[list(level) for level in dag.levels],
        tiers=tiers or None,
        run=run,
    )
    _record(client, spec, new=new, conditions=[validated, tiers_ready, ready])


def _tiers(
    client: kube.Client, spec: Observed, *, profile: str, needed: list[Capacity]
) -> tuple[list[TierStatus], Condition]:
    def tiers_condition(ok: bool, reason: str, message: str) -> Condition:
        return spec.conditions.of("TiersReady", ok, reason=reason, message=message)

    namespace = spec.namespace
    found = client.get(kube.PROFILES, namespace=namespace, name=profile)
    if found is None or not locking.live(found):
        return [], tiers_condition(False, "ProfileNotFound", f"no LemonCapacityProfile {profile}")
    try:
        profile_spec = CapacityProfileSpec.model_validate(found.get("spec") or {})
    except ValueError:
        return [], tiers_condition(False, "ProfileInvalid", f"profile {profile} is invalid")
    available = profile_spec.tiers()
    missing = [tier.value for tier in needed if tier not in available]
    if missing:
        return [], tiers_condition(
            False, "TierNotInProfile", f"profile {profile} has no {', '.join(missing)} tier"
        )
    owned = capacity_profiles.owned_inference_services(client, namespace=namespace, name=profile)
    for tier in needed:  # make sure they exist; the profile's reconcile keeps them up to date
        if tier.value not in owned:
            capacity_profiles.create_tier(
                client,
                namespace=namespace,
                profile=profile,
                uid=found["metadata"]["uid"],
                tier=tier,
                spec=available[tier],
            )
    tiers = [
        statuses.tier_status(
            tier, name=manifests.inference_service_name(profile, tier), isvc=owned.get(tier.value)
        )
        for tier in needed
    ]
    waiting = [tier.tier.value for tier in tiers if not tier.ready]
    if waiting:
        return tiers, tiers_condition(False, "TiersNotReady", f"waiting for {', '.join(waiting)}")
    return tiers, tiers_condition(True, "TiersReady", "every tier the agents use is ready")


def _task_run(client: kube.Client, spec: Observed, *, profile: str) -> SpecRunStatus | None:
    """The LemonRun of the spec's task for this generation, created if missing; runs of
    earlier generations (or of a task since removed) are deleted."""
    namespace, name, uid = spec.namespace, spec.name, spec.uid
    task = spec.spec.get("task")
    wanted = manifests.spec_run_name(name, spec.generation) if task else None
    labels = f"{manifests.SPEC_LABEL}={name}"
    current = None
    for item in client.list(kube.RUNS, namespace=namespace, labels=labels):
        if not _owned_by(item, uid):
            continue
        if item["metadata"]["name"] == wanted:
            current = item
        else:
            client.delete(kube.RUNS, namespace=namespace, name=item["metadata"]["name"])
    if wanted is None or not isinstance(task, str):
        return None
    if current is None:
        manifest = manifests.build_spec_run(
            name,
            namespace=namespace,
            uid=uid,
            generation=spec.generation,
            task=task,
            body=spec.spec,
            profile=profile,
        )
        if client.create(kube.RUNS, body=manifest):
            log.info("%s: created LemonRun %s for its task", spec.label, wanted)
        current = client.get(kube.RUNS, namespace=namespace, name=wanted)
        if not _owned_by(current, uid):
            log.warning("%s: LemonRun %s exists and is not this spec's", spec.label, wanted)
            return SpecRunStatus(name=wanted, phase="NameTaken")
    status = (current or {}).get("status") or {}
    counted = status.get("tokens")
    tokens = RunTokens.model_validate(counted).total if counted else None
    return SpecRunStatus(
        name=wanted, phase=status.get("phase"), answer=status.get("answer"), tokens=tokens
    )


def _owned_by(body: Mapping[str, Any] | None, uid: str) -> bool:
    refs = ((body or {}).get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("uid") == uid for ref in refs)


def _stored(value: Any) -> Any:
    """What the API server keeps of a merge-patched value (an object's None fields removed)."""
    if isinstance(value, dict):
        return {key: item for key, item in value.items() if item is not None}
    return value


def _record(
    client: kube.Client, spec: Observed, *, new: LemonSpecStatus, conditions: list[Condition]
) -> None:
    ref, status = spec.ref, spec.status
    body = new.model_dump(by_alias=True, mode="json", exclude_none=True)
    body["conditions"] = statuses.merge_conditions(status.get("conditions") or [], conditions)
    for key in ("output", "order", "levels", "errors", "tiers", "run"):
        body.setdefault(key, None)  # clear what an earlier reconcile wrote
    if new.run is not None:  # every field, None too: the merge patch clears an earlier run's
        body["run"] = new.run.model_dump(by_alias=True, mode="json")
    if all(status.get(key) == _stored(value) for key, value in body.items()):
        return
    client.patch_status(kube.SPECS, namespace=ref.namespace, name=ref.name, status=body)
    _announce(client, ref, before=status.get("conditions") or [], after=body["conditions"])


def _announce(
    client: kube.Client,
    ref: kube.ObjectRef,
    *,
    before: list[Mapping[str, Any]],
    after: list[dict[str, Any]],
) -> None:
    """One event per condition of note whose status changed."""
    for entry in after:
        if entry["type"] == "TiersReady":
            continue
        old = statuses.find_condition(before, entry["type"])
        if old is not None and old.get("status") == entry["status"]:
            continue
        if entry["type"] == "Validated" and entry["status"] == "False":
            client.emit_event(ref, reason="Invalid", message=entry["message"], warning=True)
        elif entry["status"] == "True":
            client.emit_event(ref, reason=entry["type"], message=entry["message"])
        log.info(
            "%s/%s: %s=%s (%s)",
            ref.namespace,
            ref.name,
            entry["type"],
            entry["status"],
            entry["reason"],
        )


def reconcile_specs_of_profile(
    client: kube.Client, *, namespace: str, profile: str, changed: TierStatus | None = None
) -> None:
    """Reconcile the specs in ``namespace`` that run on ``profile``; with ``changed`` (one
    InferenceService's new state), only those whose recorded view of that tier differs."""
    for item in client.list(kube.SPECS, namespace=namespace):
        if ((item.get("spec") or {}).get("profile") or DEFAULT_PROFILE) != profile:
            continue
        if changed is not None and not _affected(item, changed):
            continue
        reconcile_spec(client, namespace=namespace, name=item["metadata"]["name"])


def _affected(item: Mapping[str, Any], changed: TierStatus) -> bool:
    agents = (item.get("spec") or {}).get("agents") or []
    if not any(isinstance(a, dict) and a.get("capacity") == changed.tier for a in agents):
        return False
    recorded = {entry.get("tier"): entry for entry in (item.get("status") or {}).get("tiers") or []}
    before = recorded.get(changed.tier.value)
    return before is None or (before.get("ready"), before.get("url")) != (
        changed.ready,
        changed.url,
    )
