"""Handlers for ``LemonCapacityProfile``: one InferenceService per tier, readiness in status.

A reconcile reads the profile afresh under its lock (:func:`lemon_operator.reconciling.
reconcile`), converges each tier's InferenceService to its manifest (one server-side apply
where it differs), deletes those of tiers the profile no longer has, and records each tier's
URL and readiness.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from lemon.resources import CapacityProfileSpec, CapacityProfileStatus, TierSpec, TierStatus
from lemon.spec import Capacity
from lemon_operator import kube, locking, manifests, reconciling, statuses
from lemon_operator.reconciling import Converged, Observed

__all__ = [
    "create_tier",
    "delete_profile",
    "owned_inference_services",
    "reconcile_profile",
    "refresh_profile",
    "refresh_profile_status",
    "tier_statuses",
]

log = logging.getLogger(__name__)


def create_tier(
    client: kube.Client, *, namespace: str, profile: str, uid: str, tier: Capacity, spec: TierSpec
) -> Converged:
    """Bring up the InferenceService serving ``tier`` of ``profile`` (a spec needs it and the
    profile's own reconcile has not made it yet)."""
    manifest = manifests.build_inference_service(
        profile, namespace=namespace, uid=uid, tier=tier, spec=spec
    )
    return reconciling.converge(client, kube.ISVC, manifest=manifest, current=None)


def reconcile_profile(client: kube.Client, *, namespace: str, name: str) -> None:
    """Make the profile's InferenceServices match its tiers, then record their readiness."""
    reconciling.reconcile(client, kube.PROFILES, namespace=namespace, name=name, handler=_reconcile)


def _reconcile(client: kube.Client, profile: Observed) -> None:
    try:
        tiers = CapacityProfileSpec.model_validate(profile.spec).tiers()
    except ValidationError as error:
        message = statuses.validation_message(error)
        invalid = profile.conditions.false("Ready", reason="Invalid", message=message)
        previous = profile.status.get("conditions") or []
        body = {
            "observedGeneration": profile.generation,
            "conditions": statuses.merge_conditions(previous, [invalid]),
        }
        client.patch_status(kube.PROFILES, namespace=profile.namespace, name=profile.name,
                            status=body)  # fmt: skip
        client.emit_event(profile.ref, reason="Invalid", message=message, warning=True)
        return
    existing = {
        item["metadata"]["name"]: item
        for item in client.list(
            kube.ISVC, namespace=profile.namespace, labels=manifests.owned_selector(profile.name)
        )
    }
    wanted = set()
    for tier, spec in tiers.items():
        manifest = manifests.build_inference_service(
            profile.name, namespace=profile.namespace, uid=profile.uid, tier=tier, spec=spec
        )
        isvc = manifest["metadata"]["name"]
        wanted.add(isvc)
        done = reconciling.converge(
            client, kube.ISVC, manifest=manifest, current=existing.get(isvc)
        )
        if done is not Converged.UNCHANGED:
            log.info("%s: %s InferenceService %s", profile.label, done.value, isvc)
        if done is Converged.CREATED:
            client.emit_event(profile.ref, reason="Created", message=f"InferenceService {isvc}")
    for isvc in existing.keys() - wanted:
        client.delete(kube.ISVC, namespace=profile.namespace, name=isvc)
        log.info("%s: deleted InferenceService %s (tier removed)", profile.label, isvc)
    refresh_profile_status(
        client,
        namespace=profile.namespace,
        name=profile.name,
        generation=profile.generation,
        status=profile.status,
    )


def owned_inference_services(
    client: kube.Client, *, namespace: str, name: str
) -> dict[str, dict[str, Any]]:
    """The live InferenceServices the profile owns, by tier."""
    return {
        item["metadata"].get("labels", {}).get(manifests.TIER_LABEL): item
        for item in client.list(
            kube.ISVC, namespace=namespace, labels=manifests.owned_selector(name)
        )
        if locking.live(item)
    }


def tier_statuses(client: kube.Client, *, namespace: str, name: str) -> list[TierStatus]:
    """The TierStatus of each InferenceService the profile owns, smallest tier first."""
    owned = owned_inference_services(client, namespace=namespace, name=name)
    return [
        statuses.tier_status(
            tier, name=manifests.inference_service_name(name, tier), isvc=owned[tier.value]
        )
        for tier in Capacity
        if tier.value in owned
    ]


def refresh_profile_status(
    client: kube.Client,
    *,
    namespace: str,
    name: str,
    generation: int | None,
    status: Mapping[str, Any],
) -> None:
    """Record each tier's URL and readiness, and the profile's Ready condition."""
    tiers = tier_statuses(client, namespace=namespace, name=name)
    waiting = [tier.tier.value for tier in tiers if not tier.ready]
    made = statuses.Conditions(generation, statuses.now())
    ready = made.of(
        "Ready",
        bool(tiers) and not waiting,
        reason="TiersReady" if tiers and not waiting else "TiersNotReady",
        message=f"waiting for {', '.join(waiting)}" if waiting else "every tier is ready",
    )
    body = CapacityProfileStatus(
        observed_generation=generation,
        tiers=tiers,
    ).model_dump(by_alias=True, mode="json", exclude_none=True)
    body["conditions"] = statuses.merge_conditions(status.get("conditions") or [], [ready])
    if all(status.get(key) == value for key, value in body.items()):
        return
    client.patch_status(kube.PROFILES, namespace=namespace, name=name, status=body)


def delete_profile(client: kube.Client, *, namespace: str, name: str) -> None:
    """Delete the profile's InferenceServices (owner references do the same where a garbage
    collector runs; doing it here keeps deletion prompt and independent of it)."""
    for item in client.list(kube.ISVC, namespace=namespace, labels=manifests.owned_selector(name)):
        isvc_name = item["metadata"]["name"]
        if client.delete(kube.ISVC, namespace=namespace, name=isvc_name):
            log.info("%s/%s: deleted InferenceService %s", namespace, name, isvc_name)


def refresh_profile(client: kube.Client, *, namespace: str, name: str) -> None:
    """Re-read the profile (under its lock) and refresh its status (an InferenceService of it
    changed)."""
    with locking.latest(client, kube.PROFILES, namespace=namespace, name=name) as found:
        if found is None:
            return
        status = found.get("status") or {}
        refresh_profile_status(
            client,
            namespace=namespace,
            name=name,
            generation=status.get("observedGeneration"),
            status=status,
        )
