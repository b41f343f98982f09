"""Handlers for ``LemonRun``: start the run when it can start, hand it to the orchestration
service, follow it to the end, record the answer; cancel it when it is deleted.

Each run is one coroutine (:class:`RunDriver`, a kopf daemon) on the operator's event loop, but
nothing executes there: the service runs the agents, the coroutine awaits its gRPC answers, and
the synchronous API-server writes go to a thread pool of their own. One slow task holds up no
other object's reconciliation. The driver reads nothing it already holds: the run's body comes
from kopf, capacity profiles from kopf's in-memory index; only a ``specRef``'s LemonSpec or a
``policyRef``'s LemonPolicy is read from the API server. Per run that leaves the finalizer
(kopf's), the trace ConfigMap and the final status as writes, plus a ``Running`` status for
runs that last longer than :data:`RUNNING_AFTER_S` (a quicker run goes straight to its end).

Exactly once: the run id is the object's uid, known before the first call and the same after
any restart, and the service executes a run id once (a repeated ``SubmitRun`` answers the run
it already has, across its own restarts too when it keeps a run journal:
:mod:`lemon_service.run_journal`). A run not yet Running is submitted (again) after a restart:
harmless whether or not an earlier submit reached the service. A Running run is re-attached
(``GetRun``); if the service no longer knows it (it restarted without a journal), the run fails
with reason ``ServiceLostRun`` and is never submitted again.

Pending, with the reason in ``status.message`` and the conditions: ``NoService``,
``SpecNotFound``, ``SpecInvalid`` (a referenced LemonSpec; an invalid inline spec fails at
once), ``PolicyNotFound``, ``PolicyNotReady``, ``ProfileNotFound``, ``ProfileInvalid``,
``TiersNotReady``, ``ServiceUnavailable``, ``NamespaceBudgetAmbiguous`` (two LemonBudgets),
``NamespaceBudgetInvalid``. Each is checked again about every second (backing off
to ten), so the run starts soon after what it waits for is there. A spec on a tier its profile
does not have fails at once (``TierNotInProfile``): a tier a profile does not serve is never
waited for (:mod:`lemon_operator.run_plans`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from pydantic import ValidationError

from lemon.pricing import DEFAULT_TIER_PRICES, TierPrices
from lemon.resources import CapacityProfileSpec
from lemon.resources.lemon_run import TERMINAL_PHASES, RunPhase
from lemon_operator import kube, manifests, specs, statuses
from lemon_operator.reconciling import Observed
from lemon_operator.run_plans import (
    Ready,
    Refused,
    Waiting,
    default_policy,
    namespace_budget,
    plan_run,
    referenced,
    task_only,
)
from lemon_operator.run_results import (
    ServiceRun,
    failure_of,
    finished_status,
    pending_status,
    refused_status,
    running_status,
    trace_text,
)
from lemon_operator.service import Lost, Rejected, Service, Unavailable

__all__ = ["RUNNING_AFTER_S", "RunDriver", "delete_run", "drive_run"]

log = logging.getLogger(__name__)
POLL_S = 1.0
MAX_POLL_S = 10.0
WAIT_S = 30.0
"""How long one GetRun waits for the run to finish before asking again."""
RUNNING_AFTER_S = 2.0
"""A run still going this long after the service accepted it is recorded ``Running``."""
_POOL = ThreadPoolExecutor(max_workers=32, thread_name_prefix="lemon-runs")
T = TypeVar("T")
Body = Mapping[str, Any]
ProfileLookup = Callable[[str], Body | None]


async def _blocking(call: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """A synchronous API-server call, off the event loop."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_POOL, functools.partial(call, *args, **kwargs))


def _prices(found: Body | None) -> TierPrices:
    """A profile's prices, relative to its medium tier's (tier-priced tokens; the default
    prices when it is gone or invalid)."""
    try:
        spec = CapacityProfileSpec.model_validate((found or {}).get("spec") or {})
    except ValidationError:
        return DEFAULT_TIER_PRICES
    return spec.tier_prices()


class RunDriver:
    """One run's life in the operator (see the module's docstring)."""

    def __init__(
        self,
        client: kube.Client,
        service: Service | None,
        *,
        body: Body,
        profile_of: ProfileLookup,
    ) -> None:
        self.client = client
        self.service = service
        self.body = body
        self.metadata: Body = body["metadata"]
        self.run = Observed.of(kube.RUNS, body)
        self.namespace, self.name, self.uid = self.run.namespace, self.run.name, self.run.uid
        self.generation = self.run.generation
        self.status: dict[str, Any] = dict(self.run.status)
        self.profile_of = profile_of
        self.prices: TierPrices | None = None
        self.profile = str(self.status.get("profile") or "") or None
        self.started = str(self.status.get("startTime") or "") or None

    @property
    def label(self) -> str:
        return self.run.label

    async def drive(self) -> None:
        """Run it, unless it already ended; then keep it until its TTL (if any) is over."""
        phase = self.status.get("phase")
        if phase not in TERMINAL_PHASES:
            if self.service is None:
                await self._write(
                    pending_status(
                        reason="NoService",
                        message="the operator has no orchestration service address "
                        "(LEMON_SERVICE_TARGET)",
                        tiers_ready=None,
                        generation=self.generation,
                        at=statuses.now(),
                        previous=self.status,
                    )
                )
                return
            if phase == RunPhase.RUNNING:
                await self._follow(self.service, str(self.status.get("runId") or self.uid))
            else:
                await self._start(self.service)
        await self._expire()

    async def _plan(self) -> Ready | Waiting | Refused:
        source = default = None
        found = referenced(self.body)
        if found is not None:
            kind = kube.SPECS if found[0] == "LemonSpec" else kube.POLICIES
            source = await _blocking(self.client.get, kind, namespace=self.namespace, name=found[1])
        elif task_only(self.body):  # the namespace's default LemonPolicy, if it has one
            policies = await _blocking(self.client.list, kube.POLICIES, namespace=self.namespace)
            chosen = default_policy(list(policies))
            if isinstance(chosen, Waiting):
                return chosen
            default = chosen
        budgets = await _blocking(self.client.list, kube.BUDGETS, namespace=self.namespace)
        shared = namespace_budget(list(budgets))
        if isinstance(shared, Waiting):
            return shared
        return plan_run(
            self.body, source=source, profile_of=self.profile_of, default=default, shared=shared
        )

    async def _start(self, service: Service) -> None:
        delay = POLL_S
        while True:
            plan = await self._plan()
            if isinstance(plan, Refused):
                await self._end(self._refused(plan.reason, plan.message), failed=True)
                return
            if isinstance(plan, Waiting):
                await self._pending(plan.reason, plan.message, tiers_ready=plan.tiers_ready)
                await asyncio.sleep(delay)
                delay = min(delay * 1.5, MAX_POLL_S)
                continue
            try:
                accepted = await service.submit(plan.order, wait_s=RUNNING_AFTER_S)
            except Unavailable as error:
                await self._pending("ServiceUnavailable", str(error), tiers_ready=True)
                await asyncio.sleep(delay)
                delay = min(delay * 1.5, MAX_POLL_S)
                continue
            except (Rejected, Lost) as error:
                await self._end(self._refused("Rejected", str(error)), failed=True)
                return
            log.info(
                "%s: run %s %s (%s)",
                self.label,
                accepted.run_id,
                "submitted" if accepted.created else "was already on the service: re-attached",
                accepted.phase,
            )
            self.prices, self.profile = plan.prices, plan.profile
            self.started = self.started or statuses.now()
            await self._follow(service, accepted.run_id, first=accepted)
            return

    async def _follow(
        self,
        service: Service,
        run_id: str,
        *,
        first: ServiceRun | None = None,
    ) -> None:
        """Wait for the service to finish the run (``first``: as the submit answered it, after
        up to RUNNING_AFTER_S), recording Running if it is not finished by then."""
        run = first
        if run is None or not run.finished:
            await self._write(
                running_status(
                    run_id=run_id,
                    profile=self.profile or specs.DEFAULT_PROFILE,
                    target=service.target,
                    generation=self.generation,
                    at=self.started or statuses.now(),
                    previous=self.status,
                )
            )
        while run is None or not run.finished:
            run = await self._ask(service, run_id, wait_s=WAIT_S)
            if run is None:
                return
        await self._finished(run)

    async def _ask(self, service: Service, run_id: str, *, wait_s: float) -> ServiceRun | None:
        """The run's state after at most ``wait_s``; None once it has been failed as lost."""
        delay = POLL_S
        while True:
            try:
                return await service.wait(run_id, wait_s=wait_s)
            except Lost:
                message = (
                    f"the orchestration service at {service.target} has no run {run_id} (it "
                    "restarted?); the run is not started again"
                )
                await self._end(self._refused("ServiceLostRun", message), failed=True)
                return None
            except (Unavailable, Rejected) as error:
                log.warning("%s: %s", self.label, error)
                await asyncio.sleep(delay)
                delay = min(delay * 1.5, MAX_POLL_S)

    async def _finished(self, run: ServiceRun) -> None:
        config_map = manifests.build_trace_config_map(
            self.name, namespace=self.namespace, uid=self.uid, text=trace_text(run.trace)
        )
        # False when it exists: written before an operator restart, for this same run
        await _blocking(self.client.create_config_map, body=config_map)
        prices = self.prices
        if prices is None:  # re-attached after a restart: the profile's prices now
            prices = _prices(self.profile_of(self.profile or specs.DEFAULT_PROFILE))
        fields = finished_status(
            run,
            prices=prices,
            trace=config_map["metadata"]["name"],
            generation=self.generation,
            at=statuses.now(),
            previous=self.status,
            profile=self.profile,
            started=self.started,
        )
        await self._end(fields, failed=failure_of(run) is not None)

    def _refused(self, reason: str, message: str) -> dict[str, Any]:
        return refused_status(
            reason=reason,
            message=message,
            generation=self.generation,
            at=statuses.now(),
            previous=self.status,
        )

    async def _pending(self, reason: str, message: str, *, tiers_ready: bool | None) -> None:
        await self._write(
            pending_status(
                reason=reason,
                message=message,
                tiers_ready=tiers_ready,
                generation=self.generation,
                at=statuses.now(),
                previous=self.status,
            )
        )

    async def _write(self, fields: Mapping[str, Any]) -> None:
        """Patch the status with ``fields``, unless it already says exactly that."""
        if all(self.status.get(key) == value for key, value in fields.items()):
            return
        await _blocking(
            self.client.patch_status,
            kube.RUNS,
            namespace=self.namespace,
            name=self.name,
            status=fields,
        )
        self.status.update(fields)

    async def _end(self, fields: Mapping[str, Any], *, failed: bool) -> None:
        """Record the run's end: status, a warning event if it failed, the owning LemonSpec."""
        await self._write(fields)
        message = str(fields.get("message") or "")
        log.info("%s: %s: %s", self.label, fields.get("phase"), message)
        if failed:
            ref = self.run.ref
            outcome = statuses.find_condition(fields.get("conditions") or [], "Succeeded") or {}
            reason = str(outcome.get("reason") or "Failed")
            await _blocking(
                self.client.emit_event, ref, reason=reason, message=message, warning=True
            )
        spec = (self.metadata.get("labels") or {}).get(manifests.SPEC_LABEL)
        if spec:
            await _blocking(specs.reconcile_spec, self.client, namespace=self.namespace, name=spec)

    async def _expire(self) -> None:
        """Delete the run ``ttlSecondsAfterFinished`` after it finished."""
        ttl = (self.body.get("spec") or {}).get("ttlSecondsAfterFinished")
        finished = self.status.get("completionTime")
        if ttl is None or not finished:
            return
        end = dt.datetime.fromisoformat(str(finished).replace("Z", "+00:00"))
        left = (end - dt.datetime.now(dt.UTC)).total_seconds() + int(ttl)
        if left > 0:
            await asyncio.sleep(left)
        await _blocking(
            self.client.delete_config_map,
            namespace=self.namespace,
            name=manifests.trace_config_map_name(self.name),
        )
        await _blocking(self.client.delete, kube.RUNS, namespace=self.namespace, name=self.name)
        log.info("%s: deleted (ttlSecondsAfterFinished)", self.label)


async def drive_run(
    client: kube.Client,
    service: Service | None,
    *,
    body: Body,
    profile_of: ProfileLookup,
) -> None:
    """The run's whole life; returns once nothing is left to do for it."""
    await RunDriver(client, service, body=body, profile_of=profile_of).drive()


async def delete_run(
    client: kube.Client,
    service: Service | None,
    *,
    namespace: str,
    name: str,
    uid: str,
    status: Mapping[str, Any],
) -> None:
    """A deleted run: cancel it on the service if it may be there unfinished, and delete its
    trace (owner references do that too where a garbage collector runs)."""
    if service is not None and status.get("phase") not in TERMINAL_PHASES:
        try:
            run = await service.cancel(str(status.get("runId") or uid))
            log.info("%s/%s: cancelled run %s (%s)", namespace, name, run.run_id, run.phase)
        except Lost:
            pass  # never submitted, or the service forgot it: nothing runs
        except (Unavailable, Rejected) as error:
            log.warning("%s/%s: could not cancel: %s", namespace, name, error)
    await _blocking(
        client.delete_config_map, namespace=namespace, name=manifests.trace_config_map_name(name)
    )
