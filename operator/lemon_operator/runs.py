"""Handlers for ``LemonRun``: resolve the spec and the tiers, hand the run to the orchestration
service, follow it to the end and record the answer.

Each run is one coroutine (:func:`drive_run`, a kopf daemon) on the operator's event loop, but
nothing executes there: the service runs the agents, the coroutine awaits its gRPC answers, and
the synchronous API-server calls run in a thread pool of their own. One slow task holds up no
other object's reconciliation.

Exactly once: the run id is the object's uid, known before the first call and the same after
any restart, and the service executes a run id once (a repeated ``SubmitRun`` answers the run
it has). ``phase: Running`` is written only after the service accepted the id. After an
operator restart a Running run is re-attached (``GetRun``); if the service no longer knows it
(the service restarted), the run fails with reason ``ServiceLostRun`` and is never submitted
again. A run not yet Running is submitted (again): harmless whether or not an earlier submit
reached the service. Deleting a run cancels it on the service (the deletion handler, behind the
operator's finalizer).

Pending, with the reason in ``status.message`` and the conditions: ``NoService``,
``SpecNotFound``, ``SpecInvalid`` (a referenced LemonSpec; an inline spec that is invalid fails
at once), ``PolicyNotFound``, ``PolicyNotReady``, ``ProfileNotFound``, ``ProfileInvalid``,
``TierNotInProfile``, ``TiersNotReady``, ``ServiceUnavailable``. Each is checked again every
second or so (backing off to ten), so the run starts as soon as what it waits for is there.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from lemon.resources import CapacityProfileSpec, TierStatus
from lemon.resources.lemon_run import (
    KSERVE_OPENAI_PATH,
    TERMINAL_PHASES,
    LemonRunSpec,
    needed_tiers,
    tier_endpoint,
)
from lemon.spec import Capacity, SpecError, parse_spec
from lemon_operator import kube, manifests, specs, statuses
from lemon_operator.orchestration import Lost, Orchestrator, Rejected, Unavailable
from lemon_operator.run_results import (
    PolicyTarget,
    RunOrder,
    ServiceRun,
    failure_of,
    finished_status,
    pending_status,
    refused_status,
    running_status,
    trace_text,
)

__all__ = ["delete_run", "drive_run", "plan_run"]

log = logging.getLogger(__name__)
POLL_S = 1.0
MAX_POLL_S = 10.0
WAIT_S = 30.0
"""How long one GetRun waits for the run to finish before asking again."""
_POOL = ThreadPoolExecutor(max_workers=32, thread_name_prefix="lemon-runs")
T = TypeVar("T")


async def _blocking(call: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """A synchronous API-server call, off the event loop."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_POOL, functools.partial(call, *args, **kwargs))


@dataclass(frozen=True, slots=True)
class Waiting:
    """Not startable yet; ``tiers_ready`` says what is known of the tiers."""

    reason: str
    message: str
    tiers_ready: bool | None = None


@dataclass(frozen=True, slots=True)
class Refused:
    """Never startable (an invalid inline spec)."""

    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Ready:
    order: RunOrder
    profile: str


def _origin(namespace: str, name: str, metadata: Mapping[str, Any]) -> str:
    annotations = metadata.get("annotations") or {}
    spec = (metadata.get("labels") or {}).get(manifests.SPEC_LABEL)
    generation = annotations.get(manifests.SPEC_GENERATION_ANNOTATION)
    if spec and generation:
        return f"LemonSpec {namespace}/{spec} (generation {generation}, its task)"
    return f"LemonRun {namespace}/{name} (inline spec)"


def _spec_errors(error: SpecError) -> str:
    return "; ".join(f"{issue.line}:{issue.column}: {issue.message}" for issue in error.issues)


def plan_run(client: kube.Client, *, body: Mapping[str, Any]) -> Ready | Waiting | Refused:
    """What to submit for the run, or why it cannot start (yet). Reads the referenced LemonSpec
    or LemonPolicy and the capacity profile; writes nothing."""
    metadata = body["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    try:
        run = LemonRunSpec.model_validate(body.get("spec") or {})
    except ValidationError as error:
        return Refused("Invalid", "; ".join(issue["msg"] for issue in error.errors()))
    profile = run.profile
    text = source = None
    policy = None
    needed: list[Capacity] | None = None
    if run.spec is not None:
        source = _origin(namespace, name, metadata)
        text = yaml.safe_dump(run.spec.model_dump(mode="json", exclude_none=True), sort_keys=False)
        try:
            needed = needed_tiers(parse_spec(text, source=source).spec)
        except SpecError as error:
            return Refused("SpecInvalid", f"the inline spec is invalid: {_spec_errors(error)}")
    elif run.spec_ref is not None:
        ref = run.spec_ref.name
        found = client.get(kube.SPECS, namespace=namespace, name=ref)
        if found is None or found["metadata"].get("deletionTimestamp"):
            return Waiting("SpecNotFound", f"no LemonSpec {ref} in {namespace}")
        generation = found["metadata"].get("generation", 1)
        source = f"LemonSpec {namespace}/{ref} (generation {generation})"
        text = specs.render_resource(name=ref, spec=found.get("spec") or {})
        try:
            needed = needed_tiers(parse_spec(text, source=source).spec)
        except SpecError as error:
            return Waiting("SpecInvalid", f"LemonSpec {ref} is invalid: {_spec_errors(error)}")
        profile = profile or (found.get("spec") or {}).get("profile")
    else:
        assert run.policy_ref is not None  # exactly one source: LemonRunSpec checked it
        ref = run.policy_ref.name
        found = client.get(kube.POLICIES, namespace=namespace, name=ref)
        if found is None or found["metadata"].get("deletionTimestamp"):
            return Waiting("PolicyNotFound", f"no LemonPolicy {ref} in {namespace}")
        served = found.get("status") or {}
        if not served.get("ready") or not served.get("url") or not served.get("servedVersion"):
            return Waiting("PolicyNotReady", f"LemonPolicy {ref} serves no ready version yet")
        policy = PolicyTarget(
            url=str(served["url"]).rstrip("/") + KSERVE_OPENAI_PATH,
            model=ref,  # the operator serves a policy under its own name (--model_name)
            name=f"LemonPolicy {namespace}/{ref}@{served['servedVersion']}",
        )
    profile = profile or specs.DEFAULT_PROFILE
    tiers = _tiers(client, namespace=namespace, profile=profile, needed=needed)
    if isinstance(tiers, Waiting):
        return tiers
    order = RunOrder(
        run_id=metadata["uid"],
        source=source or f"LemonRun {namespace}/{name}",
        task=run.task,
        tiers=tiers,
        spec=text,
        policy=policy,
        max_tokens=run.max_tokens or 0,
        deadline_s=float(run.deadline_seconds or 0),
    )
    return Ready(order, profile)


def _tiers(
    client: kube.Client, *, namespace: str, profile: str, needed: list[Capacity] | None
) -> list[tuple[str, str, str]] | Waiting:
    """(tier, URL, model) of each tier needed (all the profile's for a policy), from the
    profile's status, once every one of them is ready."""
    found = client.get(kube.PROFILES, namespace=namespace, name=profile)
    if found is None or found["metadata"].get("deletionTimestamp"):
        return Waiting("ProfileNotFound", f"no LemonCapacityProfile {profile}", False)
    try:
        available = CapacityProfileSpec.model_validate(found.get("spec") or {}).tiers()
    except ValidationError:
        return Waiting("ProfileInvalid", f"LemonCapacityProfile {profile} is invalid", False)
    wanted = needed if needed is not None else list(available)
    missing = [tier.value for tier in wanted if tier not in available]
    if missing:
        return Waiting(
            "TierNotInProfile", f"profile {profile} has no {', '.join(missing)} tier", False
        )
    reported: dict[Capacity, TierStatus] = {}
    for entry in (found.get("status") or {}).get("tiers") or []:
        try:
            seen = TierStatus.model_validate(entry)
        except ValidationError:
            continue
        reported[seen.tier] = seen
    endpoints: dict[Capacity, tuple[str, str]] = {}
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
    return [(tier.value, *endpoints[tier]) for tier in wanted]


def _record(client: kube.Client, body: Mapping[str, Any], fields: Mapping[str, Any]) -> None:
    """Patch the run's status with ``fields``, unless it already says exactly that."""
    current = body.get("status") or {}
    if all(current.get(key) == value for key, value in fields.items()):
        return
    metadata = body["metadata"]
    client.patch_status(
        kube.RUNS, namespace=metadata["namespace"], name=metadata["name"], status=fields
    )


async def drive_run(
    client: kube.Client, service: Orchestrator | None, *, namespace: str, name: str
) -> None:
    """The run's whole life: start it when it can start, follow it, record the end, and delete
    it ``ttlSecondsAfterFinished`` after that. Returns once nothing is left to do."""
    delay = POLL_S
    while True:
        body = await _blocking(client.get, kube.RUNS, namespace=namespace, name=name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return
        phase = (body.get("status") or {}).get("phase")
        if phase in TERMINAL_PHASES:
            await _expire(client, body)
            return
        if phase == "Running" and service is not None:
            await _follow(client, service, body)
            continue
        if await _start(client, service, body):
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, MAX_POLL_S)
        else:
            delay = POLL_S


async def _start(
    client: kube.Client, service: Orchestrator | None, body: Mapping[str, Any]
) -> bool:
    """Submit the run if it can start; True when it must wait and try again."""
    metadata = body["metadata"]
    generation = int(metadata.get("generation", 1))
    at = statuses.now()
    previous = body.get("status") or {}
    label = f"{metadata['namespace']}/{metadata['name']}"
    if service is None:
        fields = pending_status(
            reason="NoService",
            message="the operator has no orchestration service address (LEMON_SERVICE_TARGET)",
            tiers_ready=None,
            generation=generation,
            at=at,
            previous=previous,
        )
        await _blocking(_record, client, body, fields)
        return True
    plan = await _blocking(plan_run, client, body=body)
    if isinstance(plan, Refused):
        fields = refused_status(
            reason=plan.reason,
            message=plan.message,
            generation=generation,
            at=at,
            previous=previous,
        )
        await _blocking(_finish_record, client, body, fields, warning=True)
        return False
    if isinstance(plan, Waiting):
        fields = pending_status(
            reason=plan.reason,
            message=plan.message,
            tiers_ready=plan.tiers_ready,
            generation=generation,
            at=at,
            previous=previous,
        )
        await _blocking(_record, client, body, fields)
        return True
    try:
        run = await service.submit(plan.order)
    except Unavailable as error:
        fields = pending_status(
            reason="ServiceUnavailable",
            message=str(error),
            tiers_ready=True,
            generation=generation,
            at=at,
            previous=previous,
        )
        await _blocking(_record, client, body, fields)
        return True
    except (Rejected, Lost) as error:
        fields = refused_status(
            reason="Rejected", message=str(error), generation=generation, at=at, previous=previous
        )
        await _blocking(_finish_record, client, body, fields, warning=True)
        return False
    log.info(
        "%s: run %s %s on the service (%s)",
        label,
        run.run_id,
        "submitted" if run.created else "already known, re-attached",
        run.phase,
    )
    fields = running_status(
        run_id=run.run_id,
        profile=plan.profile,
        target=service.target,
        generation=generation,
        at=statuses.now(),
        previous=previous,
    )
    await _blocking(_record, client, body, fields)
    return False


async def _follow(client: kube.Client, service: Orchestrator, body: Mapping[str, Any]) -> None:
    """Wait for the service to finish the run; record the end (the trace ConfigMap first)."""
    metadata, status = body["metadata"], body.get("status") or {}
    run_id = str(status.get("runId") or metadata["uid"])
    generation = int(metadata.get("generation", 1))
    delay = POLL_S
    while True:
        try:
            run = await service.wait(run_id, wait_s=WAIT_S)
        except Lost:
            message = (
                f"the orchestration service at {service.target} has no run {run_id} (it "
                "restarted?); the run is not started again"
            )
            fields = refused_status(
                reason="ServiceLostRun",
                message=message,
                generation=generation,
                at=statuses.now(),
                previous=status,
            )
            await _blocking(_finish_record, client, body, fields, warning=True)
            return
        except (Unavailable, Rejected) as error:
            log.warning("%s/%s: %s", metadata["namespace"], metadata["name"], error)
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, MAX_POLL_S)
            continue
        if run.finished:
            break
    await _blocking(_finished, client, body, run)


def _finished(client: kube.Client, body: Mapping[str, Any], run: ServiceRun) -> None:
    metadata, status = body["metadata"], body.get("status") or {}
    namespace, name = metadata["namespace"], metadata["name"]
    config_map = manifests.build_trace_config_map(
        name, namespace=namespace, uid=metadata["uid"], text=trace_text(run.trace)
    )
    client.create_config_map(body=config_map)  # False: written before a restart; same run
    fields = finished_status(
        run,
        prices=_prices(client, namespace=namespace, profile=status.get("profile")),
        trace=config_map["metadata"]["name"],
        generation=int(metadata.get("generation", 1)),
        at=statuses.now(),
        previous=status,
    )
    _finish_record(client, body, fields, warning=failure_of(run) is not None)


def _prices(client: kube.Client, *, namespace: str, profile: str | None) -> dict[str, float]:
    """Each tier's cost per token in the run's profile (none: the profile is gone)."""
    found = client.get(kube.PROFILES, namespace=namespace, name=profile or specs.DEFAULT_PROFILE)
    try:
        tiers = CapacityProfileSpec.model_validate((found or {}).get("spec") or {}).tiers()
    except ValidationError:
        return {}
    return {tier.value: spec.cost_per_token for tier, spec in tiers.items()}


def _finish_record(
    client: kube.Client, body: Mapping[str, Any], fields: Mapping[str, Any], *, warning: bool
) -> None:
    """Record a finished run: status, an event, and the owning LemonSpec's view of it."""
    _record(client, body, fields)
    metadata = body["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    ref = kube.ObjectRef(kube.RUNS, namespace, name, metadata["uid"])
    message = str(fields.get("message") or "")
    reason = str(fields.get("phase") or "")
    client.emit_event(ref, reason=reason, message=message, warning=warning)
    log.info("%s/%s: %s: %s", namespace, name, reason, message)
    spec = (metadata.get("labels") or {}).get(manifests.SPEC_LABEL)
    if spec:
        specs.reconcile_spec(client, namespace=namespace, name=spec)


async def _expire(client: kube.Client, body: Mapping[str, Any]) -> None:
    """Delete a finished run ``ttlSecondsAfterFinished`` after it finished."""
    ttl = (body.get("spec") or {}).get("ttlSecondsAfterFinished")
    finished = (body.get("status") or {}).get("completionTime")
    if ttl is None or not finished:
        return
    end = dt.datetime.fromisoformat(str(finished).replace("Z", "+00:00"))
    left = (end - dt.datetime.now(dt.UTC)).total_seconds() + int(ttl)
    if left > 0:
        await asyncio.sleep(left)
    metadata = body["metadata"]
    await _blocking(
        client.delete, kube.RUNS, namespace=metadata["namespace"], name=metadata["name"]
    )
    log.info("%s/%s: deleted (ttlSecondsAfterFinished)", metadata["namespace"], metadata["name"])


async def delete_run(
    client: kube.Client,
    service: Orchestrator | None,
    *,
    namespace: str,
    name: str,
    uid: str,
    status: Mapping[str, Any],
) -> None:
    """A deleted run: cancel it on the service if it may be there and unfinished, and delete
    its trace (owner references do that too where a garbage collector runs)."""
    if service is not None and status.get("phase") not in TERMINAL_PHASES:
        try:
            run = await service.cancel(str(status.get("runId") or uid))
            log.info("%s/%s: cancelled run %s (%s)", namespace, name, run.run_id, run.phase)
        except Lost:
            pass  # never submitted, or the service forgot it: nothing runs
        except (Unavailable, Rejected) as error:
            log.warning("%s/%s: could not cancel: %s", namespace, name, error)
    await _blocking(
        client.delete_config_map,
        namespace=namespace,
        name=manifests.trace_config_map_name(name),
    )
