"""What a search teacher's rows say about the teams it tried (``lemon teacher summary``).

Every row :func:`~lemon.teaching.search.search_teacher` writes records each candidate's reward,
success and (tier-priced) tokens. Summed over the rows: per candidate, its accuracy, mean reward
and cost and how often it was chosen; over the items, the best candidate's accuracy (the upper
bound a per-item choice could reach among these candidates) and how far the chosen candidate's
reward is above the template team's. That is the signal SFT on these rows can learn: where it
is zero (every team fails, or the template always wins), there is nothing to learn.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["CandidateFigures", "SearchSummary", "summarize_search"]

TEMPLATE = "template"


@dataclass(frozen=True, slots=True)
class CandidateFigures:
    origin: str
    items: int
    accuracy: float
    mean_reward: float
    mean_tokens: float
    mean_priced_tokens: float
    chosen: int
    """Items on which this candidate had the best reward (ties: the first, as the search)."""


@dataclass(frozen=True, slots=True)
class SearchSummary:
    items: int
    candidates: tuple[CandidateFigures, ...]
    """In the order the search tried them."""
    best_accuracy: float
    """Share of items on which at least one candidate succeeded."""
    chosen_accuracy: float
    """Share of items on which the chosen (highest-reward) candidate succeeded."""
    chosen_over_template: float | None
    """Mean reward of the chosen candidate minus the template's (None: no template scored)."""
    template_chosen: int

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["candidates"] = [asdict(c) for c in self.candidates]
        return data


def summarize_search(rows: Iterable[Mapping[str, Any]]) -> SearchSummary:
    """Summarize search-teacher rows (each with ``provenance.candidates``); a row of another
    teacher, or one without scored candidates, is a ``ValueError`` naming its id."""
    per: dict[str, list[Mapping[str, Any]]] = {}
    best_success: list[float] = []
    chosen_success: list[float] = []
    gaps: list[float] = []
    chosen_count: dict[str, int] = {}
    for row in rows:
        provenance = row.get("provenance") or {}
        scored = provenance.get("candidates")
        if provenance.get("teacher") != "search" or not scored:
            raise ValueError(f"row {row.get('id')!r} is not a search-teacher row with candidates")
        chosen = provenance["chosen"]
        chosen_count[chosen] = chosen_count.get(chosen, 0) + 1
        for entry in scored:
            per.setdefault(entry["origin"], []).append(entry)
        best_success.append(max(float(entry["success"]) for entry in scored))
        chosen_success.append(float(provenance["success"]))
        template = next((e for e in scored if e["origin"] == TEMPLATE), None)
        if template is not None:
            gaps.append(float(provenance["reward"]) - float(template["reward"]))
    if not best_success:
        raise ValueError("no rows to summarize")
    figures = tuple(
        CandidateFigures(
            origin=origin,
            items=len(entries),
            accuracy=round(statistics.fmean(float(e["success"]) for e in entries), 4),
            mean_reward=round(statistics.fmean(float(e["reward"]) for e in entries), 4),
            mean_tokens=round(statistics.fmean(float(e["worker_tokens"]) for e in entries), 1),
            mean_priced_tokens=round(
                statistics.fmean(
                    float(e.get("priced_tokens", e["worker_tokens"])) for e in entries
                ),
                1,
            ),
            chosen=chosen_count.get(origin, 0),
        )
        for origin, entries in per.items()
    )
    return SearchSummary(
        items=len(best_success),
        candidates=figures,
        best_accuracy=round(statistics.fmean(best_success), 4),
        chosen_accuracy=round(statistics.fmean(chosen_success), 4),
        chosen_over_template=round(statistics.fmean(gaps), 4) if gaps else None,
        template_chosen=chosen_count.get(TEMPLATE, 0),
    )
