"""Choosing what an evaluation runs: which items (stratified by subject) and on which tier."""

from __future__ import annotations

from collections.abc import Sequence

from lemon.data.items import ChoiceItem, Item
from lemon.spec.models import Capacity, Spec

__all__ = ["on_tier", "stratified"]


def stratified(items: Sequence[Item]) -> list[Item]:
    """``items`` interleaved across subjects: the first item of every subject (in order of
    first appearance), then every subject's second, and so on; within a subject, file order.
    Items without a subject (every benchmark but MMLU) form one group, so their order stays."""
    groups: dict[str | None, list[Item]] = {}
    for item in items:
        subject = item.subject if isinstance(item, ChoiceItem) else None
        groups.setdefault(subject, []).append(item)
    width = max((len(g) for g in groups.values()), default=0)
    return [g[i] for i in range(width) for g in groups.values() if i < len(g)]


def on_tier(spec: Spec, tier: Capacity) -> Spec:
    """``spec`` with every agent on ``tier`` (e.g. a single agent measured on each tier)."""
    agents = [agent.model_copy(update={"capacity": tier}) for agent in spec.agents]
    return spec.model_copy(update={"agents": agents})
