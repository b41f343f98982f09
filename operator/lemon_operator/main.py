"""The kopf wiring: every decorator lives here; each unpacks kopf's arguments once and calls a
typed handler in :mod:`lemon_operator.specs`, :mod:`~lemon_operator.capacity_profiles`,
:mod:`~lemon_operator.trainings`, :mod:`~lemon_operator.policies`,
:mod:`~lemon_operator.lemon_runs` or :mod:`~lemon_operator.lemon_budgets`.

Run: ``lemon-operator`` (all namespaces) or ``kopf run -m lemon_operator.main -A --standalone``.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import logging
import os
from typing import Any

import kopf

from lemon.resources.crds import GROUP
from lemon.spec import Capacity
from lemon_operator import (
    capacity_profiles,
    kube,
    lemon_budgets,
    lemon_runs,
    manifests,
    metrics,
    policies,
    service,
    specs,
    statuses,
    trainings,
)

__all__ = ["main"]


def _watched(resource: kube.Resource) -> tuple[str, str, str]:
    """What kopf's decorators take: group, version, plural."""
    return resource.group, resource.version, resource.plural


SPEC = _watched(kube.SPECS)
PROFILE = _watched(kube.PROFILES)
ISVC = _watched(kube.ISVC)
TRAINING = _watched(kube.TRAININGS)
POLICY = _watched(kube.POLICIES)
PYTORCHJOB = _watched(kube.PYTORCHJOBS)
RUN = _watched(kube.RUNS)
BUDGET = _watched(kube.BUDGETS)
MANAGED = {"app.kubernetes.io/managed-by": manifests.MANAGED_BY}
BACKOFF = 2.0

_clients: list[kube.Client] = []
_services: list[service.Service] = []


def _client() -> kube.Client:
    if not _clients:
        _clients.append(kube.connect())
    return _clients[0]


def _service() -> service.Service | None:
    """The orchestration service's client (None: LEMON_SERVICE_TARGET is not set)."""
    if not _services:
        config = service.client_config()
        if config is None:
            return None
        _services.append(service.Service(config))
    return _services[0]


def _named(namespace: str | None, name: str | None) -> tuple[str, str]:
    if not namespace or not name:
        raise kopf.PermanentError("LEMON's resources are namespaced and named")
    return namespace, name


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING
    settings.execution.max_workers = 16
    settings.watching.server_timeout = 300
    port = metrics.serve_from_env()
    if port is not None:
        logging.getLogger(__name__).info("metrics at http://0.0.0.0:%d/metrics", port)
    _client()
    runs_to = _service()
    logging.getLogger(__name__).info(
        "LemonRuns go to %s", runs_to.target if runs_to else "no service (LEMON_SERVICE_TARGET)"
    )


@kopf.on.cleanup()
async def close_service(**_: Any) -> None:
    if _services:
        await _services.pop().aclose()


@kopf.on.resume(*SPEC, backoff=BACKOFF)
@kopf.on.create(*SPEC, backoff=BACKOFF)
@kopf.on.update(*SPEC, field="spec", backoff=BACKOFF)
@metrics.reconciled("LemonSpec")
def spec_changed(namespace: str | None, name: str | None, **_: Any) -> None:
    namespace, name = _named(namespace, name)
    specs.reconcile_spec(_client(), namespace=namespace, name=name)


@kopf.on.resume(*PROFILE, backoff=BACKOFF)
@kopf.on.create(*PROFILE, backoff=BACKOFF)
@kopf.on.update(*PROFILE, field="spec", backoff=BACKOFF)
@metrics.reconciled("LemonCapacityProfile")
def profile_changed(namespace: str | None, name: str | None, **_: Any) -> None:
    namespace, name = _named(namespace, name)
    capacity_profiles.reconcile_profile(_client(), namespace=namespace, name=name)
    specs.reconcile_specs_of_profile(_client(), namespace=namespace, profile=name)


@kopf.on.delete(*PROFILE, backoff=BACKOFF)
@metrics.reconciled("LemonCapacityProfile")
def profile_deleted(namespace: str | None, name: str | None, **_: Any) -> None:
    namespace, name = _named(namespace, name)
    capacity_profiles.delete_profile(_client(), namespace=namespace, name=name)
    specs.reconcile_specs_of_profile(_client(), namespace=namespace, profile=name)


@kopf.on.resume(*TRAINING, backoff=BACKOFF)
@kopf.on.create(*TRAINING, backoff=BACKOFF)
@kopf.on.update(*TRAINING, field="spec", backoff=BACKOFF)
@metrics.reconciled("LemonTraining")
def training_changed(namespace: str | None, name: str | None, **_: Any) -> None:
    namespace, name = _named(namespace, name)
    trainings.reconcile_training(_client(), namespace=namespace, name=name)


@kopf.on.delete(*TRAINING, backoff=BACKOFF)
@metrics.reconciled("LemonTraining")
def training_deleted(namespace: str | None, name: str | None, **_: Any) -> None:
    namespace, name = _named(namespace, name)
    trainings.delete_training(_client(), namespace=namespace, name=name)


@kopf.on.event(*PYTORCHJOB, labels=MANAGED)
@metrics.reconciled("PyTorchJob")
def pytorch_job_event(
    type: str | None, namespace: str | None, labels: kopf.Labels, **_: Any
) -> None:
    training = labels.get(manifests.TRAINING_LABEL)
    # the initial listing too (see inference_service_event): a job that changed before this
    # watch began may belong to a training whose own handlers ran before the change
    if not namespace or not training:
        return
    trainings.reconcile_training(_client(), namespace=namespace, name=training)


@kopf.on.resume(*POLICY, backoff=BACKOFF)
@kopf.on.create(*POLICY, backoff=BACKOFF)
@kopf.on.update(*POLICY, field="spec", backoff=BACKOFF)
@metrics.reconciled("LemonPolicy")
def policy_changed(namespace: str | None, name: str | None, **_: Any) -> None:
    namespace, name = _named(namespace, name)
    policies.reconcile_policy(_client(), namespace=namespace, name=name)
    trainings.reconcile_trainings_of_policy(_client(), namespace=namespace, policy=name)


@kopf.on.delete(*POLICY, backoff=BACKOFF)
@metrics.reconciled("LemonPolicy")
def policy_deleted(namespace: str | None, name: str | None, **_: Any) -> None:
    namespace, name = _named(namespace, name)
    policies.delete_policy(_client(), namespace=namespace, name=name)


@kopf.on.event(*SPEC)
def spec_event(type: str | None, namespace: str | None, name: str | None, status: kopf.Status,
               **_: Any) -> None:  # fmt: skip
    """Every LemonSpec event (the initial listing too): its conditions, for the metrics."""
    if namespace and name:
        conditions = None if type == "DELETED" else list(status.get("conditions") or [])
        metrics.observe_spec(namespace=namespace, name=name, conditions=conditions)


@kopf.on.event(*ISVC, labels=MANAGED)
def inference_service_event(
    type: str | None,
    namespace: str | None,
    name: str | None,
    labels: kopf.Labels,
    body: kopf.Body,
    **_: Any,
) -> None:
    policy = labels.get(manifests.POLICY_LABEL)
    if namespace and name:  # the initial listing too: the metrics count what exists
        metrics.observe_inference_service(
            namespace=namespace,
            name=name,
            owner="LemonPolicy" if policy else "LemonCapacityProfile",
            body=None if type == "DELETED" else dict(body),
        )
    # The initial listing (type None) is handled too: the operator may start, or its watch of
    # InferenceServices restart, after a tier became ready, and a profile whose own handlers
    # ran before that (created just as the operator started) would otherwise wait for an event
    # that already passed. Refreshing is idempotent: a status that holds already is not written.
    with metrics.reconciling("InferenceService"):
        _inference_service_changed(type, namespace, name, labels, body)


def _inference_service_changed(
    type: str | None, namespace: str | None, name: str | None, labels: kopf.Labels, body: kopf.Body
) -> None:
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
    capacity_profiles.refresh_profile(_client(), namespace=namespace, name=profile)
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
    """A run's life (:mod:`lemon_operator.lemon_runs`); then it waits, so that deleting the run
    (which stops it, behind the finalizer) can cancel it on the service and delete its trace."""
    namespace, name = _named(namespace, name)
    assert profile_index is not None  # kopf passes every index to every handler
    try:
        # a shallow copy: kopf replaces, never edits, what the body holds (and a run's spec is
        # immutable)
        await _drive_run(namespace=namespace, body=dict(body), profile_index=profile_index)
        await asyncio.Future()  # until kopf stops the daemon
    except asyncio.CancelledError:
        reason = stopped.reason
        if reason is not None and reason & kopf.DaemonStoppingReason.RESOURCE_DELETED:
            status = dict(body.get("status") or {})
            await _run_deleted(namespace=namespace, name=name, uid=str(uid), status=status)
        raise


@metrics.reconciled("LemonRun")
async def _drive_run(
    *,
    namespace: str,
    body: dict[str, Any],
    profile_index: kopf.Index[tuple[str, str], dict[str, Any]],
) -> None:
    """The daemon's work on a run, from start to end (its TTL included); not its wait after."""

    def profile_of(profile: str) -> dict[str, Any] | None:
        return next(iter(profile_index.get((namespace, profile), [])), None)

    await lemon_runs.drive_run(_client(), _service(), body=body, profile_of=profile_of)


@metrics.reconciled("LemonRun")
async def _run_deleted(*, namespace: str, name: str, uid: str, status: dict[str, Any]) -> None:
    await lemon_runs.delete_run(
        _client(), _service(), namespace=namespace, name=name, uid=uid, status=status
    )


@kopf.timer(*BUDGET, interval=lemon_budgets.SYNC_S, backoff=BACKOFF)
@metrics.reconciled("LemonBudget")
async def budget_sync(namespace: str | None, name: str | None, body: kopf.Body, **_: Any) -> None:
    """A namespace's budget: told to the service, its window read back into status."""
    _named(namespace, name)
    await lemon_budgets.sync_budget(_client(), _service(), body=copy.deepcopy(dict(body)))


@kopf.on.delete(*BUDGET, optional=True)
def budget_deleted(namespace: str | None, name: str | None, **_: Any) -> None:
    namespace, name = _named(namespace, name)
    lemon_budgets.budget_deleted(namespace=namespace, name=name)


def main(argv: list[str] | None = None) -> int:
    """``lemon-operator``: run the operator until interrupted."""
    parser = argparse.ArgumentParser(prog="lemon-operator", description=__doc__)
    parser.add_argument(
        "--namespace", action="append", help="watch only this namespace (repeatable)"
    )
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help=f"serve Prometheus metrics at :PORT/metrics (or ${metrics.PORT_ENV}; default off)",
    )
    args = parser.parse_args(argv)
    if args.metrics_port is not None:
        os.environ[metrics.PORT_ENV] = str(args.metrics_port)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO)
    kopf.run(
        standalone=True,
        clusterwide=not args.namespace,
        namespaces=args.namespace or (),
    )
    return 0
