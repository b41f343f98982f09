"""A spec's cost before it runs, and the best fixed team a budget affords.

:func:`estimate_spec` estimates what a spec will spend (:class:`lemon.budget.BudgetEstimate`),
from what the project knows, and says which it used:

- ``table``: the spec is one of the fixed teams the outcome tables measured for the task's kind
  (the train tables the default team is chosen on,
  :func:`lemon.policy.fixed.kind_train_tables`), run with the tables' ``max_tokens`` and priced
  as they priced it: the team's mean worker tokens and mean tier-priced cost over each table's
  items, averaged over the tables (``tables/<name>/summary.json``);
- ``upper_bound`` otherwise: the most the spec's model agents can spend, each prompt bounded by
  its text's UTF-8 bytes (:func:`lemon.budget.prompt_bound`; a dependency's output counted as
  ``max_tokens`` tokens plus its header) and each answer by ``max_tokens``, at its tier's price.
  Tool agents spend nothing.

A mean is what a team spends on a typical item, not on every item: the executor's meter
(:mod:`lemon.engine.metering`) still holds each run to its budget.

:func:`fit_budget` checks a spec against a budget before anything runs: one whose estimate
exceeds the budget is refused (:class:`lemon.budget.BudgetRefused`, naming the budget, the
estimate and its source), or, where the request allows it, replaced by the default policy's
choice under that budget: among the fixed teams the task kind's tables measured whose mean cost
and tokens fit, the one with the best mean R_orch (the reward the shipped default is chosen by,
:mod:`lemon.tables.choice`). A budget below every measured team's mean is refused as below the
cheapest team. The figures are read from the repository's ``tables/``; an installation without
them estimates by the upper bound and has no team to fall back on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from lemon.budget import Budget, BudgetEstimate, BudgetRefused, prompt_bound
from lemon.policy.fixed import TABLES, kind_train_tables
from lemon.pricing import TierPrices
from lemon.reward import RewardConfig, orchestration_reward
from lemon.spec.formatting import format_spec
from lemon.spec.models import Spec
from lemon.spec.roles import RoleLibrary
from lemon.tasks import TaskKind

__all__ = [
    "BudgetFit",
    "TeamFigures",
    "best_team_within",
    "estimate_spec",
    "fit_budget",
    "measured_teams",
    "tables_root",
    "upper_bound",
]

_HEADER = "--- {name} ({role}) ---\n"


@dataclass(frozen=True, slots=True)
class TeamFigures:
    """A fixed team as an outcome table measured it, on one task kind."""

    team: str
    accuracy: float
    worker_tokens: float
    """Mean worker tokens a run."""
    cost: float
    """Mean tier-priced tokens a run."""
    n: int
    """Items measured."""
    reward: float
    """Mean R_orch (default weights) of the team's runs."""
    benchmark: str
    table: str
    """The summary the figures were read from (``tables/<name>/summary.json``)."""
    profile: str
    max_tokens: int
    """The table's per-agent ``max_tokens``."""

    def words(self) -> str:
        return (
            f"{self.team}: {self.accuracy:.0%} at {self.cost:.0f} tier-priced tokens and "
            f"{self.worker_tokens:.0f} worker tokens a run, the means over {self.n} "
            f"{self.benchmark} train items ({self.table})"
        )


def tables_root() -> Path | None:
    """The repository holding ``tables/`` (this source checkout), or None when installed
    without it."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / TABLES).is_dir() else None


def _same_prices(recorded: Any, prices: TierPrices) -> bool:
    if not isinstance(recorded, dict):
        return False
    try:
        return all(
            abs(float(recorded[t]) - prices.price(t)) <= 1e-4 * max(1.0, prices.price(t))
            for t in ("small", "medium", "large")
        )
    except (KeyError, TypeError, ValueError):
        return False


@cache
def _summary(path: Path, mtime: float) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def measured_teams(
    kind: TaskKind, *, prices: TierPrices, root: Path | None = None
) -> list[TeamFigures]:
    """The greedy fixed teams every train table of the kind measured on every item
    (:func:`lemon.policy.fixed.kind_train_tables`: the tables its default team is chosen on),
    each figure the mean over the tables (each benchmark weighing the same), priced as
    ``prices`` price them (a table priced otherwise gives none), cheapest first; none when the
    kind has no table or ``root`` (default: :func:`tables_root`) has none."""
    from lemon.policy.columns import column

    root = root if root is not None else tables_root()
    if root is None:
        return []
    summaries = []
    for name in kind_train_tables(root, kind):
        path = root / TABLES / name / "summary.json"
        try:
            data = _summary(path, path.stat().st_mtime)
        except OSError:
            return []
        if data is None or not _same_prices(data.get("tier_prices"), prices):
            return []
        summaries.append((name, data))
    if not summaries:
        return []
    config = RewardConfig()
    found = []
    for team in summaries[0][1].get("teams") or {}:
        try:
            col = column(team)
        except (KeyError, ValueError):
            continue  # a team this version no longer knows
        rows = [(data.get("teams") or {}).get(team) or {} for _, data in summaries]
        if not all(row.get("complete") for row in rows) or col.sampled or not col.applies_to(kind):
            continue
        spec = col.spec(kind)
        accuracy, tokens, cost = (
            sum(float(row[key]) for row in rows) / len(rows)
            for key in ("accuracy", "mean_worker_tokens", "mean_priced")
        )
        reward = orchestration_reward(
            accuracy,
            worker_tokens=round(tokens),
            priced_tokens=cost,
            agents=len(spec.agents),
            edges=sum(len(a.depends_on) for a in spec.agents),
            config=config,
        )
        found.append(
            TeamFigures(
                team=team,
                accuracy=accuracy,
                worker_tokens=tokens,
                cost=cost,
                n=sum(int(row["n"]) for row in rows),
                reward=reward,
                benchmark="+".join(str(data.get("benchmark", name)) for name, data in summaries),
                table=", ".join(
                    (TABLES / name / "summary.json").as_posix() for name, _ in summaries
                ),
                profile=str(summaries[0][1].get("profile", "")),
                max_tokens=min(int(data.get("worker_max_tokens", 0)) for _, data in summaries),
            )
        )
    return sorted(found, key=lambda f: (f.cost, f.worker_tokens, f.team))


def upper_bound(
    spec: Spec, *, task: str, roles: RoleLibrary, prices: TierPrices, max_tokens: int
) -> BudgetEstimate:
    """The most ``spec``'s agents can spend (see the module)."""
    role_of = {a.name: a.role for a in spec.agents}
    tokens = cost = 0.0
    for agent in spec.agents:
        role = roles[agent.role]
        if role.is_tool:
            continue
        prompt = prompt_bound(role.render(task=task, duties=agent.duties)) + sum(
            max_tokens + len(_HEADER.format(name=d, role=role_of[d]).encode("utf-8"))
            for d in agent.depends_on
        )
        tokens += prompt + max_tokens
        cost += (prompt + max_tokens) * prices.price(agent.capacity)
    return BudgetEstimate(
        tokens=tokens,
        cost=cost,
        source="upper_bound",
        basis=(
            f"upper bound: each model agent's prompt at most its UTF-8 bytes (+ the chat "
            f"template's allowance, each input at {max_tokens} tokens), its answer at most "
            f"max_tokens {max_tokens}, at its tier's price"
        ),
    )


def _team_of(
    spec: Spec, output: str | None, kind: TaskKind, teams: list[TeamFigures]
) -> TeamFigures | None:
    from lemon.policy.columns import column

    text = format_spec(spec, output=output)
    for figures in teams:
        team = column(figures.team).spec(kind)
        if format_spec(team, output=team.output) == text:
            return figures
    return None


def estimate_spec(
    spec: Spec,
    *,
    output: str | None = None,
    kind: TaskKind,
    task: str,
    roles: RoleLibrary,
    prices: TierPrices,
    max_tokens: int,
    teams: list[TeamFigures] | None = None,
) -> BudgetEstimate:
    """What ``spec`` is expected to spend on ``task`` (see the module): a measured team's
    means where the spec is one, run as it was measured; else the upper bound."""
    teams = teams if teams is not None else measured_teams(kind, prices=prices)
    figures = _team_of(spec, output, kind, [t for t in teams if t.max_tokens == max_tokens])
    if figures is not None:
        return BudgetEstimate(
            tokens=figures.worker_tokens,
            cost=figures.cost,
            source="table",
            basis=f"table: {figures.words()}",
        )
    return upper_bound(spec, task=task, roles=roles, prices=prices, max_tokens=max_tokens)


def best_team_within(budget: Budget, teams: list[TeamFigures]) -> TeamFigures | None:
    """The measured team with the best mean R_orch whose mean cost and tokens fit ``budget``
    (ties to the cheaper), or None."""
    fitting = [
        t
        for t in teams
        if (budget.cost is None or t.cost <= budget.cost)
        and (budget.tokens is None or t.worker_tokens <= budget.tokens)
    ]
    return max(fitting, key=lambda t: (t.reward, -t.cost), default=None)


@dataclass(frozen=True, slots=True)
class BudgetFit:
    """A spec that fits its budget: the one asked for, or the team that replaced it."""

    spec: Spec
    output: str | None
    estimate: BudgetEstimate
    replaced: str | None = None
    """Why the spec asked for was replaced (its estimate), None when it was kept."""
    origin: str | None = None
    """The replacement's origin in words (None when the spec was kept)."""


def _below_cheapest(budget: Budget, kind: TaskKind, teams: list[TeamFigures]) -> str:
    parts = []
    cheapest = min(teams, key=lambda t: t.cost)
    fewest = min(teams, key=lambda t: t.worker_tokens)
    if budget.cost is not None and budget.cost < cheapest.cost:
        parts.append(
            f"cost {budget.cost:g} is below the cheapest team measured for {kind.value} tasks "
            f"({cheapest.team}, {cheapest.cost:.0f} tier-priced tokens a run)"
        )
    if budget.tokens is not None and budget.tokens < fewest.worker_tokens:
        parts.append(
            f"tokens {budget.tokens} is below the fewest any team measured for {kind.value} "
            f"tasks spends ({fewest.team}, {fewest.worker_tokens:.0f} worker tokens a run)"
        )
    if not parts:  # each limit alone is met by some team, never both by the same one
        parts.append(f"no team measured for {kind.value} tasks fits both limits")
    return "; ".join(parts) + f" ({cheapest.table})"


def fit_budget(
    spec: Spec,
    *,
    output: str | None,
    kind: TaskKind,
    task: str,
    budget: Budget,
    fallback: bool,
    roles: RoleLibrary,
    prices: TierPrices,
    max_tokens: int,
    root: Path | None = None,
) -> BudgetFit:
    """``spec`` with its estimate when it fits ``budget``; else, with ``fallback``, the best
    measured team that fits; else :class:`~lemon.budget.BudgetRefused` (see the module)."""
    teams = measured_teams(kind, prices=prices, root=root)
    estimate = estimate_spec(
        spec,
        output=output,
        kind=kind,
        task=task,
        roles=roles,
        prices=prices,
        max_tokens=max_tokens,
        teams=teams,
    )
    overruns = estimate.overruns(budget)
    if not overruns:
        return BudgetFit(spec, output, estimate)
    over = f"the spec's estimate exceeds {budget.label()}: {'; '.join(overruns)} ({estimate.basis})"
    usable = [t for t in teams if t.max_tokens == max_tokens]
    if not fallback:
        best = best_team_within(budget, usable)
        if best is not None:
            hint = (
                f"; with the fallback allowed (--budget-fallback) it would run {best.team} "
                f"({best.cost:.0f} tier-priced tokens a run)"
            )
        elif usable:
            hint = f"; no team fits it either: {_below_cheapest(budget, kind, usable)}"
        else:
            hint = ""
        raise BudgetRefused(f"{over}{hint}", budget=budget, estimate=estimate)
    if not usable:
        why = (
            f"no outcome table measured teams for {kind.value} tasks at max_tokens {max_tokens} "
            "and these tier prices"
        )
        raise BudgetRefused(
            f"{over}; no team to fall back on: {why}", budget=budget, estimate=estimate
        )
    best = best_team_within(budget, usable)
    if best is None:
        raise BudgetRefused(
            f"{budget.label()} fits no team: {_below_cheapest(budget, kind, usable)}",
            budget=budget,
            estimate=estimate,
        )
    from lemon.policy.columns import column

    team = column(best.team).spec(kind)
    return BudgetFit(
        team,
        team.output,
        BudgetEstimate(
            tokens=best.worker_tokens,
            cost=best.cost,
            source="table",
            basis=f"table: {best.words()}",
        ),
        replaced=over,
        origin=(
            f"best fixed team within {budget.label()} for {kind.value} tasks: {best.words()}; "
            f"it replaced the spec asked for, whose estimate exceeds the budget"
        ),
    )
