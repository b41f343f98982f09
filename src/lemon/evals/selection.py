"""Choosing what an evaluation runs: which items (stratified by subject)."""

from __future__ import annotations

from collections.abc import Sequence

from lemon.data.items import ChoiceItem, Item

__all__ = ["stratified"]


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
