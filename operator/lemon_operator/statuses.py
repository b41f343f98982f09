"""Pure status helpers: conditions with stable transition times, readiness of InferenceServices.

:class:`Conditions` builds the conditions of one reconcile: the object's generation and the
reconcile's time are bound once, so each condition reads as what it says
(``conditions.false("Ready", reason="Invalid", message=...)``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from lemon.resources import Condition, ConditionStatus, TierStatus
from lemon.spec import Capacity

__all__ = [
    "Conditions",
    "condition",
    "find_condition",
    "merge_conditions",
    "now",
    "tier_status",
    "validation_message",
]


def now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def condition(
    kind: str, ok: bool | None, *, reason: str, message: str, generation: int | None, at: str
) -> Condition:
    """A condition of ``kind``; ``ok`` None means Unknown."""
    status = {
        True: ConditionStatus.TRUE,
        False: ConditionStatus.FALSE,
        None: ConditionStatus.UNKNOWN,
    }
    return Condition(
        type=kind,
        status=status[ok],
        reason=reason,
        message=message,
        last_transition_time=at,
        observed_generation=generation,
    )


@dataclass(frozen=True, slots=True)
class Conditions:
    """The conditions one reconcile records: each stamped with the object's ``generation``
    (None: not known) and the reconcile's time ``at``."""

    generation: int | None
    at: str

    def of(self, kind: str, ok: bool | None, *, reason: str, message: str) -> Condition:
        """A condition of ``kind``: True, False, or Unknown for ``ok`` None."""
        return condition(
            kind, ok, reason=reason, message=message, generation=self.generation, at=self.at
        )

    def true(self, kind: str, *, reason: str, message: str) -> Condition:
        return self.of(kind, True, reason=reason, message=message)

    def false(self, kind: str, *, reason: str, message: str) -> Condition:
        return self.of(kind, False, reason=reason, message=message)

    def unknown(self, kind: str, *, reason: str, message: str) -> Condition:
        return self.of(kind, None, reason=reason, message=message)


def validation_message(error: ValidationError) -> str:
    """A pydantic ``ValidationError`` as one line: ``field.path: message; ...``."""
    return "; ".join(
        f"{'.'.join(map(str, issue['loc']))}: {issue['msg']}" for issue in error.errors()
    )


def merge_conditions(
    previous: Sequence[Mapping[str, Any]], current: Sequence[Condition]
) -> list[dict[str, Any]]:
    """``current`` as status JSON, keeping each lastTransitionTime whose status did not change."""
    before = {entry.get("type"): entry for entry in previous}
    merged = []
    for entry in current:
        data = entry.model_dump(by_alias=True, mode="json", exclude_none=True)
        old = before.get(entry.type)
        if old is not None and old.get("status") == data["status"] and "lastTransitionTime" in old:
            data["lastTransitionTime"] = old["lastTransitionTime"]
        merged.append(data)
    return merged


def find_condition(conditions: Sequence[Mapping[str, Any]], kind: str) -> Mapping[str, Any] | None:
    return next((entry for entry in conditions if entry.get("type") == kind), None)


def tier_status(tier: Capacity, *, name: str, isvc: Mapping[str, Any] | None) -> TierStatus:
    """A tier's readiness from its InferenceService's status (KServe's Ready condition), and its
    endpoint: the cluster-local ``address.url`` where KServe reports one (what the service in
    the cluster calls), else the external ``url``."""
    status = (isvc or {}).get("status") or {}
    ready = find_condition(status.get("conditions") or [], "Ready")
    return TierStatus(
        tier=tier,
        inference_service=name,
        url=(status.get("address") or {}).get("url") or status.get("url"),
        ready=bool(ready and ready.get("status") == "True"),
    )
