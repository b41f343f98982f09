"""The best fixed team per task kind, read from the project's own outcome tables.

``fixed_teams.json`` (beside this module; generated from ``tables/`` by
``python -m lemon.generate`` through :func:`lemon.tables.choice.choose_fixed_teams`, never
edited by hand) names, for each task kind, the candidate team
with the best mean R_orch over that kind's train tables, each benchmark weighing the same
(:mod:`lemon.tables.choice`: the default reward weights, the team's recorded success,
tier-priced cost and structure), with the figures it was chosen on and the tables it was read
from. :class:`BestTeamPolicy` writes that team's spec for a
task: ``lemon run``'s default until a learned policy beats the fixed teams, and a baseline
after. A kind no table covers gets its documented fallback (one large solver).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from lemon.data import Benchmark, answer_kind
from lemon.events import TraceWriter
from lemon.policy.inference import PolicyDecision
from lemon.spec.formatting import format_spec
from lemon.spec.models import Spec
from lemon.spec.roles import RoleLibrary
from lemon.tasks import TaskKind, classify_task

__all__ = [
    "FALLBACK",
    "FIXED_TEAMS",
    "TABLES",
    "BestTeamPolicy",
    "benchmark_kind",
    "best_teams",
    "kind_train_tables",
]

FIXED_TEAMS = Path(__file__).with_name("fixed_teams.json")
TABLES = Path("tables")
"""Where ``python -m lemon.generate`` reads the train tables (relative to the repository)."""
_ANSWER_KINDS = {
    "number": TaskKind.MATH,
    "letter": TaskKind.MULTIPLE_CHOICE,
    "code": TaskKind.CODE,
}


def benchmark_kind(benchmark: str) -> TaskKind:
    """The task kind of a benchmark's items (what :func:`lemon.tasks.classify_task` reads from
    their text): maths for a numeric answer, multiple choice for a letter, code for code."""
    return _ANSWER_KINDS[answer_kind(Benchmark(benchmark))]


def kind_train_tables(root: Path, kind: TaskKind) -> list[str]:
    """The names of the finished train tables of ``kind`` under ``root``/``tables`` (``*-train``
    with a summary.json; a table stopped midway has none), in name order: the tables a kind's
    default team is chosen on (:mod:`lemon.tables.choice`) and its budgets priced on
    (:mod:`lemon.policy.estimates`)."""
    names = []
    for path in sorted((root / TABLES).glob("*-train")):
        benchmark = path.name.removesuffix("-train")
        known = benchmark in {b.value for b in Benchmark}
        if known and (path / "summary.json").is_file() and benchmark_kind(benchmark) is kind:
            names.append(path.name)
    return names


FALLBACK = {
    TaskKind.CODE: ("single-large", "programmer"),
    TaskKind.GENERAL: ("single-large", "knowledge_expert"),
}


@cache
def best_teams() -> dict[str, Any]:
    """The shipped choice per task kind (``fixed_teams.json``)."""
    data: dict[str, Any] = json.loads(FIXED_TEAMS.read_text(encoding="utf-8"))
    return data


class BestTeamPolicy:
    """Writes, for each task, the best fixed team of its kind (:func:`best_teams`)."""

    @property
    def label(self) -> str:
        return "best fixed team per task kind (outcome tables)"

    def choice(self, kind: TaskKind) -> dict[str, Any]:
        found: dict[str, Any] = best_teams()[kind.value]
        return found

    def spec(self, kind: TaskKind) -> Spec:
        from lemon.policy.columns import column

        choice = self.choice(kind)
        spec = column(choice["team"]).spec(kind)
        role = choice.get("role")
        if role:  # a fallback names its solver's role
            agents = [a.model_copy(update={"role": role}) for a in spec.agents]
            spec = spec.model_copy(update={"agents": agents})
        return spec

    def origin(self, kind: TaskKind) -> str:
        choice = self.choice(kind)
        if choice.get("source") is None:
            return (
                f"best fixed team for {kind.value} tasks: {choice['team']} (no table covers them)"
            )
        return (
            f"best fixed team for {kind.value} tasks: {choice['team']} ({choice['accuracy']:.0%} "
            f"at {choice['cost']:.0f} tier-priced tokens on {choice['n']} {choice['benchmark']} "
            f"train items; {choice['source']})"
        )

    async def write_spec(
        self,
        task: str,
        *,
        kind: TaskKind | None = None,
        roles: RoleLibrary | None = None,
        trace: TraceWriter | None = None,
    ) -> PolicyDecision:
        kind = kind or classify_task(task)
        spec = self.spec(kind)
        return PolicyDecision(spec, spec.output, self.origin(kind), kind, format_spec(spec))

    async def aclose(self) -> None:
        return
