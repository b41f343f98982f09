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
from dataclasses import dataclass
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
from lemon_operator import kube, manifests, policies, reconciling, statuses
from lemon_operator.reconciling import Observed

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
    reconciling.reconcile(
        client, kube.TRAININGS, namespace=namespace, name=name, handler=_reconcile
    )


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


@dataclass(frozen=True, slots=True)
class _Job:
    """Step 2: the PyTorchJob as the training mirrors it."""

    phase: str
    fields: dict[str, Any]
    """The status fields it sets (phase, job, start and completion time)."""
    conditions: list[Condition]
    """Its conditions (Created, Running, ...), or the training's last copy of them."""
    failed_reason: str = "Failed"


def _reconcile(client: kube.Client, training: Observed) -> None:
    try:
        spec = TrainingSpec.model_validate(training.spec)
    except ValidationError as error:
        _fail(client, training, reason="Invalid", message=statuses.validation_message(error))
        return
    job = client.get(kube.PYTORCHJOBS, namespace=training.namespace, name=training.name)
    if job is None and training.status.get("phase") not in _TERMINAL:
        job = _start_job(client, training, spec=spec)
        if job is None:
            return
    mirrored = _mirror_job(training, job)
    made = training.conditions
    if mirrored.phase == "Failed":
        message = f"the PyTorchJob failed ({mirrored.failed_reason}); no new version"
        published = made.false("Published", reason="JobFailed", message=message)
        _record(client, training, new=mirrored.fields, conditions=[*mirrored.conditions, published])
        return
    if mirrored.phase != "Succeeded":
        message = f"the PyTorchJob is {mirrored.phase.lower()}"
        waiting = made.false("Published", reason="JobNotFinished", message=message)
        _record(client, training, new=mirrored.fields, conditions=[*mirrored.conditions, waiting])
        return
    _publish_produced(client, training, spec=spec, job=mirrored)


def _start_job(
    client: kube.Client, training: Observed, *, spec: TrainingSpec
) -> dict[str, Any] | None:
    """Step 1: the job started (its manifest), or None when it cannot start (recorded: waiting
    for its policy, or a base version that cannot be used)."""
    try:
        return _start(client, training.ref, spec=spec, uid=training.uid)
    except _Waiting as error:
        waiting = training.conditions.false(
            "Published",
            reason="PolicyNotFound",
            message=f"{error}; the job starts once it exists",
        )
        pending = {"observedGeneration": training.generation, "phase": "Pending"}
        _record(client, training, new=pending, conditions=[waiting])
    except _Invalid as error:
        _fail(client, training, reason="InvalidBase", message=str(error))
    return None


def _mirror_job(training: Observed, job: Mapping[str, Any] | None) -> _Job:
    """Step 2: the job's conditions and phase, as the training's (its last copy of them when
    the job is gone)."""
    job_status: Mapping[str, Any] = (job or {}).get("status") or {}
    job_conditions = job_status.get("conditions") or []
    mirrored = _mirror(job_conditions, generation=training.generation, at=training.at)
    phase = _phase(job_conditions) or training.status.get("phase") or "Pending"
    fields: dict[str, Any] = {
        "observedGeneration": training.generation,
        "phase": phase,
        "job": training.name,
        "startTime": job_status.get("startTime") or training.status.get("startTime"),
        "completionTime": job_status.get("completionTime") or training.status.get("completionTime"),
    }
    conditions = mirrored or [
        Condition.model_validate(entry)
        for entry in training.status.get("conditions") or []
        if entry.get("type") in JOB_CONDITIONS
    ]
    failed = statuses.find_condition(job_conditions, "Failed") or {}
    return _Job(phase, fields, conditions, str(failed.get("reason", "Failed")))


def _publish_produced(
    client: kube.Client, training: Observed, *, spec: TrainingSpec, job: _Job
) -> None:
    """Steps 3 to 5 of a succeeded job: record what was produced (once), publish it on the
    policy (until it is published), set Published."""
    status = training.status
    version = status.get("producedVersion") or produced_version(training.name, training.uid)
    checkpoint, metrics, note = status.get("checkpoint"), status.get("metrics"), ""
    before = statuses.find_condition(status.get("conditions") or [], "Published")
    new = dict(job.fields)
    if checkpoint is not None and before is not None and before.get("status") == "True":
        # Done: never publish again (a version removed from the policy by hand stays removed).
        new |= {"producedVersion": version, "checkpoint": checkpoint, "metrics": metrics}
        kept = Condition.model_validate(before)
        _record(client, training, new=new, conditions=[*job.conditions, kept])
        return
    made = training.conditions
    first = checkpoint is None
    if first:
        found, metrics, note = read_result(
            client, namespace=training.namespace, job=training.name, spec=spec
        )
        checkpoint = found or checkpoint_uri(spec, version)
    checkpoint = str(checkpoint)
    new |= {"producedVersion": version, "checkpoint": checkpoint, "metrics": metrics or {}}
    if first:  # step 3: what was produced is in status before the policy hears of it
        message = f"publishing {version} on LemonPolicy {spec.policy}{note}"
        publishing = made.false("Published", reason="Publishing", message=message)
        status = _record(client, training, new=new, conditions=[*job.conditions, publishing])
    outcome = policies.publish(  # step 4
        client,
        namespace=training.namespace,
        policy=spec.policy,
        version=version,
        checkpoint=checkpoint,
        stage=spec.stage,
        training=training.name,
        metrics=metrics or {},
    )
    done = made.of(  # step 5
        "Published", outcome.published, reason=outcome.reason, message=outcome.message + note
    )
    _record(client, training, new=new, conditions=[*job.conditions, done], status=status)
    if outcome.published:
        log.info("%s: published %s on %s", training.label, version, spec.policy)


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


def _fail(client: kube.Client, training: Observed, *, reason: str, message: str) -> None:
    failed = training.conditions.true("Failed", reason=reason, message=message)
    new = {"observedGeneration": training.generation, "phase": "Failed"}
    _record(client, training, new=new, conditions=[failed])


def _record(
    client: kube.Client,
    training: Observed,
    *,
    new: Mapping[str, Any],
    conditions: list[Condition],
    status: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Patch the status if it changed from ``status`` (default: as the reconcile read it; one
    event per condition that turned True); the status as it now is."""
    ref = training.ref
    status = training.status if status is None else status
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
        log.info("%s: %s (%s)", training.label, entry["type"], entry["reason"])
    merged = {**status, **body}
    return {key: value for key, value in merged.items() if value is not None}
