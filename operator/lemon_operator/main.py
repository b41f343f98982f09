"""The kopf wiring: every decorator lives here; each unpacks kopf's arguments once and calls a
typed handler in :mod:`lemon_operator.specs`, :mod:`~lemon_operator.profiles`,
:mod:`~lemon_operator.trainings`, :mod:`~lemon_operator.policies` or
:mod:`~lemon_operator.runs`.

Run: ``lemon-operator`` (all namespaces) or ``kopf run -m lemon_operator.main -A --standalone``.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import logging
from typing import Any

import kopf

from lemon.spec import Capacity
from lemon_operator import (
    kube,
    manifests,
    orchestration,
    policies,
    profiles,
    runs,
    specs,
    statuses,
    trainings,
)

__all__ = ["main"]

SPEC = ("lemon.ai", "v1alpha1", "lemonspecs")
PROFILE = ("lemon.ai", "v1alpha1", "lemoncapacityprofiles")
ISVC = ("serving.kserve.io", "v1beta1", "inferenceservices")
TRAINING = ("lemon.ai", "v1alpha1", "lemontrainings")
POLICY = ("lemon.ai", "v1alpha1", "lemonpolicies")
PYTORCHJOB = ("kubeflow.org", "v1", "pytorchjobs")
RUN = ("lemon.ai", "v1alpha1", "lemonruns")
MANAGED = {"app.kubernetes.io/managed-by": manifests.MANAGED_BY}
BACKOFF = 2.0

_clients: list[kube.Client] = []
_services: list[orchestration.Orchestrator] = []


def _client() -> kube.Client:
    if not _clients:
        _clients.append(kube.connect())
    return _clients[0]


def _service() -> orchestration.Orchestrator | None:
    """The orchestration service's client (None: LEMON_SERVICE_TARGET is not set)."""
    if not _services:
        settings = orchestration.ServiceSettings.from_env()
        if settings is None:
            return None
        _services.append(orchestration.Orchestrator(settings))
    return _services[0]


def _named(namespace: str | None, name: str | None) -> tuple[str, str]:
    if not namespace or not name:
        raise kopf.PermanentError("LEMON's resources are namespaced and named")
    return namespace, name


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = "lemon.ai/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="lemon.ai")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="lemon.ai", key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING
    settings.execution.max_workers = 16
    settings.watching.server_timeout = 300
    _client()
    service = _service()
    logging.getLogger(__name__).info(
        "LemonRuns go to %s", service.target if service else "no service (LEMON_SERVICE_TARGET)"
    )


@kopf.on.cleanup()
async def close_service(**_: Any) -> None:
    if _services:
        await _services.pop().aclose()


@kopf.on.resume(*SPEC, backoff=BACKOFF)
@kopf.on.create(*SPEC, backoff=BACKOFF)
@kopf.on.update(*SPEC, field="spec", backoff=BACKOFF)
def spec_changed(namespace: str | None, name: str | None, **_: Any) -> None:
    namespace, name = _named(namespace, name)
    specs.reconcile_spec(_client(), namespace=namespace, name=name)


@kopf.on.resume(*PROFILE, backoff=BACKOFF)
@kopf.on.create(*PROFILE, backoff=BACKOFF)
@kopf.on.update(*PROFILE, field="spec", backoff=BACKOFF)
def profile_changed(
    namespace: str | None,
    name: str | None,
    uid: str | None,
    meta: kopf.Meta,
    spec: kopf.Spec,
    status: kopf.Status,
    **_: Any,
) -> None:
    namespace, name = _named(namespace, name)
    profiles.reconcile_profile(
        _client(),
        namespace=namespace,
        name=name,
        uid=str(uid),
        generation=int(meta.get("generation", 1)),
        spec=dict(spec),
        status=dict(status),
    )
    specs.reconcile_specs_of_profile(_client(), namespace=namespace, profile=name)


@kopf.on.delete(*PROFILE, backoff=BACKOFF)
def profile_deleted(namespace: str | None, name: str | None, **_: Any) -> None:
    namespace, name = _named(namespace, name)
    profiles.delete_profile(_client(), namespace=namespace, name=name)
    specs.reconcile_specs_of_profile(_client(), namespace=namespace, profile=name)


@kopf.on.resume(*TRAINING, backoff=BACKOFF)
@kopf.on.create(*TRAINING, backoff=BACKOFF)
@kopf.on.update(*TRAINING, field="spec", backoff=BACKOFF)
def training_changed(namespace: str | None, name: str | None, **_: Any) -> None:
    namespace, name = _named(namespace, name)
    trainings.reconcile_training(_client(), namespace=namespace, name=name)


@kopf.on.delete(*TRAINING, backoff=BACKOFF)
def training_deleted(namespace: str | None, name: str | None, **_: Any) -> None:
    namespace, name = _named(namespace, name)
    trainings.delete_training(_client(), namespace=namespace, name=name)


@kopf.on.event(*PYTORCHJOB, labels=MANAGED)
def pytorch_job_event(
    type: str | None, namespace: str | None, labels: kopf.Labels, **_: Any
) -> None:
    training = labels.get(manifests.TRAINING_LABEL)
    if type is None or not namespace or not training:  # initial listing: resume covers it
        return
    trainings.reconcile_training(_client(), namespace=namespace, name=training)


@kopf.on.resume(*POLICY, backoff=BACKOFF)
@kopf.on.create(*POLICY, backoff=BACKOFF)
@kopf.on.update(*POLICY, field="spec", backoff=BACKOFF)
def policy_changed(namespace: str | None, name: str | None, **_: Any) -> None:
    namespace, name = _named(namespace, name)
    policies.reconcile_policy(_client(), namespace=namespace, name=name)
    trainings.reconcile_trainings_of_policy(_client(), namespace=namespace, policy=name)


@kopf.on.delete(*POLICY, backoff=BACKOFF)
def policy_deleted(namespace: str | None, name: str | None, **_: Any) -> None:
    namespace, name = _named(namespace, name)
    policies.delete_policy(_client(), namespace=namespace, name=name)


@kopf.on.event(*ISVC, labels=MANAGED)
def inference_service_event(
    type: str | None,
    namespace: str | None,
    name: str | None,
    labels: kopf.Labels,
    body: kopf.Body,
    **_: Any,
) -> None:
    if type is None:  # the initial listing; resume handlers cover what changed while down
        return
    policy = labels.get(manifests.POLICY_LABEL)
    if namespace and policy:
        policies.reconcile_policy(_client(), namespace=namespace, name=policy)
        return
    profile = labels.get(manifests.PROFILE_LABEL)
    tier = labels.get(manifests.TIER_LABEL)
    if not namespace or not name or not profile or tier not in set(Capacity):
        return
    changed = statuses.tier_status(
        Capacity(tier), name=name, isvc=None if type == "DELETED" else dict(body)
    )
    profiles.refresh_profile(_client(), namespace=namespace, name=profile)
    specs.reconcile_specs_of_profile(
        _client(), namespace=namespace, profile=profile, changed=changed
    )


@kopf.index(*PROFILE)
def profile_index(
    namespace: str | None, name: str | None, body: kopf.Body, **_: Any
) -> dict[tuple[str, str], dict[str, Any]]:
    """Capacity profiles in memory, kept current by kopf's watch: runs read their tiers here."""
    return {(str(namespace), str(name)): copy.deepcopy(dict(body))}


@kopf.daemon(*RUN, backoff=BACKOFF, cancellation_timeout=10.0)
async def run_daemon(
    *,
    namespace: str | None,
    name: str,
    uid: str,
    body: kopf.Body,
    stopped: kopf.DaemonStopped,
    profile_index: kopf.Index[tuple[str, str], dict[str, Any]] | None = None,
    **_: Any,
) -> None:
    """A run's life (:mod:`lemon_operator.runs`); then it waits, so that deleting the run (which
    stops it, behind the finalizer) can cancel it on the service and delete its trace."""
    namespace, name = _named(namespace, name)

    assert profile_index is not None  # kopf passes every index to every handler

    def profile_of(profile: str) -> dict[str, Any] | None:
        return next(iter(profile_index.get((namespace, profile), [])), None)

    try:
        # a shallow copy: kopf replaces, never edits, what the body holds (and a run's spec is
        # immutable)
        await runs.drive_run(_client(), _service(), body=dict(body), profile_of=profile_of)
        await asyncio.Future()  # until kopf stops the daemon
    except asyncio.CancelledError:
        reason = stopped.reason
        if reason is not None and reason & kopf.DaemonStoppingReason.RESOURCE_DELETED:
            status = dict(body.get("status") or {})
            await runs.delete_run(
                _client(), _service(), namespace=namespace, name=name, uid=str(uid), status=status
            )
        raise


def main(argv: list[str] | None = None) -> int:
    """``lemon-operator``: run the operator until interrupted."""
    parser = argparse.ArgumentParser(prog="lemon-operator", description=__doc__)
    parser.add_argument(
        "--namespace", action="append", help="watch only this namespace (repeatable)"
    )
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO)
    kopf.run(
        standalone=True,
        clusterwide=not args.namespace,
        namespaces=args.namespace or (),
    )
    return 0
