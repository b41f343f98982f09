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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lemon.orchestration import ItemOutcome
from lemon.policy.columns import column
from lemon.policy.prompt import PROMPT_FORMAT, policy_messages, spec_completion
from lemon.reward import RewardConfig, orchestration_rewards
from lemon.tables.store import Table
from lemon.tasks import classify_task, task_text
from lemon.teaching.rows import outcome_facts

__all__ = ["TableTeacher", "estimate_tokens", "table_teacher_rows", "weighted_copies"]

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
        cells = {t: table.cell(item_id, t) for t in names}
        if any(c is None for c in cells.values()):
            continue
        item = index[item_id]
        task = task_text(item)
        kind = classify_task(task)
        messages = policy_messages(task, format=prompt_format, cost_weight=weight)
        scored: list[tuple[float, str, tuple[str, ItemOutcome, int]]] = []
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
            out.rows.append(
                {
                    "id": item_id,
                    "prompt": messages,
                    "completion": [{"role": "assistant", "content": completion}],
                    "provenance": provenance,
                }
            )
    return out


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
