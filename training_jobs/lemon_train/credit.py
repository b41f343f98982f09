"""The maths of counterfactual credit, as small pure functions (tested by hand on CPU).

GRPO gives every token of completion ``i`` the same, group-normalised advantage ``A_i``.
Counterfactual credit adds, on exactly the tokens that spell an edited field, the reward the
field was worth: for a mutant ``m`` of completion ``i`` (one field changed, character span
``s_m``), ``Δc_m = R(i) − R(m)``, and

    A[i, t] = A_i + λ_cf · Σ_{m : t ∈ tokens(s_m)} Δc_m

where ``tokens(s)`` are the completion's token positions whose decoded characters overlap
``s``. Character offsets come from the completion's own token ids (:func:`token_offsets`),
never from re-tokenising its text: a re-tokenisation may split the text differently from
what the policy sampled, and the advantage must land on the tokens that were sampled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from lemon.spec.spans import span_to_token_indices

__all__ = [
    "SpanCredit",
    "credit_matrix",
    "group_advantages",
    "span_advantages",
    "span_share",
    "span_to_token_indices",
    "token_offsets",
]


@dataclass(frozen=True, slots=True)
class SpanCredit:
    """One mutant's credit: its kind, the tokens of the edited field and ``Δc``."""

    kind: str
    tokens: tuple[int, ...]
    delta: float


def group_advantages(
    rewards: torch.Tensor, group_size: int, *, scale: bool = True, eps: float = 1e-4
) -> torch.Tensor:
    """TRL's group-normalised advantages: ``(r − mean_group) / (std_group + eps)``.

    ``rewards`` is ``(B,)`` with the ``group_size`` completions of one prompt adjacent (TRL's
    order). ``std`` is Bessel-corrected, as TRL's ``nanstd``; ``scale=False`` only centres
    (``scale_rewards="none"``).
    """
    if rewards.dim() != 1 or group_size < 1 or rewards.numel() % group_size:
        raise ValueError(
            f"rewards of shape {tuple(rewards.shape)} do not split into groups of {group_size}"
        )
    grouped = rewards.view(-1, group_size)
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    if scale:
        std = grouped.std(dim=1, keepdim=True) if group_size > 1 else torch.zeros_like(centred)
        centred = centred / (std + eps)
    return centred.reshape(-1)


def token_offsets(
    decode: Callable[[Sequence[int]], str], ids: Sequence[int]
) -> list[tuple[int, int]]:
    """Character range of each token in ``decode(ids)``, by decoding growing prefixes.

    ``decode`` is the tokenizer's decode with special tokens skipped (the text TRL gives the
    reward functions). A token that adds no characters (a special token, half of a multi-byte
    character) gets an empty range at its position; ranges never go backwards.
    """
    offsets: list[tuple[int, int]] = []
    previous = 0
    for end in range(1, len(ids) + 1):
        length = max(previous, len(decode(ids[:end])))
        offsets.append((previous, length))
        previous = length
    return offsets


def credit_matrix(credits: Sequence[Sequence[SpanCredit]], length: int) -> torch.Tensor:
    """``(B, length)`` tensor: per completion, Σ Δc over the mutants covering each token."""
    out = torch.zeros(len(credits), length, dtype=torch.float32)
    for row, items in enumerate(credits):
        for item in items:
            index = [t for t in item.tokens if t < length]
            if any(t < 0 for t in item.tokens):
                raise ValueError(f"negative token position in {item!r}")
            out[row, index] += item.delta
    return out


def span_advantages(
    advantages: torch.Tensor,
    credit: torch.Tensor,
    lambda_cf: float,
    completion_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """``(B, T)`` advantages: the global ``(B,)`` ones broadcast plus ``λ_cf ·`` the span credit.

    Positions outside ``completion_mask`` get the credit zeroed (the loss masks them anyway).
    """
    if advantages.dim() != 1 or credit.dim() != 2 or credit.shape[0] != advantages.shape[0]:
        raise ValueError(
            f"advantages {tuple(advantages.shape)} and credit {tuple(credit.shape)} do not match"
        )
    term = lambda_cf * credit.to(advantages.device, advantages.dtype)
    if completion_mask is not None:
        term = term * completion_mask.to(term.dtype)
    return advantages.unsqueeze(1) + term


def span_share(
    advantages: torch.Tensor, credit_term: torch.Tensor, completion_mask: torch.Tensor
) -> float:
    """Share of the policy gradient (w.r.t. the per-token log-probs) that span terms carry.

    At the sampling point (ratio 1, no clipping) the loss gradient w.r.t. token ``t``'s
    log-prob is ``−A[i, t] / N``; the span terms' share is ``Σ|λΔc| / (Σ|A_i| + Σ|λΔc|)`` over
    completion tokens (0 when both vanish).
    """
    mask = completion_mask.to(credit_term.dtype)
    span = (credit_term.abs() * mask).sum()
    base = (advantages.abs().unsqueeze(1) * mask).sum()
    total = span + base
    return float(span / total) if total > 0 else 0.0
