"""Choosing the best fixed team per task kind from the train tables (``fixed_teams.json``).

One rule, used wherever LEMON names "the best fixed team of a kind": :func:`kind_choice`, the
team with the best mean R_orch (the default reward weights: the team's recorded success,
tier-priced cost and structure) over the kind's train tables, each benchmark weighing the same.
:func:`choose_fixed_teams` applies it to every finished train table under ``tables/`` and is what
``python -m lemon.generate`` writes into ``src/lemon/policy/fixed_teams.json``, which
:class:`lemon.policy.fixed.BestTeamPolicy` runs (the built-in default); the mixed workload's
report (:mod:`lemon.evals.mixed`) applies it to its benchmarks' train tables for its
``kind_router``, so the report's kind router is the default LEMON ships.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lemon.policy.fixed import FALLBACK, TABLES, kind_train_tables
from lemon.tasks import TaskKind

if TYPE_CHECKING:
    from lemon.reward import RewardConfig
    from lemon.tables.store import Table

__all__ = ["choose_fixed_teams", "kind_choice", "train_tables"]


def train_tables(root: Path) -> dict[TaskKind, list[Table]]:
    """The finished train tables under ``root``/``tables`` by task kind
    (:func:`lemon.policy.fixed.kind_train_tables`: a table counts once a build has finished it;
    one stopped midway would choose on whichever items its teams happened to reach)."""
    from lemon.tables.store import Table

    return {
        kind: [Table.open(root / TABLES / name) for name in names]
        for kind in TaskKind
        if (names := kind_train_tables(root, kind))
    }


def _candidates(tables: Sequence[Table], kind: TaskKind) -> list[str]:
    """The greedy teams of ``kind`` complete on every table: a team still being built (a later
    plan line extending a table) is not chosen from, nor does it shrink the others' items."""
    from lemon.policy.columns import column

    complete = [set(t.complete_teams()) for t in tables]
    return [
        team
        for team in tables[0].teams
        if all(team in c for c in complete)
        and not column(team).sampled
        and column(team).applies_to(kind)
    ]


def kind_choice(
    tables: Sequence[Table],
    kind: TaskKind,
    teams: Sequence[str] | None = None,
    config: RewardConfig | None = None,
) -> dict[str, Any]:
    """The team of ``teams`` (default: the greedy teams of ``kind`` complete on every table)
    with the best mean R_orch over ``tables``, the train tables of one kind, each weighing the
    same (ties to the cheaper); with the figures it was chosen on, each a mean over the tables.
    :class:`ValueError` when no team or no item qualifies."""
    from lemon.policy.columns import column
    from lemon.reward import RewardConfig, orchestration_reward

    if not tables:
        raise ValueError(f"no train table for {kind.value} tasks")
    config = config or RewardConfig()
    names = list(teams) if teams is not None else _candidates(tables, kind)
    if not names:
        raise ValueError(
            f"{', '.join(str(t.path) for t in tables)}: no greedy {kind.value} team is "
            "complete on every table"
        )
    per_table: list[dict[str, tuple[float, float, float]]] = []
    counts = []
    for table in tables:
        items = [i for i in table.items if all((i, t) in table.cells for t in names)]
        if not items:
            raise ValueError(f"{table.path}: no item has a cell for every team of {names}")
        counts.append(len(items))
        figures = {}
        for team in names:
            spec = column(team).spec(kind)
            cells = [table.cells[(i, team)] for i in items]
            reward = sum(
                orchestration_reward(
                    c.success,
                    worker_tokens=c.worker_tokens,
                    priced_tokens=c.priced_tokens,
                    agents=len(spec.agents),
                    edges=sum(len(a.depends_on) for a in spec.agents),
                    config=config,
                )
                for c in cells
            ) / len(cells)
            accuracy = sum(c.success for c in cells) / len(cells)
            cost = sum(c.priced_tokens for c in cells) / len(cells)
            figures[team] = (reward, accuracy, cost)
        per_table.append(figures)

    def mean(team: str, k: int) -> float:
        return sum(f[team][k] for f in per_table) / len(per_table)

    best = max(names, key=lambda t: (round(mean(t, 0), 12), -mean(t, 2)))
    return {
        "team": best,
        "reward": round(mean(best, 0), 4),
        "accuracy": round(mean(best, 1), 4),
        "cost": round(mean(best, 2), 1),
        "n": sum(counts),
    }


def choose_fixed_teams(root: Path) -> dict[str, Any]:
    """Recompute ``fixed_teams.json`` from the finished train tables under ``root`` (the
    repository): per kind, :func:`kind_choice` over every train table of that kind."""
    from lemon.policy.columns import large_alone

    out: dict[str, Any] = {"$comment": "Generated by `python -m lemon.generate`; do not edit."}
    found = train_tables(root)
    for kind in TaskKind:
        tables = found.get(kind, [])
        if not tables:
            team, role = FALLBACK.get(kind, ("single-large", "knowledge_expert"))
            out[kind.value] = {"team": team, "role": role, "source": None}
            continue
        choice = kind_choice(tables, kind)
        # one large agent alone, where every table has it complete: the cost the choice saves
        complete = set.intersection(*(set(t.complete_teams()) for t in tables))
        alone = large_alone(t for t in tables[0].teams if t in complete)
        large = (
            [sum(t.cells[(i, alone)].priced_tokens for i in t.items) / len(t.items) for t in tables]
            if alone is not None
            else []
        )
        out[kind.value] = {
            **choice,
            "large_cost": round(sum(large) / len(large), 1) if large else None,
            "benchmark": "+".join(t.meta.benchmark for t in tables),
            "source": ", ".join((TABLES / t.path.name / "summary.json").as_posix() for t in tables),
        }
    return out
