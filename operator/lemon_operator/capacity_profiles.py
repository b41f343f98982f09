"""Handlers for ``LemonCapacityProfile``: one InferenceService per tier, readiness in status."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from lemon.resources import CapacityProfileSpec, CapacityProfileStatus, TierSpec, TierStatus
from lemon.spec import Capacity
from lemon_operator import kube, locking, manifests, statuses

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
) -> bool:
    """Create the InferenceService serving ``tier`` of ``profile``; False when it exists."""
    manifest = manifests.build_inference_service(
        profile, namespace=namespace, uid=uid, tier=tier, spec=spec
    )
    return client.create(kube.ISVC, body=manifest)


def reconcile_profile(
    client: kube.Client,
    *,
    namespace: str,
    name: str,
    uid: str,
    generation: int,
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
) -> None:
    """Make the profile's InferenceServices match its tiers, then record their readiness."""
    ref = kube.ObjectRef(kube.PROFILES, namespace, name, uid)
    try:
        profile = CapacityProfileSpec.model_validate(spec)
    except ValidationError as error:
        message = "; ".join(
            f"{'.'.join(map(str, issue['loc']))}: {issue['msg']}" for issue in error.errors()
        )
        invalid = statuses.condition(
            "Ready",
            False,
            reason="Invalid",
            message=message,
            generation=generation,
            at=statuses.now(),
        )
        body = {
            "observedGeneration": generation,
            "conditions": statuses.merge_conditions(status.get("conditions") or [], [invalid]),
        }
        client.patch_status(kube.PROFILES, namespace=namespace, name=name, status=body)
        client.emit_event(ref, reason="Invalid", message=message, warning=True)
        return
    tiers = profile.tiers()
    wanted = {
        manifests.inference_service_name(name, tier): (
            tier,
            manifests.build_inference_service(
                name, namespace=namespace, uid=uid, tier=tier, spec=tier_spec
            ),
        )
        for tier, tier_spec in tiers.items()
    }
    existing = {
        item["metadata"]["name"]: item
        for item in client.list(
            kube.ISVC, namespace=namespace, labels=manifests.owned_selector(name)
        )
    }
    for isvc_name, (tier, manifest) in wanted.items():
        current = existing.get(isvc_name)
        if current is None:
            created = create_tier(
                client, namespace=namespace, profile=name, uid=uid, tier=tier, spec=tiers[tier]
            )
            if created:
                log.info("%s/%s: created InferenceService %s", namespace, name, isvc_name)
                client.emit_event(ref, reason="Created", message=f"InferenceService {isvc_name}")
            continue
        stale_spec = current.get("spec") != manifest["spec"]
        stale_meta = _metadata_differs(current, manifest)
        if stale_spec:
            client.replace_spec(
                kube.ISVC, namespace=namespace, name=isvc_name, spec=manifest["spec"]
            )
        if stale_meta:
            metadata = {key: manifest["metadata"][key] for key in ("labels", "annotations")}
            client.patch(
                kube.ISVC, namespace=namespace, name=isvc_name, patch={"metadata": metadata}
            )
        if stale_spec or stale_meta:
            log.info("%s/%s: updated InferenceService %s", namespace, name, isvc_name)
    for isvc_name in existing.keys() - wanted.keys():
        client.delete(kube.ISVC, namespace=namespace, name=isvc_name)
        log.info("%s/%s: deleted InferenceService %s (tier removed)", namespace, name, isvc_name)
    refresh_profile_status(
        client, namespace=namespace, name=name, generation=generation, status=status
    )


def _metadata_differs(current: Mapping[str, Any], manifest: Mapping[str, Any]) -> bool:
    for key in ("labels", "annotations"):
        have = current.get("metadata", {}).get(key) or {}
        if any(have.get(k) != v for k, v in manifest["metadata"][key].items()):
            return True
    return False


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
    ready = statuses.condition(
        "Ready",
        bool(tiers) and not waiting,
        reason="TiersReady" if tiers and not waiting else "TiersNotReady",
        message=f"waiting for {', '.join(waiting)}" if waiting else "every tier is ready",
        generation=generation,
        at=statuses.now(),
    )
    body = CapacityProfileStatus(
        observed_generation=generation,
        tiers=tiers,
    ).model_dump(by_alias=True, mode="json", exclude_none=True)
    body["conditions"] = statuses.merge_conditions(status.get("conditions") or [], [ready])
    if generation is None:
        body.pop("observedGeneration", None)
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
    """Re-read the profile and refresh its status (an InferenceService of it changed)."""
    found = client.get(kube.PROFILES, namespace=namespace, name=name)
    if found is None or not locking.live(found):
        return
    status = found.get("status") or {}
    refresh_profile_status(
        client,
        namespace=namespace,
        name=name,
        generation=status.get("observedGeneration"),
        status=status,
    )
