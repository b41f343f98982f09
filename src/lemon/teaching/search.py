"""The search teacher: execute candidate specs per training item, keep the best by R_orch.

Candidates, in a fixed order: the template policy's team, its compute variant (maths), the
fixed teams of :mod:`lemon.policy.teams`, and every single-field mutant of the template. Each is
executed on the configured capacity profile (one reuse cache per item, so mutants re-run only
what changed; the backends may answer from the persistent call cache,
:mod:`lemon.backends.callcache`) and scored with R_orch on tier-priced worker tokens
(:mod:`lemon.pricing`); the candidate with the highest R_orch is written (ties: the first
candidate, so the order is part of the method). The row's provenance records every
candidate's reward and the tier prices used.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lemon.backends.base import Backend
from lemon.data.items import Item
from lemon.engine.executor import CallCache
from lemon.orchestration import ItemSettings, item_outcome, run_item
from lemon.policy.teams import Team, on_tier, team_spec
from lemon.policy.template import TemplateVariant, template_spec
from lemon.pricing import TierPrices, resolve_prices
from lemon.reward import RewardConfig, orchestration_rewards
from lemon.spec.models import Capacity, Spec
from lemon.spec.mutations import mutations
from lemon.spec.validation import parse_spec
from lemon.tasks import TaskKind, classify_task, task_text
from lemon.teaching.rows import Progress, TeacherStats, outcome_facts, sft_row, write_rows

__all__ = ["Candidate", "SearchSettings", "candidate_specs", "search_teacher", "team_shape"]

_TEAMS = (Team.POT, Team.CHAIN, Team.PLAN_POT, Team.STAR)


@dataclass(frozen=True, slots=True)
class Candidate:
    origin: str
    spec: Spec


def candidate_specs(task: str, limit: int, *, kind: TaskKind | None = None) -> list[Candidate]:
    """Up to ``limit`` distinct candidate specs for ``task``, in a fixed order: the template,
    its compute variant, one agent on each tier (small, medium, large), the other fixed teams,
    then the template's single-field mutants."""
    kind = kind or classify_task(task)
    _, spec, text = template_spec(task, kind=kind)
    found: list[Candidate] = [Candidate("template", spec)]
    if kind is TaskKind.MATH:
        compute = template_spec(task, kind=kind, variant=TemplateVariant.COMPUTE)[1]
        found.append(Candidate(f"template:{TemplateVariant.COMPUTE}", compute))
    # one agent on each tier, cheap to expensive: what a capacity choice alone is worth
    single = team_spec(Team.SINGLE, task, kind=kind)
    found += [
        Candidate(f"topology:{Team.SINGLE}:{tier.value}", on_tier(single, tier))
        for tier in Capacity
    ]
    found += [Candidate(f"topology:{team}", team_spec(team, task, kind=kind)) for team in _TEAMS]
    parsed = parse_spec(text)
    found += [
        Candidate(f"mutant:{m.kind.value}:{m.agent}:{m.target}", m.spec) for m in mutations(parsed)
    ]
    unique: list[Candidate] = []
    seen: set[tuple[object, ...]] = set()
    for candidate in found:
        key = team_shape(candidate.spec)
        if key not in seen:
            seen.add(key)
            unique.append(candidate)
    return unique[:limit]


def team_shape(spec: Spec) -> tuple[object, ...]:
    """What a team is, whatever its agents are called: each agent's role, duties and tier, the
    positions of the agents it reads, and which agent answers. (The template's compute variant
    and the ``plan-pot`` team are one team under two sets of names; the teacher tried it
    twice.)"""
    position = {agent.name: i for i, agent in enumerate(spec.agents)}
    agents = tuple(
        (a.role, a.duties, a.capacity.value, tuple(sorted(position[d] for d in a.depends_on)))
        for a in spec.agents
    )
    from lemon.spec.dag import compile_spec

    return (agents, position[compile_spec(spec).output])


@dataclass(frozen=True, slots=True)
class SearchSettings:
    candidates: int = 6
    max_tokens: int = 128
    concurrency: int = 2
    rewards: RewardConfig = field(default_factory=RewardConfig)
    deadline_s: float = 900.0
    prices: TierPrices | None = None
    """Tier prices of the workers' profile (None: ``rewards.tier_prices``, else the defaults);
    ``rewards.tier_prices``, when set, wins over these."""


async def search_teacher(
    items: Sequence[Item],
    *,
    backends: Mapping[Capacity, Backend],
    out: Path,
    settings: SearchSettings = SearchSettings(),
    progress: Progress | None = None,
) -> TeacherStats:
    """Execute candidate specs per item and append the best (by R_orch) as an SFT row."""
    semaphore = asyncio.Semaphore(settings.concurrency)
    workers = sorted({b.label for b in backends.values()})
    prices = settings.rewards.tier_prices or settings.prices or resolve_prices()

    async def row(item: Item, stats: TeacherStats) -> dict[str, Any] | None:
        task = task_text(item)
        run_settings = ItemSettings(
            worker_max_tokens=settings.max_tokens, deadline_s=settings.deadline_s
        )
        cache = CallCache()
        scored: list[dict[str, Any]] = []
        best: tuple[float, Candidate] | None = None
        async with semaphore:
            for candidate in candidate_specs(task, settings.candidates):
                result = await run_item(
                    item, candidate.spec, backends=backends, settings=run_settings, cache=cache
                )
                outcome = await item_outcome(item, result, spec=candidate.spec, prices=prices)
                stats.executions += 1
                stats.reused_calls += result.reused_calls
                stats.cache_hits += outcome.cache_hits
                valid = outcome.status == "succeeded"
                reward = (
                    orchestration_rewards([outcome], config=settings.rewards)[0]
                    if valid
                    else settings.rewards.invalid_reward
                )
                scored.append(
                    {
                        "origin": candidate.origin,
                        "reward": round(reward, 6),
                        **outcome_facts(outcome),
                        "status": outcome.status,
                    }
                )
                if best is None or reward > best[0]:
                    best = (reward, candidate)
        if best is None:
            return None
        chosen = next(s for s in scored if s["origin"] == best[1].origin)
        provenance = {
            "teacher": "search",
            "benchmark": item.benchmark.value,
            "chosen": best[1].origin,
            **{k: chosen[k] for k in ("reward", "success", "worker_tokens", "priced_tokens")},
            "tier_prices": prices.to_json(),
            "workers": workers,
            "candidates": scored,
        }
        stats.details.append(provenance)
        return sft_row(item.id, task, best[1].spec, provenance)

    return await write_rows(items, out=out, row=row, progress=progress)
