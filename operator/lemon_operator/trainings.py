"""Handlers for ``LemonTraining``: run it as a PyTorchJob, mirror the job, publish what it made.

A reconcile reads the training afresh (under a per-object lock) and moves it forward from
whatever state it finds, so a restart anywhere loses and duplicates nothing:

1. no job yet: render the TrainingConfig into a ConfigMap and create the PyTorchJob (both
   named after the training; a 409 means an earlier run already did);
2. mirror the job's conditions (Created, Running, Restarting, Succeeded, Failed) and phase;
3. on Succeeded, record ``producedVersion`` (derived from the training's name and uid), the
   checkpoint and metrics, read once from the Master pod's termination message (the run's
   result.json) or, failing that, the deterministic output location with no metrics;
4. publish that version on the ``LemonPolicy`` (:func:`lemon_operator.policies.publish`): a
   version of that name already there means an earlier attempt succeeded, so a crash between
   3, 4 and 5 never adds a second one;
5. set ``Published`` True.

A failed job gives a ``Failed`` condition with the job's reason and publishes nothing.
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from lemon.resources import Condition
from lemon.resources.lemon_policy import PolicySpec
from lemon.resources.lemon_training import (
    OUTPUT_MOUNT,
    LemonTrainingStatus,
    TrainingSpec,
    checkpoint_uri,
    produced_version,
    training_config,
)
from lemon_operator import kube, locking, manifests, policies, statuses

__all__ = [
    "JOB_CONDITIONS",
    "delete_training",
    "read_result",
    "reconcile_training",
    "reconcile_trainings_of_policy",
]

log = logging.getLogger(__name__)
JOB_CONDITIONS = ("Created", "Running", "Restarting", "Succeeded", "Failed")
_TERMINAL = ("Succeeded", "Failed")
_CLEARED = ("phase", "job", "producedVersion", "checkpoint", "metrics", "startTime")


class _Invalid(ValueError):
    """The training cannot run as written (the message says why)."""


class _Waiting(LookupError):
    """The training cannot start yet (its policy does not exist); the policy's arrival retries."""


def reconcile_training(client: kube.Client, *, namespace: str, name: str) -> None:
    """Move the training forward from the state the cluster is in (see the module docstring)."""
    with locking.latest(client, kube.TRAININGS, namespace=namespace, name=name) as current:
        if current is not None:
            _reconcile(client, current)


def reconcile_trainings_of_policy(client: kube.Client, *, namespace: str, policy: str) -> None:
    """Reconcile the trainings of ``policy`` waiting for it: not started (their fromVersion
    needs the policy) or succeeded but not published yet."""
    for item in client.list(kube.TRAININGS, namespace=namespace):
        if (item.get("spec") or {}).get("policy") != policy:
            continue
        status = item.get("status") or {}
        published = statuses.find_condition(status.get("conditions") or [], "Published")
        pending = status.get("phase") == "Pending"
        unpublished = (
            status.get("phase") == "Succeeded" and (published or {}).get("status") != "True"
        )
        if pending or unpublished:
            reconcile_training(client, namespace=namespace, name=item["metadata"]["name"])


def delete_training(client: kube.Client, *, namespace: str, name: str) -> None:
    """Delete the training's PyTorchJob (stopping a run in progress) and its ConfigMap, as the
    garbage collector would through the owner references, but promptly and without it.
    Published versions stay: they belong to the policy."""
    job = client.get(kube.PYTORCHJOBS, namespace=namespace, name=name)
    labels = (job or {}).get("metadata", {}).get("labels") or {}
    if labels.get(manifests.TRAINING_LABEL) == name:
        client.delete(kube.PYTORCHJOBS, namespace=namespace, name=name)
        log.info("%s/%s: deleted PyTorchJob %s", namespace, name, name)
    client.delete_config_map(namespace=namespace, name=manifests.config_map_name(name))


def _reconcile(client: kube.Client, current: Mapping[str, Any]) -> None:
    metadata = current["metadata"]
    namespace, name, uid = metadata["namespace"], metadata["name"], metadata["uid"]
    generation = int(metadata.get("generation", 1))
    status: Mapping[str, Any] = current.get("status") or {}
    ref = kube.ObjectRef(kube.TRAININGS, namespace, name, uid)
    at = statuses.now()
    try:
        spec = TrainingSpec.model_validate(current.get("spec") or {})
    except ValidationError as error:
        message = "; ".join(
            f"{'.'.join(map(str, issue['loc']))}: {issue['msg']}" for issue in error.errors()
        )
        _fail(client, ref, status=status, generation=generation, reason="Invalid", message=message)
        return
    job = client.get(kube.PYTORCHJOBS, namespace=namespace, name=name)
    if job is None and status.get("phase") not in _TERMINAL:
        try:
            job = _start(client, ref, spec=spec, uid=uid)
        except _Waiting as error:
            waiting = statuses.condition(
                "Published",
                False,
                reason="PolicyNotFound",
                message=f"{error}; the job starts once it exists",
                generation=generation,
                at=at,
            )
            pending = {"observedGeneration": generation, "phase": "Pending"}
            _record(client, ref, status=status, new=pending, conditions=[waiting])
            return
        except _Invalid as error:
            _fail(
                client,
                ref,
                status=status,
                generation=generation,
                reason="InvalidBase",
                message=str(error),
            )
            return
    job_status: Mapping[str, Any] = (job or {}).get("status") or {}
    mirrored = _mirror(job_status.get("conditions") or [], generation=generation, at=at)
    phase = _phase(job_status.get("conditions") or []) or status.get("phase") or "Pending"
    new: dict[str, Any] = {
        "observedGeneration": generation,
        "phase": phase,
        "job": name,
        "startTime": job_status.get("startTime") or status.get("startTime"),
        "completionTime": job_status.get("completionTime") or status.get("completionTime"),
    }
    conditions = mirrored or [
        Condition.model_validate(entry)
        for entry in status.get("conditions") or []
        if entry.get("type") in JOB_CONDITIONS
    ]
    if phase == "Failed":
        failed = statuses.find_condition(job_status.get("conditions") or [], "Failed") or {}
        published = statuses.condition(
            "Published",
            False,
            reason="JobFailed",
            message=f"the PyTorchJob failed ({failed.get('reason', 'Failed')}); no new version",
            generation=generation,
            at=at,
        )
        _record(client, ref, status=status, new=new, conditions=[*conditions, published])
        return
    if phase != "Succeeded":
        waiting = statuses.condition(
            "Published",
            False,
            reason="JobNotFinished",
            message=f"the PyTorchJob is {phase.lower()}",
            generation=generation,
            at=at,
        )
        _record(client, ref, status=status, new=new, conditions=[*conditions, waiting])
        return
    # Succeeded: record what was produced (once), then publish it (until it is published).
    version = status.get("producedVersion") or produced_version(name, uid)
    checkpoint, metrics, note = status.get("checkpoint"), status.get("metrics"), ""
    before = statuses.find_condition(status.get("conditions") or [], "Published")
    if checkpoint is not None and before is not None and before.get("status") == "True":
        # Done: never publish again (a version removed from the policy by hand stays removed).
        new |= {"producedVersion": version, "checkpoint": checkpoint, "metrics": metrics}
        kept = Condition.model_validate(before)
        _record(client, ref, status=status, new=new, conditions=[*conditions, kept])
        return
    first = checkpoint is None
    if first:
        found, metrics, note = read_result(client, namespace=namespace, job=name, spec=spec)
        checkpoint = found or checkpoint_uri(spec, version)
    checkpoint = str(checkpoint)
    new |= {"producedVersion": version, "checkpoint": checkpoint, "metrics": metrics or {}}
    if first:  # step 3: what was produced is in status before the policy hears of it
        publishing = statuses.condition(
            "Published",
            False,
            reason="Publishing",
            message=f"publishing {version} on LemonPolicy {spec.policy}{note}",
            generation=generation,
            at=at,
        )
        status = _record(client, ref, status=status, new=new, conditions=[*conditions, publishing])
    outcome = policies.publish(
        client,
        namespace=namespace,
        policy=spec.policy,
        version=version,
        checkpoint=checkpoint,
        stage=spec.stage,
        training=name,
        metrics=metrics or {},
    )
    done = statuses.condition(
        "Published",
        outcome.published,
        reason=outcome.reason,
        message=outcome.message + note,
        generation=generation,
        at=at,
    )
    _record(client, ref, status=status, new=new, conditions=[*conditions, done])
    if outcome.published:
        log.info("%s/%s: published %s on %s", namespace, name, version, spec.policy)


def _start(
    client: kube.Client, ref: kube.ObjectRef, *, spec: TrainingSpec, uid: str
) -> dict[str, Any]:
    """Create the ConfigMap and the PyTorchJob (each only if absent); the job's manifest."""
    namespace, name = ref.namespace, ref.name
    version = produced_version(name, uid)
    config = training_config(
        spec,
        version=version,
        base_model=_base_from_version(client, namespace=namespace, spec=spec),
    )
    client.create_config_map(
        body=manifests.build_training_config_map(name, namespace=namespace, uid=uid, config=config)
    )
    job = manifests.build_pytorch_job(name, namespace=namespace, uid=uid, spec=spec)
    if client.create(kube.PYTORCHJOBS, body=job):
        log.info("%s/%s: created PyTorchJob %s", namespace, name, name)
        client.emit_event(ref, reason="Created", message=f"PyTorchJob {name} ({spec.stage})")
    return job


def _base_from_version(client: kube.Client, *, namespace: str, spec: TrainingSpec) -> str | None:
    """The in-pod path of ``fromVersion``'s checkpoint (on the output claim), or None."""
    if spec.from_version is None:
        return None
    found = client.get(kube.POLICIES, namespace=namespace, name=spec.policy)
    if found is None:
        raise _Waiting(f"fromVersion: no LemonPolicy {spec.policy}")
    try:
        versions = PolicySpec.model_validate(found.get("spec") or {})
    except ValidationError:
        versions = PolicySpec()
    entry = versions.version(spec.from_version)
    if entry is None:
        raise _Invalid(f"LemonPolicy {spec.policy} has no version {spec.from_version}")
    prefix = f"pvc://{spec.output.pvc}/"
    if not entry.checkpoint.startswith(prefix):
        raise _Invalid(
            f"version {spec.from_version} is at {entry.checkpoint}, not on the output claim "
            f"{spec.output.pvc} (use baseModel for other locations)"
        )
    return posixpath.join(OUTPUT_MOUNT, entry.checkpoint.removeprefix(prefix))


def read_result(
    client: kube.Client, *, namespace: str, job: str, spec: TrainingSpec
) -> tuple[str | None, dict[str, Any], str]:
    """The checkpoint URI and metrics the Master pod reported in its termination message, and a
    note for the condition when they could not be read (then the caller falls back to the
    deterministic location, with no metrics)."""
    pods = client.list_pods(namespace=namespace, labels=manifests.master_pod_selector(job))
    messages = [
        terminated.get("message")
        for pod in pods
        for container in (pod.get("status") or {}).get("containerStatuses") or []
        if container.get("name") == manifests.CONTAINER
        for terminated in (
            (container.get("state") or {}).get("terminated") or {},
            (container.get("lastState") or {}).get("terminated") or {},
        )
        if terminated.get("exitCode") == 0
    ]
    for message in messages:
        try:
            result = json.loads(message or "")
        except json.JSONDecodeError:
            continue
        if not isinstance(result, dict) or not isinstance(result.get("policy"), str):
            continue
        metrics = _measured(result.get("metrics"))
        path = posixpath.normpath(result["policy"])
        if not path.startswith(OUTPUT_MOUNT + "/"):
            return (
                None,
                metrics if isinstance(metrics, dict) else {},
                (f" (the job reported {path}, outside {OUTPUT_MOUNT}; using the output location)"),
            )
        uri = f"pvc://{spec.output.pvc}/{path.removeprefix(OUTPUT_MOUNT + '/')}"
        return uri, metrics, ""
    return None, {}, " (no result in the Master's termination message: no metrics)"


def _measured(metrics: Any) -> dict[str, Any]:
    """The metrics that hold a value: a null says nothing, and a JSON merge patch (how status
    and the policy are written) would read it as "delete this key" anyway."""
    if not isinstance(metrics, dict):
        return {}
    return {str(key): value for key, value in metrics.items() if value is not None}


def _mirror(
    job_conditions: list[Mapping[str, Any]], *, generation: int, at: str
) -> list[Condition]:
    mirrored = []
    for entry in job_conditions:
        if entry.get("type") not in JOB_CONDITIONS:
            continue
        status = entry.get("status")
        mirrored.append(
            statuses.condition(
                str(entry["type"]),
                True if status == "True" else False if status == "False" else None,
                reason=str(entry.get("reason") or entry["type"]),
                message=str(entry.get("message") or ""),
                generation=generation,
                at=str(entry.get("lastTransitionTime") or at),
            )
        )
    return mirrored


def _phase(job_conditions: list[Mapping[str, Any]]) -> str | None:
    """The job's state: a terminal condition wins, else the last True condition listed (the
    training operator appends conditions as the job moves on)."""
    true = [entry.get("type") for entry in job_conditions if entry.get("status") == "True"]
    for terminal in _TERMINAL:
        if terminal in true:
            return terminal
    known = [kind for kind in true if kind in JOB_CONDITIONS]
    return str(known[-1]) if known else None


def _fail(
    client: kube.Client,
    ref: kube.ObjectRef,
    *,
    status: Mapping[str, Any],
    generation: int,
    reason: str,
    message: str,
) -> None:
    failed = statuses.condition(
        "Failed", True, reason=reason, message=message, generation=generation, at=statuses.now()
    )
    new = {"observedGeneration": generation, "phase": "Failed"}
    _record(client, ref, status=status, new=new, conditions=[failed])


def _record(
    client: kube.Client,
    ref: kube.ObjectRef,
    *,
    status: Mapping[str, Any],
    new: Mapping[str, Any],
    conditions: list[Condition],
) -> dict[str, Any]:
    """Patch the status if it changed (one event per condition that turned True); the status
    as it now is."""
    body = LemonTrainingStatus.model_validate(
        {key: value for key, value in new.items() if value is not None}
    ).model_dump(by_alias=True, mode="json", exclude_none=True)
    body["conditions"] = statuses.merge_conditions(status.get("conditions") or [], conditions)
    for key in _CLEARED:
        body.setdefault(key, None)
    if all(status.get(key) == value for key, value in body.items()):
        return dict(status)
    client.patch_status(kube.TRAININGS, namespace=ref.namespace, name=ref.name, status=body)
    before = status.get("conditions") or []
    for entry in body["conditions"]:
        old = statuses.find_condition(before, entry["type"])
        if entry["status"] != "True" or (old is not None and old.get("status") == "True"):
            continue
        warning = entry["type"] == "Failed"
        client.emit_event(ref, reason=entry["reason"], message=entry["message"], warning=warning)
        log.info("%s/%s: %s (%s)", ref.namespace, ref.name, entry["type"], entry["reason"])
    merged = {**status, **body}
    return {key: value for key, value in merged.items() if value is not None}
