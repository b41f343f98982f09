"""Handlers for ``LemonPolicy``: serve the chosen version, roll it when the choice changes, and
publish the versions trainings produce.

The served version runs on the policy's own InferenceService (``<policy>-policy``); a built-in
version (checkpoint ``lemon://<name>``, :mod:`lemon.policy.defaults`) needs none: the
orchestration service runs it, so it is Ready at once. A reconcile
reads the policy and that InferenceService afresh and makes the latter serve ``servedVersion``
(:func:`lemon_operator.reconciling.converge`: one server-side apply when the version or the
serving settings changed, and KServe rolls it out); status says which version the
InferenceService carries and whether KServe reports it Ready for that spec. Rollback is setting
an older ``servedVersion``: the same path.

:func:`publish` appends a version with optimistic concurrency (the patch carries the
resourceVersion it read; a 409 means someone wrote in between, so it reads and tries again) and
is idempotent by version name, which is what makes a training's publication safe to repeat.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from lemon.resources import Condition
from lemon.resources.lemon_policy import (
    MAX_VERSIONS,
    LemonPolicyStatus,
    PolicySpec,
    PolicyVersionEntry,
)
from lemon_operator import kube, locking, manifests, reconciling, statuses
from lemon_operator.reconciling import Converged, Observed

__all__ = ["Publication", "delete_policy", "publish", "reconcile_policy"]

log = logging.getLogger(__name__)
_ATTEMPTS = 8


@dataclass(frozen=True, slots=True)
class Publication:
    """The outcome of publishing a version (reason and message for the Published condition)."""

    published: bool
    reason: str
    message: str


def publish(
    client: kube.Client,
    *,
    namespace: str,
    policy: str,
    version: str,
    checkpoint: str,
    stage: Literal["sft", "grpo"],
    training: str,
    metrics: Mapping[str, Any],
) -> Publication:
    """Append ``version`` to the policy (and serve it when ``autoPromote`` is set), exactly once."""
    entry = PolicyVersionEntry(
        name=version,
        checkpoint=checkpoint,
        stage=stage,
        training=training,
        created=statuses.now(),
        metrics=dict(metrics),
    ).model_dump(by_alias=True, mode="json", exclude_none=True)
    for _ in range(_ATTEMPTS):
        found = client.get(kube.POLICIES, namespace=namespace, name=policy)
        if found is None or not locking.live(found):
            return Publication(
                False, "PolicyNotFound", f"no LemonPolicy {policy}; published once it exists"
            )
        spec: Mapping[str, Any] = found.get("spec") or {}
        versions = list(spec.get("versions") or [])
        same = next((item for item in versions if item.get("name") == version), None)
        if same is not None:
            if same.get("training") not in (None, training):
                return Publication(
                    False,
                    "VersionTaken",
                    f"LemonPolicy {policy} already has a version {version} from "
                    f"{same.get('training')}",
                )
            return Publication(True, "Published", f"{version} is a version of {policy}")
        if len(versions) >= MAX_VERSIONS:
            return Publication(
                False, "PolicyFull", f"LemonPolicy {policy} has {MAX_VERSIONS} versions"
            )
        patch: dict[str, Any] = {"spec": {"versions": [*versions, entry]}}
        promote = bool(spec.get("autoPromote"))
        if promote:
            patch["spec"]["servedVersion"] = version
        outcome = client.patch_unless_changed(
            kube.POLICIES,
            namespace=namespace,
            name=policy,
            resource_version=found["metadata"]["resourceVersion"],
            patch=patch,
        )
        if outcome == "patched":
            ref = kube.ObjectRef(kube.POLICIES, namespace, policy, found["metadata"]["uid"])
            served = "; now served (autoPromote)" if promote else ""
            client.emit_event(
                ref, reason="Published", message=f"version {version} from {training}{served}"
            )
            return Publication(True, "Published", f"{version} is a version of {policy}{served}")
        log.info("%s/%s: %s publishing %s; reading it again", namespace, policy, outcome, version)
    return Publication(False, "Conflict", f"LemonPolicy {policy} kept changing; will retry")


def reconcile_policy(client: kube.Client, *, namespace: str, name: str) -> None:
    """Serve ``servedVersion`` on the policy's InferenceService and record its state."""
    reconciling.reconcile(client, kube.POLICIES, namespace=namespace, name=name, handler=_reconcile)


def _reconcile(client: kube.Client, policy: Observed) -> None:
    made = policy.conditions
    try:
        spec = PolicySpec.model_validate(policy.spec)
    except ValidationError as error:
        invalid = made.false("Ready", reason="Invalid", message=statuses.validation_message(error))
        new = LemonPolicyStatus(observed_generation=policy.generation)
        _record(client, policy, new=new, ready=invalid)
        return
    isvc_name = manifests.policy_inference_service_name(policy.name)
    current = client.get(kube.ISVC, namespace=policy.namespace, name=isvc_name)
    owned = (
        current is not None
        and (current["metadata"].get("labels") or {}).get(manifests.POLICY_LABEL) == policy.name
    )
    entry = spec.version(spec.served_version) if spec.served_version else None
    idle = LemonPolicyStatus(
        observed_generation=policy.generation, version_count=len(spec.versions)
    )
    if entry is None:
        if current is not None and owned:
            client.delete(kube.ISVC, namespace=policy.namespace, name=isvc_name)
            log.info("%s: deleted %s (nothing to serve)", policy.label, isvc_name)
        unset = made.false("Ready", reason="NoServedVersion", message="servedVersion is not set")
        _record(client, policy, new=idle, ready=unset)
        return
    if entry.builtin is not None:
        _serve_builtin(client, policy, spec=spec, entry=entry, current=current, owned=owned)
        return
    if current is not None and not owned:
        taken = f"InferenceService {isvc_name} exists and is not this policy's"
        _record(
            client, policy, new=idle, ready=made.false("Ready", reason="NameTaken", message=taken)
        )
        return
    before = None if current is None else _annotated_version(current)
    manifest = manifests.build_policy_inference_service(
        policy.name, namespace=policy.namespace, uid=policy.uid, version=entry, serving=spec.serving
    )
    done = reconciling.converge(client, kube.ISVC, manifest=manifest, current=current)
    if done is Converged.CREATED:
        client.emit_event(
            policy.ref, reason="Serving", message=f"version {entry.name} on {isvc_name}"
        )
    elif done is Converged.UPDATED:
        client.emit_event(
            policy.ref, reason="Rolled", message=f"{isvc_name}: version {before} -> {entry.name}"
        )
        log.info("%s: rolled %s from %s to %s", policy.label, isvc_name, before, entry.name)
    up, url = (
        (False, None) if done is not Converged.UNCHANGED or current is None else _serving(current)
    )
    new = LemonPolicyStatus(
        observed_generation=policy.generation,
        served_version=entry.name,
        version_count=len(spec.versions),
        inference_service=isvc_name,
        url=url,
        ready=up,
    )
    ready = (
        made.true("Ready", reason="Ready", message=f"version {entry.name} is served")
        if up
        else made.false(
            "Ready", reason="Rolling", message=f"waiting for {isvc_name} to serve {entry.name}"
        )
    )
    _record(client, policy, new=new, ready=ready)


def _serve_builtin(
    client: kube.Client,
    policy: Observed,
    *,
    spec: PolicySpec,
    entry: PolicyVersionEntry,
    current: Mapping[str, Any] | None,
    owned: bool,
) -> None:
    """A built-in version (``lemon://<name>``): the orchestration service runs it itself, so
    it is Ready at once, on no InferenceService (an earlier version's is deleted)."""
    isvc_name = manifests.policy_inference_service_name(policy.name)
    if current is not None and owned:
        client.delete(kube.ISVC, namespace=policy.namespace, name=isvc_name)
        log.info("%s: deleted %s (version %s is built in)", policy.label, isvc_name, entry.name)
    new = LemonPolicyStatus(
        observed_generation=policy.generation,
        served_version=entry.name,
        version_count=len(spec.versions),
        ready=True,
    )
    message = (
        f"version {entry.name} is LEMON's built-in policy {entry.builtin}, run by the "
        "orchestration service (no InferenceService)"
    )
    ready = policy.conditions.true("Ready", reason="BuiltIn", message=message)
    _record(client, policy, new=new, ready=ready)


def _annotated_version(isvc: Mapping[str, Any]) -> str | None:
    value = (isvc["metadata"].get("annotations") or {}).get(manifests.POLICY_VERSION_ANNOTATION)
    return None if value is None else str(value)


def _serving(isvc: Mapping[str, Any]) -> tuple[bool, str | None]:
    """KServe's Ready for the InferenceService's current spec (a Ready reported for an earlier
    generation says nothing about the version just rolled in), and its URL."""
    status = isvc.get("status") or {}
    condition = statuses.find_condition(status.get("conditions") or [], "Ready")
    observed = status.get("observedGeneration")
    current = observed is None or int(observed) >= int(isvc["metadata"].get("generation", 1))
    ok = bool(condition and condition.get("status") == "True" and current)
    url = status.get("url")
    return ok, None if url is None else str(url)


def _record(
    client: kube.Client, policy: Observed, *, new: LemonPolicyStatus, ready: Condition
) -> None:
    ref, status = policy.ref, policy.status
    body = new.model_dump(by_alias=True, mode="json", exclude_none=True)
    body["conditions"] = statuses.merge_conditions(status.get("conditions") or [], [ready])
    for key in ("servedVersion", "inferenceService", "url"):
        body.setdefault(key, None)  # clear what an earlier reconcile wrote
    if all(status.get(key) == value for key, value in body.items()):
        return
    client.patch_status(kube.POLICIES, namespace=ref.namespace, name=ref.name, status=body)
    old = statuses.find_condition(status.get("conditions") or [], "Ready")
    if ready.status == "True" and (old or {}).get("status") != "True":
        client.emit_event(ref, reason="Ready", message=ready.message)


def delete_policy(client: kube.Client, *, namespace: str, name: str) -> None:
    """Delete the policy's InferenceService (owner references do the same where a garbage
    collector runs; doing it here keeps deletion prompt and independent of it)."""
    isvc_name = manifests.policy_inference_service_name(name)
    current = client.get(kube.ISVC, namespace=namespace, name=isvc_name)
    labels = (current or {}).get("metadata", {}).get("labels") or {}
    if labels.get(manifests.POLICY_LABEL) == name:
        client.delete(kube.ISVC, namespace=namespace, name=isvc_name)
        log.info("%s/%s: deleted InferenceService %s", namespace, name, isvc_name)
