"""Handlers for ``LemonBudget``: tell the orchestration service the namespace's budget and write
what its current window spent and has left into ``status`` (every :data:`SYNC_S` seconds, a
kopf timer).

The service holds the account (:class:`lemon.engine.metering.SharedBudget`: every run of the
namespace reserves from it before each model call), so the status is a reading of the
service's figures, never an account of its own. ``Synced`` is True with them; False with the
reason when they cannot be read: ``NoService`` (no ``LEMON_SERVICE_TARGET``),
``ServiceUnavailable``, ``NamespaceBudgetAmbiguous`` (another LemonBudget in the namespace:
its runs wait), ``NamespaceBudgetInvalid``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Mapping
from typing import Any

from lemon.resources.lemon_budget import BudgetAmounts, LemonBudgetStatus
from lemon_operator import kube, metrics, statuses
from lemon_operator.run_plans import Waiting, namespace_budget
from lemon_operator.service import BudgetWindow, Rejected, Service, Unavailable

__all__ = ["SYNC_S", "budget_status", "sync_budget"]

log = logging.getLogger(__name__)
SYNC_S = 5.0
"""How often a LemonBudget's status is read from the service."""
Body = Mapping[str, Any]


def budget_status(
    window: BudgetWindow | None,
    *,
    reason: str,
    message: str,
    generation: int | None,
    at: str,
    previous: Mapping[str, Any],
) -> dict[str, Any]:
    """The status to write: the window's figures (None: could not be read; the figures
    written before stay, as the last ones known)."""
    made = statuses.Conditions(generation, at)
    synced = (
        made.true("Synced", reason=reason, message=message)
        if window is not None
        else made.false("Synced", reason=reason, message=message)
    )
    status = LemonBudgetStatus(observed_generation=generation, message=message)
    body = status.model_dump(by_alias=True, mode="json", exclude_none=True)
    if window is not None:
        start = dt.datetime.fromtimestamp(window.window_start, dt.UTC).replace(microsecond=0)
        figures = LemonBudgetStatus(
            window_start=start.isoformat().replace("+00:00", "Z"),
            spent=BudgetAmounts(tokens=window.spent_tokens, cost=round(window.spent_cost, 3)),
            remaining=BudgetAmounts(
                tokens=window.remaining_tokens,
                cost=None if window.remaining_cost is None else round(window.remaining_cost, 3),
            ),
            runs=window.runs,
            stopped_runs=window.stopped,
        )
        body |= figures.model_dump(by_alias=True, mode="json", exclude_none=True)
        body.pop("conditions", None)
    body["conditions"] = statuses.merge_conditions(previous.get("conditions") or [], [synced])
    return body


async def sync_budget(client: kube.Client, service: Service | None, *, body: Body) -> None:
    """Tell the service the budget, read its window back, record it (status and metrics)."""
    metadata = body["metadata"]
    namespace, name = str(metadata["namespace"]), str(metadata["name"])
    generation = metadata.get("generation")
    previous = dict(body.get("status") or {})
    others = await asyncio.to_thread(client.list, kube.BUDGETS, namespace=namespace)
    limits = namespace_budget(list(others))
    window = None
    if isinstance(limits, Waiting):
        reason, message = limits.reason, limits.message
    elif limits is None:  # deleted meanwhile
        return
    elif service is None:
        reason = "NoService"
        message = "the operator has no orchestration service address (LEMON_SERVICE_TARGET)"
    else:
        try:
            window = await service.sync_budget(limits)
        except (Unavailable, Rejected) as error:
            reason, message = "ServiceUnavailable", str(error)
        else:
            reason = "Synced"
            spent = f"{window.spent_tokens} worker tokens, {window.spent_cost:.1f} tier-priced"
            message = f"{limits.name}: {spent} tokens spent this window, {window.runs} runs"
            figures: dict[str, float] = {
                "spent_tokens": window.spent_tokens,
                "spent_cost": window.spent_cost,
            }
            if window.remaining_tokens is not None:
                figures["remaining_tokens"] = window.remaining_tokens
            if window.remaining_cost is not None:
                figures["remaining_cost"] = window.remaining_cost
            metrics.observe_budget(namespace=namespace, name=name, figures=figures)
    fields = budget_status(
        window,
        reason=reason,
        message=message,
        generation=generation,
        at=statuses.now(),
        previous=previous,
    )
    if all(previous.get(key) == value for key, value in fields.items()):
        return
    await asyncio.to_thread(
        client.patch_status, kube.BUDGETS, namespace=namespace, name=name, status=fields
    )
    log.debug("LemonBudget %s/%s: %s", namespace, name, message)


def budget_deleted(*, namespace: str, name: str) -> None:
    """Forget its metrics (the service forgets nothing: a budget recreated under the same
    name continues its window)."""
    metrics.observe_budget(namespace=namespace, name=name, figures=None)
