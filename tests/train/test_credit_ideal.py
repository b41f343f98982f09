"""The credit maths on an ideal linear-softmax policy: a check that can fail.

Each task has six roles, each with a required tier (0, 1, 2). The policy picks a tier per role
from a softmax whose logits are a table indexed by (role, required tier): it can represent the
optimum exactly, so what is measured is only how fast each credit rule finds it. Rewards are
closed form (success 0.35 ** tiers short per role, averaged over roles, minus a cost per tier).
Global GRPO uses :func:`group_advantages`; counterfactual credit adds
:func:`field_credits` of the same module the trainer uses, on each role's own choice.
"""

from __future__ import annotations

import statistics

import torch

from lemon_train.credit import MutantScore, field_credits, group_advantages

ROLES, TIERS, GROUP, TASKS = 6, 3, 8, 8
COST = torch.tensor([0.02, 0.06, 0.16])
SHORT = 0.35


def rewards(choice: torch.Tensor, need: torch.Tensor) -> torch.Tensor:
    """``choice``, ``need``: (..., ROLES) tiers → R (...)."""
    short = (need - choice).clamp(min=0).float()
    return (SHORT**short).mean(-1) - COST[choice].sum(-1)


def expected(probs: torch.Tensor, need: torch.Tensor) -> torch.Tensor:
    """Mean R of the stochastic policy ``probs`` (tasks, ROLES, TIERS) on tasks ``need``."""
    tiers = torch.arange(TIERS)
    success = SHORT ** (need.unsqueeze(-1) - tiers).clamp(min=0).float()
    return ((probs * success).sum(-1).mean(-1) - (probs * COST).sum((-1, -2))).mean()


def run(mode: str, seed: int, steps: int = 80, lr: float = 1.0, lam: float = 4.0) -> int:
    """Steps until the policy's expected R on held-out tasks reaches 90% of R* (``steps + 1``
    if never)."""
    gen = torch.Generator().manual_seed(seed)
    logits = torch.zeros(ROLES, TIERS, TIERS)  # [role, required tier, chosen tier]
    held = torch.randint(0, TIERS, (256, ROLES), generator=gen)
    best = rewards(held, held).mean()
    roles = torch.arange(ROLES)
    for step in range(1, steps + 1):
        need = torch.randint(0, TIERS, (TASKS, ROLES), generator=gen)
        probs = torch.softmax(logits[roles, need], -1)  # (TASKS, ROLES, TIERS)
        picks = torch.multinomial(
            probs.unsqueeze(1).expand(-1, GROUP, -1, -1).reshape(-1, TIERS), 1, generator=gen
        ).view(TASKS, GROUP, ROLES)
        needs = need.unsqueeze(1).expand(-1, GROUP, -1)
        r = rewards(picks, needs)
        adv = group_advantages(r.reshape(-1), GROUP).view(TASKS, GROUP, 1).expand(-1, -1, ROLES)
        credit = torch.zeros(TASKS, GROUP, ROLES)
        if mode != "global":
            # R of every single-role change, in closed form: alt[t, g, k, w] = R with role k at w
            tiers = torch.arange(TIERS)
            part = SHORT ** (needs.unsqueeze(-1) - tiers).clamp(min=0).float() / ROLES - COST
            mine = part.gather(-1, picks.unsqueeze(-1))
            alt = (r.unsqueeze(-1).unsqueeze(-1) - mine + part).tolist()
            chosen, base = picks.tolist(), r.tolist()
            for t in range(TASKS):
                for g in range(GROUP):
                    for k in range(ROLES):
                        v = chosen[t][g][k]
                        others = [v - 1] if mode == "paper" and v else []
                        if mode != "paper":
                            others = [w for w in range(TIERS) if w != v]
                        mutants = [
                            MutantScore(("role", str(k)), "tier", alt[t][g][k][w], (k,), True)
                            for w in others
                        ]
                        found = field_credits(base[t][g], mutants, all_values=mode != "paper")
                        credit[t, g, k] = sum(c.delta for c in found)
        if mode == "flipped":
            credit = -credit
        weight = adv + lam * credit  # per-field advantage, as span_advantages adds it
        onehot = torch.nn.functional.one_hot(picks, TIERS).float()
        grad = weight.unsqueeze(-1) * (onehot - probs.unsqueeze(1))  # ∇ log π(v) · weight
        update = torch.zeros_like(logits)
        index = (roles.expand(TASKS, GROUP, -1), needs)
        update.index_put_(index, grad, accumulate=True)
        logits += lr * update / (TASKS * GROUP)
        if expected(torch.softmax(logits[roles, held], -1), held) >= 0.9 * best:
            return step
    return steps + 1


def test_two_way_credit_learns_faster_than_global_grpo_on_an_ideal_policy() -> None:
    seeds = range(3)
    global_steps = statistics.fmean(run("global", s) for s in seeds)
    two_way = statistics.fmean(run("two_way", s) for s in seeds)
    flipped = statistics.fmean(run("flipped", s) for s in seeds)
    assert two_way <= 0.8 * global_steps, (two_way, global_steps)
    # the same machinery with the credit's sign flipped learns slower than global GRPO
    assert flipped > global_steps, (flipped, global_steps)
