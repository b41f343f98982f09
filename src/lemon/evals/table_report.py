"""``lemon report TABLE``: every baseline a routing claim must beat, from an outcome table.

On a test table's items (those every compared team answered), with no model call:

- every **fixed team** (one team for every item), and the best of them;
- the **random hull** of the fixed teams (:mod:`lemon.evals.curves`);
- a **kNN router** and a **logistic router** on the task text (:mod:`lemon.tables.routers`),
  trained on the train table, operating at R_orch's own price on cost (the team maximising
  p(success) − token_cost/1000 · mean cost, i.e. the expected reward), with their whole curves;
  each with the **shuffled control** (trained on outcomes paired with the wrong tasks);
- the **cascade**: k sampled medium answers (``sample-medium-1..k``); when all k agree, their
  answer, else the large team's (arXiv 2310.03094), for each k the table holds;
- **self-consistency**: the majority of the first k medium samples, for each k;
- the per-item **oracle** (cheapest successful team), an upper bound;
- any **policy** run given (``lemon eval`` run directories over the same items), at its full
  cost (its own tokens included).

Per method: accuracy with a 95% interval, mean full cost, the paired bootstrap 95% interval of
its accuracy minus the random hull's at its own cost and minus the best fixed team's, its
normalised score at its cost ((acc − hull) / (oracle − hull)), a curve score for methods with a
curve, and the routing AUROC: how well the team a method chose for each item ranks the items on
which the cheap team fails, when each item is scored by its chosen team's mean cost (``auroc``:
a fixed team's column mean over the table's items; for a policy's spec that is no table column,
or the cascade's "the samples agreed", the mean over the items sent there). A method that sends
every item to one team scores 0.5. ``auroc_capability`` scores each item by its chosen team's
accuracy instead (a column's over the table; for any other spec, on the items sent there): cost
and capability need not agree (on SVAMP, program-of-thought on medium is both cheaper and more
accurate than one medium agent). ``auroc_item_cost`` is the older score, each item ranked by
its own realized cost: it also rewards a single team whose answers run longer where it fails
(a constant policy scored 0.69 on SVAMP's test table by it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lemon.evals import curves
from lemon.policy.columns import large_alone
from lemon.reward import RewardConfig
from lemon.scoring import stats
from lemon.tables.routers import KnnRouter, LogisticRouter, auroc, route, route_curve, shuffled
from lemon.tables.store import Table

__all__ = ["Method", "TableMatrices", "load_table_matrices", "table_report"]

Array = npt.NDArray[np.float64]
SHUFFLES = 5
AGREED = "(samples agreed)"
"""The cascade's label for an item its samples answered alike (not sent on to the large team)."""


@dataclass
class TableMatrices:
    """A table's (items × teams) success and cost matrices on the items every team answered."""

    table: Table
    items: list[str]
    teams: list[str]
    success: Array
    cost: Array
    extracted: list[list[Any]]

    def column(self, team: str) -> int:
        return self.teams.index(team)


def load_table_matrices(table: Table, teams: list[str]) -> TableMatrices:
    items = [i for i in table.meta.items if all(table.cell(i, t) is not None for t in teams)]
    if not items:
        raise ValueError(f"{table.path}: no item has a cell for every team of {teams}")
    cells = [[table.cells[(i, t)] for t in teams] for i in items]
    return TableMatrices(
        table=table,
        items=items,
        teams=teams,
        success=np.array([[c.success for c in row] for row in cells], dtype=np.float64),
        cost=np.array([[c.priced_tokens for c in row] for row in cells], dtype=np.float64),
        extracted=[[c.extracted for c in row] for row in cells],
    )


@dataclass
class Method:
    name: str
    kind: str
    success: Array
    cost: Array
    """Full cost per item (workers, and the policy's own tokens for a policy)."""
    policy_cost: Array | None = None
    choice_cost: Array | None = None
    """Per item, the priced cost of the team it sent the item to (routing AUROC)."""
    choice_team: list[str] | None = None
    """Per item, the team it was sent to: a column name, or a label for anything else."""
    curve: curves.Curve | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def default_teams(table: Table) -> list[str]:
    """The greedy teams (no sampled columns) that answered every item of the table."""
    complete = table.complete_teams()
    return [t for t in complete if not t.startswith("sample-")]


def _samples(table: Table, items: list[str]) -> list[str]:
    names = [f"sample-medium-{k}" for k in range(1, 10)]
    found = []
    for name in names:
        if all(table.cell(i, name) is not None for i in items):
            found.append(name)
        else:
            break
    return found


def _sample_methods(data: TableMatrices) -> list[Method]:
    """Self-consistency over the first k medium samples and the agreement cascade to large."""
    table, items = data.table, data.items
    samples = _samples(table, items)
    methods: list[Method] = []
    alone = large_alone(data.teams)
    large = data.column(alone) if alone is not None else None
    for k in range(1, len(samples) + 1):
        success, cost, agreed = [], [], []
        for item in items:
            cells = [table.cells[(item, s)] for s in samples[:k]]
            votes: dict[Any, int] = {}
            for cell in cells:
                if cell.extracted is not None:
                    votes[cell.extracted] = votes.get(cell.extracted, 0) + 1
            winner = max(votes, key=lambda v: votes[v]) if votes else None
            pick = next((cell for cell in cells if cell.extracted == winner), cells[0])
            success.append(pick.success)
            cost.append(sum(cell.priced_tokens for cell in cells))
            agreed.append(winner is not None and votes[winner] == k)
        s, c = np.array(success), np.array(cost)
        if k > 1:
            methods.append(Method(f"sc-{k}", "self-consistency", s, c))
        if k > 1 and large is not None:
            ok = np.array(agreed)
            rows = np.arange(len(items))
            cascade = np.where(ok, s, data.success[rows, large])
            spend = c + np.where(ok, 0.0, data.cost[rows, large])
            choice = np.where(ok, c / k, data.cost[rows, large])
            methods.append(
                Method(
                    f"cascade-{k}",
                    "cascade",
                    cascade,
                    spend,
                    choice_cost=choice,
                    choice_team=[AGREED if agreed else data.teams[large] for agreed in ok],
                    extra={"escalated": round(float(1 - ok.mean()), 4)},
                )
            )
    return methods


def _tasks(table: Table, items: list[str]) -> list[str]:
    from lemon.data import Benchmark
    from lemon.scoring import item_index
    from lemon.tasks import task_text

    index = item_index(Benchmark(table.meta.benchmark))
    return [task_text(index[i]) for i in items]


def _router_methods(
    test: TableMatrices, train: TableMatrices, price: float, cheap: int
) -> list[Method]:
    train_tasks, test_tasks = _tasks(train.table, train.items), _tasks(test.table, test.items)
    methods = []
    rows = np.arange(len(test.items))
    fails = test.success[:, cheap] < 0.5
    for make in (KnnRouter, LogisticRouter):
        router = make().fit(train_tasks, train.success, train.cost)
        probabilities = router.predict(test_tasks)
        pick = route(probabilities, router.mean_cost, price)
        curve = [
            (c, a)
            for c, a, _ in route_curve(probabilities, router.mean_cost, test.success, test.cost)
        ]
        chosen_controls, capability_controls, probability_controls = [], [], []
        for seed in range(SHUFFLES):
            control = shuffled(make(), train_tasks, train.success, train.cost, seed=seed)
            p_control = control.predict(test_tasks)
            chosen = route(p_control, control.mean_cost, price)
            names = _names(test, chosen)
            chosen_controls.append(auroc(team_scores(test, test.cost[rows, chosen], names), fails))
            capability = team_scores(test, test.success[rows, chosen], names, by=test.success)
            capability_controls.append(auroc(capability, fails))
            probability_controls.append(auroc(1.0 - p_control[:, cheap], fails))
        methods.append(
            Method(
                router.name,
                "router",
                test.success[rows, pick],
                test.cost[rows, pick],
                choice_cost=test.cost[rows, pick],
                choice_team=_names(test, pick),
                curve=curve,
                extra={
                    "auroc_probability": auroc(1.0 - probabilities[:, cheap], fails),
                    "shuffled_auroc": _mean(chosen_controls),
                    "shuffled_auroc_capability": _mean(capability_controls),
                    "shuffled_auroc_probability": _mean(probability_controls),
                    "shares": {
                        t: round(float((pick == j).mean()), 4) for j, t in enumerate(test.teams)
                    },
                },
            )
        )
    return methods


def _names(data: TableMatrices, picks: npt.NDArray[np.int64]) -> list[str]:
    return [data.teams[j] for j in picks]


def team_scores(
    data: TableMatrices, choice: Array, choice_team: list[str], *, by: Array | None = None
) -> Array:
    """Each item's score for the routing AUROC: a figure of the team it was sent to, the same
    for every item sent there. ``by`` is the table's (items × teams) matrix of it (the cost by
    default; the success for ``auroc_capability``): a table column's mean over all of
    ``data``'s items. For any other label, the mean of ``choice`` (the method's own per-item
    figure) over the items that carry it."""
    matrix = data.cost if by is None else by
    groups: dict[str, list[float]] = {}
    for team, value in zip(choice_team, choice, strict=True):
        groups.setdefault(team, []).append(float(value))
    means = {
        team: float(matrix[:, data.column(team)].mean()) if team in data.teams
        else float(np.mean(values))
        for team, values in groups.items()
    }  # fmt: skip
    return np.array([means[team] for team in choice_team], dtype=np.float64)


def spec_team(text: str, data: TableMatrices) -> str:
    """The table column whose spec ``text`` is (same agents, roles, tiers, dependencies and
    output), else a label of its own: the canonical spec text, or the text itself when it is
    not a valid spec."""
    from lemon.policy.columns import column
    from lemon.spec.formatting import format_spec
    from lemon.spec.issues import SpecError
    from lemon.spec.validation import parse_spec

    try:
        parsed = parse_spec(text)
    except SpecError:
        return f"(invalid) {text.strip()}"
    for team in data.teams:
        col = column(team)
        if any(parsed.spec == col.spec(kind) for kind in col.kinds):
            return team
    return format_spec(parsed.spec, output=parsed.output)


def _mean(values: list[float | None]) -> float | None:
    valid = [v for v in values if v is not None]
    return round(float(np.mean(valid)), 4) if valid else None


def _policy_method(path: Path, data: TableMatrices) -> Method:
    from lemon.jsonl import read_records

    records = read_records(path / "items.jsonl")
    missing = [i for i in data.items if i not in records]
    if missing:
        raise ValueError(
            f"{path}: no record for {len(missing)} of the table's items ({missing[0]})"
        )
    rows = [records[i] for i in data.items]
    workers = np.array([float(r.get("priced_tokens") or r["tokens"]) for r in rows])
    policy = np.array([float(r.get("policy_priced_tokens", 0.0)) for r in rows])
    teams = {text: spec_team(text, data) for text in {str(r.get("spec") or "") for r in rows}}
    return Method(
        path.name,
        "policy",
        np.array([float(bool(r["correct"])) for r in rows]),
        workers + policy,
        policy_cost=policy,
        choice_cost=workers,
        choice_team=[teams[str(r.get("spec") or "")] for r in rows],
    )


def _intervals(
    method: Method, data: TableMatrices, best: int, *, rounds: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """The method's accuracy, its difference from the fixed teams' hull at its cost and from the
    best fixed team, each with its paired bootstrap 95% interval over items
    (:func:`lemon.scoring.stats.paired_bootstrap`; one seed, so every interval resamples the same
    items)."""

    def ci(statistic: Callable[..., float], *samples: Any) -> list[float]:
        lo, hi = stats.paired_bootstrap(statistic, *samples, rounds=rounds, seed=seed)
        return [round(lo, 4), round(hi, 4)]

    def hull_diff(success: Any, cost: Any, teams_success: Any, teams_cost: Any) -> float:
        return float(success.mean()) - curves.hull_at(teams_success, teams_cost, float(cost.mean()))

    return {
        "ci95": ci(lambda success: float(success.mean()), method.success),
        "hull_diff_ci95": ci(hull_diff, method.success, method.cost, data.success, data.cost),
        "best_diff_ci95": ci(
            lambda success, best_team: float((success - best_team).mean()),
            method.success,
            data.success[:, best],
        ),
    }


def _summary(
    method: Method,
    data: TableMatrices,
    hull: curves.Curve,
    oracle: curves.Curve,
    best: int,
    large: float,
) -> dict[str, Any]:
    acc, at = float(method.success.mean()), float(method.cost.mean())
    score = curves.normalised_score(acc, at, hull, oracle)
    out: dict[str, Any] = {
        "kind": method.kind,
        "accuracy": round(acc, 4),
        "cost": round(at, 2),
        "cost_vs_large": round(at / large, 4) if large else None,
        "hull_at_cost": round(curves.curve_at(hull, at), 4),
        "oracle_at_cost": round(curves.curve_at(oracle, at), 4),
        "hull_diff": round(acc - curves.curve_at(hull, at), 4),
        "best_diff": round(float((method.success - data.success[:, best]).mean()), 4),
        "score": None if score is None else round(score, 4),
        **_intervals(method, data, best),
    }
    if method.policy_cost is not None:
        out["policy_cost"] = round(float(method.policy_cost.mean()), 2)
        out["worker_cost"] = round(at - out["policy_cost"], 2)
    if method.curve is not None:
        value = curves.curve_score(method.curve, hull, oracle)
        out["curve_score"] = None if value is None else round(value, 4)
        out["curve"] = [[round(c, 2), round(a, 4)] for c, a in curves.upper_envelope(method.curve)]
    return out | method.extra


def table_report(
    test: Table,
    *,
    train: Table | None = None,
    teams: list[str] | None = None,
    policies: list[Path] | None = None,
    cheap_team: str | None = None,
    rewards: RewardConfig | None = None,
) -> dict[str, Any]:
    """Every baseline on ``test``'s items (routers trained on ``train``), as one JSON object."""
    teams = teams or default_teams(test)
    data = load_table_matrices(test, teams)
    cheap = data.column(cheap_team or ("single-medium" if "single-medium" in teams else teams[0]))
    fixed = [
        Method(t, "fixed", data.success[:, j], data.cost[:, j], choice_cost=data.cost[:, j])
        for j, t in enumerate(teams)
    ]
    hull_points = [(float(m.cost.mean()), float(m.success.mean())) for m in fixed]
    hull = curves.upper_envelope(hull_points)
    oracle_points = curves.oracle_curve(data.success, data.cost)
    rows = np.arange(len(data.items))
    pick = curves.oracle_choice(data.success, data.cost, 0.0)
    methods = [
        *fixed,
        Method("oracle", "oracle", data.success[rows, pick], data.cost[rows, pick],
               choice_cost=data.cost[rows, pick], choice_team=_names(data, pick),
               curve=oracle_points),
        *_sample_methods(data),
    ]  # fmt: skip
    price = (rewards or RewardConfig()).token_cost / 1000
    if train is not None:
        train_data = load_table_matrices(train, teams)
        methods += _router_methods(data, train_data, price, cheap)
    for path in policies or []:
        methods.append(_policy_method(path, data))
    best = int(np.argmax([m.success.mean() - 1e-9 * m.cost.mean() for m in fixed]))
    alone = large_alone(teams)
    large = float(data.cost[:, data.column(alone)].mean()) if alone is not None else 0.0
    fails = data.success[:, cheap] < 0.5
    summaries: dict[str, Any] = {}
    for method in methods:
        summary = _summary(method, data, hull, oracle_points, best, large)
        if method.choice_cost is not None and method.kind not in ("fixed",):
            teams_of = method.choice_team or ["?"] * len(data.items)  # one label: 0.5
            summary["auroc"] = auroc(team_scores(data, method.choice_cost, teams_of), fails)
            summary["auroc_capability"] = auroc(
                team_scores(data, method.success, teams_of, by=data.success), fails
            )
            summary["auroc_item_cost"] = auroc(method.choice_cost, fails)
            summary["teams_chosen"] = _counts(teams_of)
        summaries[method.name] = summary
    return {
        "table": str(test.path),
        "train_table": None if train is None else str(train.path),
        "benchmark": test.meta.benchmark,
        "split": test.meta.split,
        "n_items": len(data.items),
        "teams": teams,
        "left_out": {  # the table's greedy teams not compared: not (yet) answered every item
            t: f"{len(test.covered(t))}/{len(test.meta.items)} items"
            for t in test.meta.teams
            if t not in teams
            and not t.startswith("sample-")
            and len(test.covered(t)) < len(test.meta.items)
        },
        "policy_runs": [str(path) for path in policies or []],
        "cheap_team": data.teams[cheap],
        "cheap_team_fails": round(float(fails.mean()), 4),
        "best_fixed": teams[best],
        "router_price": price,
        "hull": [[round(c, 2), round(a, 4)] for c, a in hull],
        "methods": summaries,
    }


def _counts(labels: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"Outcome table {report['table']} ({report['benchmark']}/{report['split']}, "
        f"{report['n_items']} items; routers trained on {report['train_table']}). "
        f"Cost: mean tier-priced tokens per item, the policy's own included. AUROC: the "
        f"mean cost of the team the method chose for each item against "
        f"'{report['cheap_team']} fails' ({100 * report['cheap_team_fails']:.0f}% of items); "
        f"one team for every item scores 0.5. AUROC by accuracy: the same with the chosen "
        f"team's accuracy.",
        *(
            [f"Left out (incomplete): {', '.join(f'{t} ({n})' for t, n in left.items())}."]
            if (left := report.get("left_out"))
            else []
        ),
        "",
        "| method | kind | accuracy | 95% CI | cost | × large | − hull (95% CI) | score | AUROC "
        "| shuffled AUROC | AUROC by accuracy |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, m in report["methods"].items():
        lo, hi = m["ci95"]
        hlo, hhi = m["hull_diff_ci95"]
        lines.append(
            f"| {name} | {m['kind']} | {m['accuracy']:.3f} | [{lo:.3f}, {hi:.3f}] | "
            f"{m['cost']:.0f} | {_fmt(m.get('cost_vs_large'), 2)} | "
            f"{m['hull_diff']:+.3f} [{hlo:+.3f}, {hhi:+.3f}] | {_fmt(m.get('score'), 2)} | "
            f"{_fmt(m.get('auroc'), 2)} | {_fmt(m.get('shuffled_auroc'), 2)} | "
            f"{_fmt(m.get('auroc_capability'), 2)} |"
        )
    return "\n".join(lines)


def plot(report: dict[str, Any], path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5), dpi=120)
    hull = report["hull"]
    ax.plot([p[0] for p in hull], [p[1] for p in hull], "--", color="grey", label="random hull")
    markers = {"fixed": "o", "cascade": "^", "self-consistency": "s", "policy": "*", "router": "D"}
    for name, m in report["methods"].items():
        if m.get("curve") and m["kind"] in ("router", "oracle"):
            curve = m["curve"]
            style = ":" if m["kind"] == "oracle" else "-"
            ax.plot([p[0] for p in curve], [p[1] for p in curve], style, label=f"{name} curve")
        marker = markers.get(m["kind"], "x")
        ax.plot(m["cost"], m["accuracy"], marker, markersize=12 if marker == "*" else 6)
        ax.annotate(name, (m["cost"], m["accuracy"]), textcoords="offset points",
                    xytext=(4, 4), fontsize=7)  # fmt: skip
    ax.set_xlabel("mean full cost per item (tier-priced tokens)")
    ax.set_ylabel("accuracy")
    ax.set_title(f"{report['benchmark']} {report['split']}: {report['n_items']} items")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def dump(report: dict[str, Any]) -> str:
    return json.dumps(report)
