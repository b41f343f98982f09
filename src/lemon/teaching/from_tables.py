"""Teacher rows from an outcome table: per item, the team with the best R_orch at full cost.

For every item of a (train) table and every candidate team it holds, R_orch
(:mod:`lemon.reward`) of the team's recorded outcome (the cell read back as the
:class:`~lemon.orchestration.ItemOutcome` it was projected from,
:meth:`lemon.tables.store.Cell.outcome`): success, the workers' tier-priced tokens, and the
tokens the policy itself would spend writing that team's spec (its prompt and the
spec's canonical text, priced at the policy's price), structure. The best team (ties: the
first in the table's team order) becomes the item's SFT row, in the chosen prompt format. Items
where no team succeeded say nothing about which team pays: they are dropped (``min_success``)
and counted. No model runs: the table is the teacher.

Cost-sensitive rows (``cost_sensitive=True``): every team of a kept item becomes a row, weighted
by its reward above the item's worst team's, ``w_ij = R_ij - min_k R_ik`` (``provenance.weight``;
:func:`weighted_copies` turns weights into copies). Weighted likelihood then has the
Bayes-optimal argmax: for items the policy cannot tell apart, p(team) is proportional to the sum
of their weights, so greedy decoding writes the team with the best total reward over those items
(the best fixed team when it reads nothing, the best team per item when it reads everything),
where plain SFT on the best team per item learns the most frequent winner, which can be a team
no one should pick on average.

Cost weights (``cost_weights``, with the v3 prompt that states the weight): each item is taught
once per weight, R_orch's ``token_cost`` set to that weight and the weight written in the
prompt, so one policy learns the whole accuracy–cost curve: which team pays at which price.

Router rows (:func:`router_teacher_rows`): the teacher is a text router fitted on the tables
(:mod:`lemon.tables.routers`, one per task kind over all of the kind's tables), cross-fitted:
each item's row is the team the router trained on the *other* folds' items picks for it, the
one with the best predicted R_orch (its predicted success minus the team's mean cost penalty at
the row's weight). Every item is taught one team per weight, failed or not: a crisp target that
a short SFT learns, where the cost-sensitive mixture of every team teaches its mode.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lemon.orchestration import ItemOutcome
from lemon.policy.columns import column
from lemon.policy.prompt import PROMPT_FORMAT, policy_messages, spec_completion
from lemon.reward import RewardConfig, orchestration_rewards
from lemon.tables.store import Table
from lemon.tasks import TaskKind, classify_task, task_text
from lemon.teaching.rows import outcome_facts

__all__ = [
    "ROUTERS",
    "TableTeacher",
    "estimate_tokens",
    "router_teacher_rows",
    "table_teacher_rows",
    "weighted_copies",
]

ROUTERS = ("knn", "logistic")
"""The routers :func:`router_teacher_rows` can distil (:mod:`lemon.tables.routers`)."""

TokenCounter = Callable[[list[dict[str, str]], str], int]
"""Tokens of (prompt messages, completion) under the policy's tokenizer and chat template."""


def estimate_tokens(messages: list[dict[str, str]], completion: str) -> int:
    """A tokenizer-free estimate (about four characters a token), when none is at hand."""
    return (sum(len(m["content"]) for m in messages) + len(completion)) // 4 + 8


@dataclass(slots=True)
class TableTeacher:
    rows: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0
    """Items where no team reached ``min_success``."""
    chosen: dict[str, int] = field(default_factory=dict)


def table_teacher_rows(
    table: Table,
    *,
    teams: Sequence[str] | None = None,
    rewards: RewardConfig | None = None,
    prompt_format: str = PROMPT_FORMAT,
    count_tokens: TokenCounter = estimate_tokens,
    policy_price: float = 0.0,
    min_success: float = 1.0,
    items: Sequence[str] | None = None,
    cost_sensitive: bool = False,
    cost_weights: Sequence[float] | None = None,
    out: TableTeacher | None = None,
) -> TableTeacher:
    """The SFT rows of ``table`` (every item with a cell for every team of ``teams``): the best
    team's row per item, or with ``cost_sensitive`` every team's row and its weight; with
    ``cost_weights``, all of it once per weight (see the module docstring). Rows are added to
    ``out`` when given (several tables, one set of rows)."""
    from lemon.data import Benchmark
    from lemon.scoring import item_index

    base = rewards or RewardConfig()
    names = list(
        teams or [t for t in table.teams if not t.startswith("sample-") and not _replica(t)]
    )
    index = item_index(Benchmark(table.meta.benchmark))
    out = out if out is not None else TableTeacher()
    weights: Sequence[float | None] = cost_weights if cost_weights else [None]
    for item_id, weight in (
        (i, w) for i in (items if items is not None else table.items) for w in weights
    ):
        config = base if weight is None else base.model_copy(update={"token_cost": weight})
        got = _score_item(
            table, item_id, names, index, config, weight,
            prompt_format=prompt_format, count_tokens=count_tokens, policy_price=policy_price,
        )  # fmt: skip
        if got is None:
            continue
        messages, scored = got
        if not scored:
            continue
        best = max(scored, key=lambda s: s[0])
        _, best_team, (_, best_outcome, _) = best
        if best_outcome.success < min_success:
            out.dropped += 1
            continue
        out.chosen[best_team] = out.chosen.get(best_team, 0) + 1
        candidates = {team: round(r, 6) for r, team, _ in scored}
        worst = min(r for r, _, _ in scored)
        for reward, team, (completion, outcome, policy_tokens) in (
            scored if cost_sensitive else [best]
        ):
            provenance = {
                "teacher": "table",
                "table": str(table.path),
                "benchmark": table.meta.benchmark,
                "chosen": team,
                "reward": round(reward, 6),
                **outcome_facts(outcome),
                "policy_tokens": policy_tokens,
                "candidates": candidates,
            }
            if weight is not None:
                provenance["cost_weight"] = weight
            if cost_sensitive:
                provenance["best"] = best_team
                provenance["weight"] = round(reward - worst, 6)
            out.rows.append(_row(item_id, messages, completion, provenance))
    return out


def _fold(item_id: str, folds: int) -> int:
    import hashlib

    return int(hashlib.sha256(item_id.encode("utf-8")).hexdigest()[:8], 16) % folds


def router_teacher_rows(
    parts: Sequence[tuple[Table, Sequence[str]]],
    *,
    router: str = "logistic",
    teams: Sequence[str] | None = None,
    rewards: RewardConfig | None = None,
    prompt_format: str = PROMPT_FORMAT,
    count_tokens: TokenCounter = estimate_tokens,
    policy_price: float = 0.0,
    cost_weights: Sequence[float] | None = None,
    folds: int = 5,
) -> TableTeacher:
    """One row per item of ``parts`` (table, its items) and cost weight: the team a ``router``
    fitted on the other folds of the item's task kind picks (see the module docstring). The
    candidates are the teams of ``teams`` that apply to the kind (default: the teams with a
    cell for every item of the kind); items lacking a cell for one of ``teams`` are left out
    (counted in ``dropped``). Provenance records the router's predicted success of the chosen
    team and the team's recorded outcome on the item."""
    import numpy as np

    from lemon.data import Benchmark
    from lemon.scoring import item_index
    from lemon.tables.routers import KnnRouter, LogisticRouter

    if router not in ROUTERS:
        raise ValueError(f"unknown router {router!r}: one of {', '.join(ROUTERS)}")
    if folds < 2:
        raise ValueError(f"folds must be at least 2, got {folds}")
    base = rewards or RewardConfig()
    weights: Sequence[float | None] = cost_weights if cost_weights else [None]
    # every (table, item) of a kind, and the kind's candidate teams
    by_kind: dict[str, list[tuple[Table, str, str]]] = {}
    indexes: dict[str, Mapping[str, Any]] = {}
    for table, items in parts:
        index = indexes.setdefault(
            table.meta.benchmark, item_index(Benchmark(table.meta.benchmark))
        )
        for item_id in items:
            task = task_text(index[item_id])
            by_kind.setdefault(classify_task(task).value, []).append((table, item_id, task))
    out = TableTeacher()
    for kind, entries in by_kind.items():
        tables = list({id(t): t for t, _, _ in entries}.values())
        offered = teams or list(dict.fromkeys(t for tab in tables for t in tab.teams))
        names = [
            t
            for t in offered
            if not t.startswith("sample-")
            and not _replica(t)
            and column(t).applies_to(TaskKind(kind))
            and (teams or all(tab.cell(i, t) is not None for tab, i, _ in entries))
        ]
        kept = [e for e in entries if all(e[0].cell(e[1], t) is not None for t in names)]
        out.dropped += len(entries) - len(kept)
        if not names or not kept:
            continue
        tasks = [task for _, _, task in kept]
        fold = np.array([_fold(item_id, folds) for _, item_id, _ in kept])
        for weight in weights:
            config = base if weight is None else base.model_copy(update={"token_cost": weight})
            scored_all = []
            for table, item_id, _ in kept:
                got = _score_item(
                    table, item_id, names, indexes[table.meta.benchmark], config, weight,
                    prompt_format=prompt_format, count_tokens=count_tokens,
                    policy_price=policy_price,
                )  # fmt: skip
                assert got is not None
                scored_all.append(got)
            success = np.array(
                [[o.success for _, _, (_, o, _) in sc] for _, sc in scored_all], dtype=np.float64
            )
            reward = np.array([[r for r, _, _ in sc] for _, sc in scored_all], dtype=np.float64)
            cost = success - reward  # R_orch's penalties: tokens (at this weight) and structure
            for k in sorted(set(fold.tolist())):
                train, held = fold != k, np.flatnonzero(fold == k)
                if not train.any():  # one fold holds every item: fit on all of them
                    train = np.ones_like(train)
                made = KnnRouter() if router == "knn" else LogisticRouter()
                fitted = made.fit(
                    [tasks[i] for i in np.flatnonzero(train)], success[train], cost[train]
                )
                predicted = fitted.predict([tasks[i] for i in held])
                penalty = cost[train].mean(axis=0)
                utility = predicted - penalty[None, :]
                for row, i in enumerate(held):
                    best = np.isclose(utility[row], utility[row].max())
                    j = int(np.where(best, penalty, np.inf).argmin())  # ties: the cheaper
                    messages, scored = scored_all[i]
                    r, team, (completion, outcome, policy_tokens) = scored[j]
                    table, item_id, _ = kept[i]
                    out.chosen[team] = out.chosen.get(team, 0) + 1
                    provenance: dict[str, Any] = {
                        "teacher": f"router:{router}",
                        "table": str(table.path),
                        "benchmark": table.meta.benchmark,
                        "chosen": team,
                        "predicted_success": round(float(predicted[row, j]), 6),
                        "fold": int(k),
                        "reward": round(r, 6),
                        **outcome_facts(outcome),
                        "policy_tokens": policy_tokens,
                        "candidates": {t: round(x, 6) for x, t, _ in scored},
                    }
                    if weight is not None:
                        provenance["cost_weight"] = weight
                    out.rows.append(_row(item_id, messages, completion, provenance))
    return out


def _row(
    item_id: str, messages: list[dict[str, str]], completion: str, provenance: dict[str, Any]
) -> dict[str, Any]:
    """One SFT row: the prompt, the spec as the assistant's completion, and its provenance."""
    return {
        "id": item_id,
        "prompt": messages,
        "completion": [{"role": "assistant", "content": completion}],
        "provenance": provenance,
    }


Scored = list[tuple[float, str, tuple[str, ItemOutcome, int]]]
"""Per applicable team: (R_orch, team, (spec completion, outcome, the policy's tokens))."""


def _score_item(
    table: Table,
    item_id: str,
    names: Sequence[str],
    index: Mapping[str, Any],
    config: RewardConfig,
    weight: float | None,
    *,
    prompt_format: str,
    count_tokens: TokenCounter,
    policy_price: float,
) -> tuple[list[dict[str, str]], Scored] | None:
    """The prompt of ``item_id`` (at cost weight ``weight``) and R_orch of every team of
    ``names`` that applies to its kind; None when a team has no cell for it."""
    cells = {t: table.cell(item_id, t) for t in names}
    if any(c is None for c in cells.values()):
        return None
    task = task_text(index[item_id])
    kind = classify_task(task)
    messages = policy_messages(task, format=prompt_format, cost_weight=weight)
    scored: Scored = []
    for team in names:
        col = column(team)
        if not col.applies_to(kind):
            continue
        cell = cells[team]
        assert cell is not None
        spec = col.spec(kind)
        completion = spec_completion(spec, col.output)
        policy_tokens = count_tokens(messages, completion)
        outcome = cell.outcome(spec=spec, policy_priced_tokens=policy_tokens * policy_price)
        (reward,) = orchestration_rewards([outcome], config=config)
        scored.append((reward, team, (completion, outcome, policy_tokens)))
    return messages, scored


def _replica(team: str) -> bool:
    from lemon.policy.columns import replica_of

    return replica_of(team) is not None


def weighted_copies(weights: Sequence[float], *, max_repeat: int) -> list[int]:
    """Copies of each row for weighted SFT by oversampling (cost-proportionate, Zadrozny et al.
    2003): ``round(max_repeat * w / max(weights))``, so the heaviest row appears ``max_repeat``
    times and a row of weight 0 (the item's worst team) not at all. Zero or negative weights
    only (no team differs anywhere): no copies."""
    if max_repeat < 1:
        raise ValueError(f"max_repeat must be at least 1, got {max_repeat}")
    top = max(weights, default=0.0)
    if top <= 0:
        return [0 for _ in weights]
    return [round(max_repeat * max(w, 0.0) / top) for w in weights]
