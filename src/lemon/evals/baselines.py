"""Baselines, runnable by the same engine: a fixed team, how many times it is sampled.

- ``single``: one solver with chain-of-thought (:mod:`lemon.policy.teams`).
- ``sc3``, ``sc5``: self-consistency: the single agent sampled k times (temperature 0.7,
  seeds 0..k-1), majority vote over the extracted answers (ties: the earliest sample).
- ``sc-budget``: self-consistency with k chosen so that k × (tokens of one sample) stays within
  a token budget (``--budget``), at least 1.
- ``chain``, ``star``, ``tree``, ``debate``, ``pot``, ``plan-pot``: the fixed teams of
  :mod:`lemon.policy.teams`, run once. On numeric tasks a programmer's answer is prefilled with
  an open code block and ``answer = `` (:func:`lemon.tasks.item_prefills`).
- ``template``: the template policy's team (:mod:`lemon.policy.template`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lemon.policy.teams import Team, team_spec
from lemon.policy.template import template_spec
from lemon.spec.models import Spec
from lemon.tasks import TaskKind

__all__ = ["BASELINES", "Baseline", "baseline_spec"]


@dataclass(frozen=True, slots=True)
class Baseline:
    name: str
    description: str
    samples: int | Literal["budget"] = 1
    """1: one run; k: self-consistency over k sampled runs; "budget": k from a token budget."""
    team: Team | None = Team.SINGLE
    """The fixed team it runs; None: the template policy's team."""


BASELINES: dict[str, Baseline] = {
    b.name: b
    for b in [
        Baseline("single", "one agent with chain-of-thought (medium tier)"),
        Baseline("sc3", "self-consistency: 3 samples, majority vote", samples=3),
        Baseline("sc5", "self-consistency: 5 samples, majority vote", samples=5),
        Baseline("sc-budget", "self-consistency with k matched to a token budget", "budget"),
        Baseline("chain", "planner -> solver -> verifier", team=Team.CHAIN),
        Baseline("star", "three solvers -> aggregator", team=Team.STAR),
        Baseline("tree", "planner -> two solvers -> a verifier each -> aggregator", team=Team.TREE),
        Baseline(
            "debate", "three solvers, three revisers reading all, aggregator", team=Team.DEBATE
        ),
        Baseline("template", "the template policy's team for the task kind", team=None),
        Baseline(
            "pot",
            "programmer -> python_executor (program of thought, run in the sandbox)",
            team=Team.POT,
        ),
        Baseline(
            "plan-pot", "planner -> programmer -> python_executor -> verifier", team=Team.PLAN_POT
        ),
    ]
}


def baseline_spec(name: str, task: str, *, kind: TaskKind | None = None) -> Spec:
    """The spec a baseline runs for ``task`` (self-consistency presets run ``single`` k times)."""
    if name not in BASELINES:
        raise KeyError(f"unknown baseline {name!r} (known: {', '.join(BASELINES)})")
    team = BASELINES[name].team
    if team is None:
        return template_spec(task, kind=kind)[1]
    return team_spec(team, task, kind=kind)
