"""The mixed workload's report: how much a learned policy could win over the six benchmarks.

Input: for each benchmark, its train and test outcome tables (``tables/<benchmark>-train``,
``tables/<benchmark>-test``). A benchmark's **teams** are the greedy teams complete on both of
its tables (the team library of its kind); sampled columns (``sample-*``) and replicas
(``<team>-r1``, :func:`lemon.policy.columns.replica_of`) are read only as second answers.
Every choice below is made on the train tables; the test tables are read for the figures.

Per benchmark, on the test items every team answered:

- ``fixed``: every team alone; ``best_fixed``: the one team that every benchmark of the mix
  can run, chosen on the mix's train tables (equal weight per benchmark); ``max_expert``: the
  benchmark's own best team, chosen on its train table (ties to the cheaper);
- ``kind_router``: the best team of the task's kind (maths, multiple choice, code: what
  :func:`lemon.tasks.classify_task` reads from the text), chosen on the train tables of that
  kind by the rule the shipped default is chosen by (:func:`lemon.tables.choice.kind_choice`:
  the best mean R_orch, each benchmark weighing the same): LEMON's built-in default, unlike the
  max expert not told the benchmark;
- ``knn`` / ``logistic``: the text routers of :mod:`lemon.tables.routers`, one per kind, fitted
  on that kind's train items, routing at R_orch's price on cost;
- ``cascade``: a cheap team's two answers (greedy and replica); where they state the same
  answer it stands, else the max expert answers (cost: both cheap answers, plus the expert's
  where it escalated); the cheap team is chosen on train by accuracy − price · cost;
- ``self_oracle``: the max expert's two answers, right if either is (cost: both);
- ``replicated_oracle``: per item the cheapest team whose *both* answers are right; an item
  no team replicably solves goes to the max expert (its greedy outcome, at its cost), not to
  the cheapest team. Only teams with a replica count, on the items where every such team has
  one;
- ``beta``: the share of items every team fails; ``exclusive``: per team, the items only it
  solves;
- ``headroom``: replicated oracle − max expert on the same items, with its paired 95%
  interval: the most a learned policy can win here. Where the interval reaches 0, there is
  nothing above the noise.

Every method carries its accuracy, its mean full cost (tier-priced tokens), its items, and its
paired difference from ``best_fixed`` with a 95% interval (:func:`lemon.scoring.stats.
paired_bootstrap`). The report holds each benchmark's figures under its name, ``mix`` repeats
each figure over all benchmarks with equal weight per benchmark (``pooled``: every item weighs
the same), and ``benchmarks`` lists the names. Every method also carries ``vs_max_expert``
and its interval: the paired difference from the max expert on the same items.

A **policy** (:func:`policy_figure`: a ``lemon eval`` run's ``items.jsonl`` on a benchmark's
test table) joins as one more method under its name: its items' success and full cost, the
policy's own tokens included. A policy that answered only some of a benchmark's test items
counts on those; over the mix it needs every benchmark.

The normalised ``score`` of a method is
(accuracy − hull) / (replicated oracle − hull), the hull being the random mix of the fixed
teams at the method's cost.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from lemon.evals import curves
from lemon.policy.columns import COLUMNS, REPLICA_SEED
from lemon.reward import RewardConfig
from lemon.scoring.stats import paired_bootstrap
from lemon.tables.choice import kind_choice
from lemon.tables.routers import KnnRouter, LogisticRouter, route
from lemon.tables.store import Table
from lemon.tasks import TaskKind, classify_task, task_text

__all__ = [
    "Bench",
    "Figure",
    "discover",
    "load_bench",
    "markdown",
    "mixed_report",
    "plot",
    "policy_figure",
]

Array = npt.NDArray[np.float64]


def _replica(team: str) -> str:
    return f"{team}-r{REPLICA_SEED}"


def _greedy(team: str) -> bool:
    col = COLUMNS.get(team)
    return col is not None and not col.sampled


@dataclass
class Side:
    """One table's (items × teams) outcomes for a benchmark's teams."""

    table: Table
    items: list[str]
    success: Array
    cost: Array
    tasks: list[str]

    def replica(self, team: str) -> tuple[Array, Array, Array] | None:
        """The replica's success and cost per item (NaN where it has no cell) and a mask."""
        name = _replica(team)
        cells = [self.table.cell(i, name) for i in self.items]
        if not any(cells):
            return None
        mask = np.array([c is not None for c in cells])
        success = np.array([c.success if c else np.nan for c in cells], dtype=np.float64)
        cost = np.array([c.priced_tokens if c else np.nan for c in cells], dtype=np.float64)
        return success, cost, mask

    def extracted(self, team: str) -> list[Any]:
        return [getattr(self.table.cell(i, team), "extracted", None) for i in self.items]


@dataclass
class Bench:
    name: str
    kind: str
    teams: list[str]
    train: Side
    test: Side
    left_out: dict[str, str] = field(default_factory=dict)


def _side(table: Table, teams: list[str], part: str = "all") -> Side:
    from lemon.data import Benchmark
    from lemon.scoring import item_index

    items = [i for i in table.part(part) if all(table.cell(i, t) is not None for t in teams)]
    index = item_index(Benchmark(table.meta.benchmark))
    cells = [[table.cells[(i, t)] for t in teams] for i in items]
    return Side(
        table=table,
        items=items,
        success=np.array([[c.success for c in row] for row in cells], dtype=np.float64),
        cost=np.array([[c.priced_tokens for c in row] for row in cells], dtype=np.float64),
        tasks=[task_text(index[i]) for i in items],
    )


def load_bench(train: Table, test: Table, *, validation: bool = False) -> Bench:
    """A benchmark's two tables, restricted to the greedy teams complete on both.
    ``validation``: the train table alone, its fit part as the train side and its validation
    part (by template or sibling, :meth:`Table.part`) as the test side: the report on which
    choices among policy versions are made; the test table is only checked for the teams."""
    if validation:
        bench = load_bench(train, test)
        return Bench(
            bench.name, bench.kind, bench.teams, _side(train, bench.teams, "fit"),
            _side(train, bench.teams, "validation"), bench.left_out,
        )  # fmt: skip
    if train.meta.benchmark != test.meta.benchmark:
        raise ValueError(
            f"{train.path} is {train.meta.benchmark} but {test.path} is {test.meta.benchmark}"
        )
    on_train, on_test = set(train.complete_teams()), set(test.complete_teams())
    teams = [t for t in test.meta.teams if _greedy(t) and t in on_train and t in on_test]
    if not teams:
        raise ValueError(f"{test.path}: no greedy team is complete on both tables")
    left = {
        t: f"train {len(train.covered(t))}/{len(train.meta.items)}, "
        f"test {len(test.covered(t))}/{len(test.meta.items)}"
        for t in dict.fromkeys([*train.meta.teams, *test.meta.teams])
        if _greedy(t) and t not in teams
    }
    test_side = _side(test, teams)
    kind = classify_task(test_side.tasks[0]).value
    return Bench(test.meta.benchmark, kind, teams, _side(train, teams), test_side, left)


@dataclass
class Figure:
    """A method's outcome on a benchmark's items (or a subset of them)."""

    success: Array
    cost: Array
    rows: npt.NDArray[np.int64]
    """The test rows (of :attr:`Bench.test`) it covers."""
    extra: dict[str, Any] = field(default_factory=dict)


def _best(success: Array, cost: Array) -> int:
    """The column with the best accuracy, ties to the cheaper."""
    acc, spend = success.mean(axis=0), cost.mean(axis=0)
    return int(np.lexsort((spend, -np.round(acc, 12)))[0])


def _all_rows(bench: Bench) -> npt.NDArray[np.int64]:
    return np.arange(len(bench.test.items))


def _team_figure(bench: Bench, team: str) -> Figure:
    j = bench.teams.index(team)
    return Figure(bench.test.success[:, j], bench.test.cost[:, j], _all_rows(bench))


def policy_figure(bench: Bench, items: Sequence[Mapping[str, Any]]) -> Figure:
    """A policy's outcome on ``bench``'s test items from a ``lemon eval`` run's item records
    (``id``, ``correct``, ``full_cost``: the workers' tier-priced tokens plus the policy's own).
    Records of items outside the test table's complete rows are ignored; none may repeat."""
    at = {item: k for k, item in enumerate(bench.test.items)}
    seen: dict[int, tuple[float, float]] = {}
    for record in items:
        row = at.get(str(record.get("id")))
        if row is None:
            continue
        if row in seen:
            raise ValueError(f"{bench.name}: item {record['id']} is answered twice")
        cost = record.get("full_cost")
        if cost is None:
            raise ValueError(f"{bench.name}: item {record['id']} has no full_cost")
        seen[row] = (float(bool(record.get("correct"))), float(cost))
    if not seen:
        raise ValueError(f"{bench.name}: the policy answered none of the test table's items")
    rows = np.array(sorted(seen), dtype=np.int64)
    success = np.array([seen[int(r)][0] for r in rows], dtype=np.float64)
    cost = np.array([seen[int(r)][1] for r in rows], dtype=np.float64)
    return Figure(success, cost, rows, {"answered": f"{len(rows)}/{len(bench.test.items)}"})


def _kind_choices(benches: Sequence[Bench], price: float) -> dict[str, dict[str, Any]]:
    """Per kind: the teams every benchmark of the kind has, the best of them on train (equal
    weight per benchmark), and the two routers fitted on the kind's train items."""
    out: dict[str, dict[str, Any]] = {}
    for kind in dict.fromkeys(b.kind for b in benches):
        group = [b for b in benches if b.kind == kind]
        common = [t for t in group[0].teams if all(t in b.teams for b in group)]
        cols = [[b.teams.index(t) for t in common] for b in group]
        # the shipped default's rule (fixed_teams.json): the best mean R_orch on the kind's
        # train tables, each benchmark weighing the same
        best = kind_choice([b.train.table for b in group], TaskKind(kind), teams=common)["team"]
        tasks = [t for b in group for t in b.train.tasks]
        success = np.vstack([b.train.success[:, c] for b, c in zip(group, cols, strict=True)])
        cost = np.vstack([b.train.cost[:, c] for b, c in zip(group, cols, strict=True)])
        routers = {
            make().name: make().fit(tasks, success, cost) for make in (KnnRouter, LogisticRouter)
        }
        out[kind] = {"teams": common, "best": best, "routers": routers, "price": price}
    return out


def _router_figure(bench: Bench, choice: Mapping[str, Any], name: str) -> Figure:
    router = choice["routers"][name]
    pick = route(router.predict(bench.test.tasks), router.mean_cost, choice["price"])
    cols = np.array([bench.teams.index(choice["teams"][k]) for k in pick])
    rows = _all_rows(bench)
    shares = {t: round(float((pick == k).mean()), 4) for k, t in enumerate(choice["teams"])}
    return Figure(
        bench.test.success[rows, cols], bench.test.cost[rows, cols], rows, {"shares": shares}
    )


def _cascade(bench: Bench, expert: int, price: float) -> Figure | None:
    """The cheap team (chosen on train) whose two answers agree stands; else the expert."""
    best: tuple[float, str] | None = None
    for team in bench.teams:
        train = bench.train.replica(team)
        if train is None or not train[2].all() or bench.test.replica(team) is None:
            continue
        fig = _cascade_on(bench.train, bench.teams, team, expert)
        if fig is None:
            continue
        value = float(fig[0].mean() - price * fig[1].mean())
        if best is None or value > best[0]:
            best = (value, team)
    if best is None:
        return None
    found = _cascade_on(bench.test, bench.teams, best[1], expert)
    if found is None:
        return None
    success, cost, rows, escalated = found
    return Figure(success, cost, rows, {"cheap_team": best[1], "escalated": round(escalated, 4)})


def _cascade_on(
    side: Side, teams: list[str], team: str, expert: int
) -> tuple[Array, Array, npt.NDArray[np.int64], float] | None:
    replica = side.replica(team)
    if replica is None:
        return None
    _, r_cost, mask = replica
    rows = np.flatnonzero(mask)
    if not len(rows):
        return None
    j = teams.index(team)
    first = side.extracted(team)
    second = [getattr(side.table.cell(i, _replica(team)), "extracted", None) for i in side.items]
    agree = np.array([first[r] is not None and first[r] == second[r] for r in rows])
    success = np.where(agree, side.success[rows, j], side.success[rows, expert])
    cost = side.cost[rows, j] + r_cost[rows] + np.where(agree, 0.0, side.cost[rows, expert])
    return success, cost, rows, float(1 - agree.mean())


def _oracles(bench: Bench, expert: int) -> dict[str, Figure | None]:
    """The self-oracle and the replicated oracle (see the module docstring)."""
    test = bench.test
    out: dict[str, Figure | None] = {"self_oracle": None, "replicated_oracle": None}
    own = test.replica(bench.teams[expert])
    if own is not None:
        rows = np.flatnonzero(own[2])
        success = np.maximum(test.success[rows, expert], own[0][rows])
        out["self_oracle"] = Figure(success, test.cost[rows, expert] + own[1][rows], rows)
    replicas = {t: r for t in bench.teams if (r := test.replica(t)) is not None}
    if not replicas:
        return out
    mask = np.logical_and.reduce([r[2] for r in replicas.values()])
    rows = np.flatnonzero(mask)
    if not len(rows):
        return out
    names = list(replicas)
    cols = [bench.teams.index(t) for t in names]
    both = np.stack(
        [test.success[rows, j] * replicas[t][0][rows] for t, j in zip(names, cols, strict=True)],
        axis=1,
    )
    spend = np.stack([test.cost[rows, j] for j in cols], axis=1)
    solved = both.max(axis=1) >= 0.5
    cheapest = np.where(both >= 0.5, spend, np.inf).argmin(axis=1)
    success = np.where(solved, 1.0, test.success[rows, expert])
    cost = np.where(solved, spend[np.arange(len(rows)), cheapest], test.cost[rows, expert])
    out["replicated_oracle"] = Figure(
        success,
        cost,
        rows,
        {"teams_with_replica": names, "replicated_share": round(float(solved.mean()), 4)},
    )
    return out


def _diff_ci(a: Array, b: Array, weights: Array, *, seed: int) -> list[float]:
    lo, hi = paired_bootstrap(
        lambda d, w: float((d * w).sum() / w.sum()), a - b, weights, seed=seed
    )
    return [round(lo, 4), round(hi, 4)]


def _on(fig: Figure, base: Figure) -> Array:
    """``base``'s success on ``fig``'s items (``base`` covers every test row)."""
    at = {int(r): k for k, r in enumerate(base.rows)}
    return base.success[[at[int(r)] for r in fig.rows]]


def _entry(fig: Figure, base: Figure, expert: Figure, *, seed: int) -> dict[str, Any]:
    """Accuracy, cost and the paired differences from ``base`` (the best fixed team) and
    ``expert`` (the max expert) on ``fig``'s items."""
    out: dict[str, Any] = {
        "accuracy": round(float(fig.success.mean()), 4),
        "cost": round(float(fig.cost.mean()), 2),
        "n": len(fig.rows),
    }
    ones = np.ones(len(fig.rows))
    for key, other in (("vs_best_fixed", base), ("vs_max_expert", expert)):
        theirs = _on(fig, other)
        out[key] = round(float((fig.success - theirs).mean()), 4)
        out[f"{key}_ci95"] = _diff_ci(fig.success, theirs, ones, seed=seed)
    return {**out, **fig.extra}


def _rounded(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or math.isnan(x) else round(x, digits)


def mixed_report(
    benches: Sequence[Bench],
    *,
    rewards: RewardConfig | None = None,
    seed: int = 0,
    policies: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]] | None = None,
) -> dict[str, Any]:
    """Every figure of the module docstring, per benchmark and for the mix, as one object.
    ``policies``: per policy name, per benchmark, its ``lemon eval`` item records
    (:func:`policy_figure`); a benchmark a policy lacks is left out of its figures."""
    policies = policies or {}
    for name in policies:
        if name in (*METHODS, "fixed", "score", "beta"):
            raise ValueError(f"a policy cannot be named {name!r}: the report has that key")
    if not benches:
        raise ValueError("the mixed report needs at least one benchmark")
    price = (rewards or RewardConfig()).token_cost / 1000
    common = [t for t in benches[0].teams if all(t in b.teams for b in benches)]
    if not common:
        raise ValueError("no team is complete on every benchmark's tables (best_fixed needs one)")
    train_acc = np.mean(
        [[b.train.success[:, b.teams.index(t)].mean() for t in common] for b in benches], axis=0
    )
    train_cost = np.mean(
        [[b.train.cost[:, b.teams.index(t)].mean() for t in common] for b in benches], axis=0
    )
    best_fixed = common[int(np.lexsort((train_cost, -np.round(train_acc, 12)))[0])]
    kinds = _kind_choices(benches, price)
    per: dict[str, dict[str, Figure | None]] = {}
    report: dict[str, Any] = {"benchmarks": [b.name for b in benches]}
    for bench in benches:
        expert = _best(bench.train.success, bench.train.cost)
        choice = kinds[bench.kind]
        figures: dict[str, Figure | None] = {
            "best_fixed": _team_figure(bench, best_fixed),
            "max_expert": _team_figure(bench, bench.teams[expert]),
            "kind_router": _team_figure(bench, choice["best"]),
            "knn": _router_figure(bench, choice, "knn"),
            "logistic": _router_figure(bench, choice, "logistic"),
            "cascade": _cascade(bench, expert, price),
            **_oracles(bench, expert),
        }
        for name, evals in policies.items():
            records = evals.get(bench.name)
            figures[name] = None if records is None else policy_figure(bench, records)
        per[bench.name] = figures
        base, top = figures["best_fixed"], figures["max_expert"]
        assert base is not None
        assert top is not None
        solved = bench.test.success >= 0.5
        only = solved & (solved.sum(axis=1, keepdims=True) == 1)
        entry: dict[str, Any] = {
            "kind": bench.kind,
            "train_table": str(bench.train.table.path),
            "test_table": str(bench.test.table.path),
            "n_train": len(bench.train.items),
            "n_test": len(bench.test.items),
            "teams": bench.teams,
            "left_out": bench.left_out,
            "best_fixed_team": best_fixed,
            "max_expert_team": bench.teams[expert],
            "kind_router_team": choice["best"],
            "fixed": {
                t: {
                    "accuracy": round(float(bench.test.success[:, j].mean()), 4),
                    "cost": round(float(bench.test.cost[:, j].mean()), 2),
                    "exclusive": int(only[:, j].sum()),
                }
                for j, t in enumerate(bench.teams)
            },
            "beta": round(float((~solved.any(axis=1)).mean()), 4),
        }
        for name, fig in figures.items():
            entry[name] = None if fig is None else _entry(fig, base, top, seed=seed)
        entry.update(_headroom([(figures, bench)], seed=seed, weights="equal"))
        entry["score"] = _scores(entry, bench, list(policies))
        report[bench.name] = entry
    report["mix"] = _mix(benches, per, seed=seed, weights="equal")
    report["pooled"] = _mix(benches, per, seed=seed, weights="pooled")
    for part in ("mix", "pooled"):
        fixed = [(t, _mixed_team(benches, t, part)) for t in common]
        report[part]["fixed"] = {
            t: {"accuracy": round(a, 4), "cost": round(c, 2)} for t, (a, c) in fixed
        }
        report[part]["score"] = _normalised(
            report[part], curves.upper_envelope([(c, a) for _, (a, c) in fixed]), list(policies)
        )
    report["best_fixed_team"] = best_fixed
    report["policies"] = list(policies)
    report["router_price"] = price
    report["kinds"] = {
        k: {"teams": v["teams"], "kind_router_team": v["best"]} for k, v in kinds.items()
    }
    return report


def _mixed_team(benches: Sequence[Bench], team: str, how: str) -> tuple[float, float]:
    """A team's test accuracy and cost over the mix (equal weight per benchmark) or pooled."""
    acc = [float(b.test.success[:, b.teams.index(team)].mean()) for b in benches]
    cost = [float(b.test.cost[:, b.teams.index(team)].mean()) for b in benches]
    sizes = [len(b.test.items) for b in benches]
    w = np.ones(len(benches)) if how == "mix" else np.array(sizes, dtype=np.float64)
    return float(np.dot(acc, w) / w.sum()), float(np.dot(cost, w) / w.sum())


def _weighted(values: Array, weights: Array) -> float:
    return float((values * weights).sum() / weights.sum())


def _weights(benches: Sequence[Bench], sizes: Sequence[int], how: str) -> Array:
    parts = [np.full(n, 1.0 / n if how == "equal" else 1.0) for n in sizes]
    return np.concatenate(parts) if parts else np.zeros(0)


def _headroom(
    pairs: Sequence[tuple[Mapping[str, Figure | None], Bench]], *, seed: int, weights: str
) -> dict[str, Any]:
    """Replicated oracle − max expert on the oracle's items, weighted per benchmark."""
    diffs, sizes = [], []
    for figures, _ in pairs:
        oracle, expert = figures["replicated_oracle"], figures["max_expert"]
        if oracle is None or expert is None:
            return {"headroom": None, "headroom_ci95": None, "headroom_n": 0}
        diffs.append(oracle.success - expert.success[oracle.rows])
        sizes.append(len(oracle.rows))
    d = np.concatenate(diffs)
    w = _weights([b for _, b in pairs], sizes, weights)
    lo, hi = paired_bootstrap(lambda x, v: float((x * v).sum() / v.sum()), d, w, seed=seed)
    return {
        "headroom": round(float((d * w).sum() / w.sum()), 4),
        "headroom_ci95": [round(lo, 4), round(hi, 4)],
        "headroom_n": int(d.size),
    }


def _scores(
    entry: Mapping[str, Any], bench: Bench, extra: Sequence[str] = ()
) -> dict[str, float | None]:
    """(accuracy − hull at its cost) / (replicated oracle − hull there), per method."""
    points = [
        (float(bench.test.cost[:, j].mean()), float(bench.test.success[:, j].mean()))
        for j in range(len(bench.teams))
    ]
    return _normalised(entry, curves.upper_envelope(points), extra)


def _normalised(
    entry: Mapping[str, Any], hull: curves.Curve, extra: Sequence[str] = ()
) -> dict[str, float | None]:
    oracle = entry.get("replicated_oracle")
    out: dict[str, float | None] = {}
    for name in (*(m for m in METHODS if m != "replicated_oracle"), *extra):
        m = entry.get(name)
        if m is None or oracle is None or "accuracy" not in m or "accuracy" not in oracle:
            out[name] = None
            continue
        low = curves.curve_at(hull, m["cost"])
        gap = oracle["accuracy"] - low
        out[name] = None if gap <= 1e-12 else _rounded((m["accuracy"] - low) / gap)
    return out


def _mix(
    benches: Sequence[Bench],
    per: Mapping[str, Mapping[str, Figure | None]],
    *,
    seed: int,
    weights: str,
) -> dict[str, Any]:
    """Each method over every benchmark: equal weight per benchmark, or per item (pooled)."""
    out: dict[str, Any] = {"benchmarks": [b.name for b in benches], "weights": weights}
    for name in next(iter(per.values())):
        figs = [per[b.name][name] for b in benches]
        bases = [per[b.name]["best_fixed"] for b in benches]
        if any(f is None for f in figs):
            missing = [b.name for b, f in zip(benches, figs, strict=True) if f is None]
            out[name] = {"missing": missing}
            continue
        experts = [per[b.name]["max_expert"] for b in benches]
        success, cost, base, top, sizes = [], [], [], [], []
        for fig, b, e in zip(figs, bases, experts, strict=True):
            assert fig is not None
            assert b is not None
            assert e is not None
            success.append(fig.success)
            cost.append(fig.cost)
            base.append(_on(fig, b))
            top.append(_on(fig, e))
            sizes.append(len(fig.rows))
        s, c = np.concatenate(success), np.concatenate(cost)
        f0, e0 = np.concatenate(base), np.concatenate(top)
        w = _weights(benches, sizes, weights)
        out[name] = {
            "accuracy": round(_weighted(s, w), 4),
            "cost": round(_weighted(c, w), 2),
            "n": int(s.size),
            "vs_best_fixed": round(_weighted(s - f0, w), 4),
            "vs_best_fixed_ci95": _diff_ci(s, f0, w, seed=seed),
            "vs_max_expert": round(_weighted(s - e0, w), 4),
            "vs_max_expert_ci95": _diff_ci(s, e0, w, seed=seed),
        }
    out.update(_headroom([(per[b.name], b) for b in benches], seed=seed, weights=weights))
    beta = [float((~(b.test.success >= 0.5).any(axis=1)).mean()) for b in benches]
    sizes_all = [len(b.test.items) for b in benches]
    out["beta"] = round(
        float(np.mean(beta))
        if weights == "equal"
        else float(np.dot(beta, sizes_all) / sum(sizes_all)),
        4,
    )
    return out


CORE_TEAMS = ("single-small", "single-medium", "single-large")
"""The teams every kind's library has: a benchmark joins the default mix once they are complete
on both of its tables."""


def ready(bench: Bench) -> str | None:
    """Why ``bench`` cannot join the mix yet (a core team incomplete), or None."""
    missing = [t for t in CORE_TEAMS if t not in bench.teams]
    return f"not complete on both tables yet: {', '.join(missing)}" if missing else None


def discover(directory: str, benchmarks: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """The (train, test) table directories under ``directory``: every ``<benchmark>-test``
    with a ``<benchmark>-train`` beside it (or only ``benchmarks``, in that order)."""
    from pathlib import Path

    root = Path(directory)
    names = benchmarks or sorted(
        p.name.removesuffix("-test")
        for p in root.glob("*-test")
        if (p / "table.json").is_file()
        and (p.with_name(p.name.removesuffix("-test") + "-train") / "table.json").is_file()
    )
    found = []
    for name in names:
        train, test = root / f"{name}-train", root / f"{name}-test"
        for path in (train, test):
            if not (path / "table.json").is_file():
                raise ValueError(f"{path}: no outcome table (table.json)")
        found.append((str(train), str(test)))
    if not found:
        raise ValueError(f"{directory}: no <benchmark>-test table with a -train beside it")
    return found


def _cell(entry: Mapping[str, Any] | None) -> str:
    if entry is None:
        return "–"
    if "missing" in entry:
        return f"(missing: {', '.join(entry['missing'])})"
    lo, hi = entry["vs_best_fixed_ci95"]
    return (
        f"{entry['accuracy']:.3f} at {entry['cost']:.0f} "
        f"({entry['vs_best_fixed']:+.3f} [{lo:+.3f}, {hi:+.3f}])"
    )


METHODS = (
    "best_fixed", "max_expert", "kind_router", "knn", "logistic", "cascade", "self_oracle",
    "replicated_oracle",
)  # fmt: skip


def markdown(report: Mapping[str, Any]) -> str:
    """The report as a markdown table: one row per method, one column per benchmark and mix."""
    benches = list(report["benchmarks"])  # their entries sit at the top level
    cols = [*benches, "mix"]
    on = "train" if report.get("part") != "validation" else "the fit parts"
    head = (
        "Accuracy at mean full cost (tier-priced tokens), and the paired difference from the "
        f"best single fixed team ({report['best_fixed_team']}, chosen on {on}) with its 95% "
        "interval. mix: equal weight per benchmark."
    )
    if report.get("part") == "validation":
        head = (
            "**On the validation parts of the train tables** (by template or sibling; every "
            "choice is made on the fit parts), where policy versions are chosen; not the test "
            "tables. " + head
        )
    lines = [head, "", "| method | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    parts = {**{b: report[b] for b in report["benchmarks"]}, "mix": report["mix"]}
    for name in (*METHODS, *report.get("policies", [])):
        lines.append(f"| {name} | " + " | ".join(_cell(parts[c].get(name)) for c in cols) + " |")
    lines.append(
        "| beta (every team fails) | " + " | ".join(f"{parts[c]['beta']:.3f}" for c in cols) + " |"
    )
    row = []
    for c in cols:
        h, ci = parts[c].get("headroom"), parts[c].get("headroom_ci95")
        row.append(
            "–"
            if h is None
            else f"{h:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}] (n {parts[c]['headroom_n']})"
        )
    lines.append("| **headroom** (replicated oracle − max expert) | " + " | ".join(row) + " |")
    teams = " | ".join(f"{report[b]['max_expert_team']}" for b in benches)
    lines.append(f"| max expert's team | {teams} | |")
    counted = []
    for b in benches:
        oracle = report[b].get("replicated_oracle") or {}
        with_replica = oracle.get("teams_with_replica")
        counted.append(
            "–" if with_replica is None else f"{len(with_replica)} of {len(report[b]['teams'])}"
        )
    lines.append(
        f"| teams the replicated oracle counts (with a replica) | {' | '.join(counted)} | |"
    )
    partial = [
        b
        for b, c in zip(benches, counted, strict=True)
        if c != "–" and c.split(" of ")[0] != c.split(" of ")[1]
    ]
    if partial:
        lines += [
            "",
            f"On {', '.join(partial)} not every team has its replica yet: the replicated oracle "
            "(and the headroom) counts only the teams that do, a lower bound of the full one.",
        ]
    return "\n".join(lines)


def plot(report: Mapping[str, Any], path: str) -> None:
    """Accuracy against full cost, one panel per benchmark and one for the mix: the fixed
    teams' hull, each fixed team, each method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parts = {**{b: report[b] for b in report["benchmarks"]}, "mix": report["mix"]}
    fig, axes = plt.subplots(1, len(parts), figsize=(3.2 * len(parts), 3.4), dpi=110, squeeze=False)
    for ax, (name, part) in zip(axes[0], parts.items(), strict=True):
        fixed = part["fixed"]
        hull = curves.upper_envelope([(v["cost"], v["accuracy"]) for v in fixed.values()])
        ax.plot([p[0] for p in hull], [p[1] for p in hull], "--", color="grey", lw=1)
        for team, v in fixed.items():
            ax.plot(v["cost"], v["accuracy"], "o", color="grey", ms=3)
            ax.annotate(
                team,
                (v["cost"], v["accuracy"]),
                fontsize=5,
                xytext=(2, 2),
                textcoords="offset points",
            )
        methods = [*METHODS, *report.get("policies", [])]
        for method, marker in zip(methods, "sDv^<>*PXhH8p" * 2, strict=False):
            m = part.get(method)
            if m and "accuracy" in m:
                ax.plot(m["cost"], m["accuracy"], marker, ms=6, label=method)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("tier-priced tokens / item", fontsize=7)
        ax.tick_params(labelsize=6)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("accuracy")
    axes[0][-1].legend(fontsize=5, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
