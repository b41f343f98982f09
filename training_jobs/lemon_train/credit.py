"""The maths of counterfactual credit, as small pure functions (tested by hand on CPU).

GRPO gives every token of completion ``i`` the same, group-normalised advantage ``A_i``.
Counterfactual credit adds, on exactly the tokens that create an edited field (the mutation's
``credit_span``, :mod:`lemon.spec.mutations`), the reward the field's value was worth:

    A[i, t] = A_i + λ_cf · Σ_{f : t ∈ tokens(f)} Δc_f

where ``tokens(s)`` are the completion's token positions whose decoded characters overlap
``s``. Character offsets come from the completion's own token ids (:func:`token_offsets`),
never from re-tokenising its text: a re-tokenisation may split the text differently from
what the policy sampled, and the advantage must land on the tokens that were sampled.

**The estimator** (:func:`field_credits`). Write ``v`` for the value a field has in sampled
spec ``i``, ``R(v) = R(i)`` and ``R(w)`` for the reward of the spec with only that field set to
``w`` (a mutant). With the rest of the spec fixed, the policy gradient of the field's choice is
``Σ_v ∇π(v) R(v) = E_v[(R(v) − b) ∇log π(v)]`` for any baseline ``b`` that does not depend on
``v``. So (every "unbiased" below holds for the field's choice *with the rest of the
completion held fixed*: the other fields and the tokens around them are what was sampled, and
the estimate says nothing about how the choice would interact with them if they were
resampled):

- *value fields with edits both ways* (``capacity`` with ``upgrade_capacity`` and
  ``downgrade_capacity``; the trainer then scores every other tier of the field):
  ``Δc_f = R(v) − (1/|V|) Σ_{w ∈ V} R(w)``, the mean over all values, the sampled one included.
  For three tiers this equals ``(2/3)·(R(v) − mean of the two mutants)``: the comparison with
  the mean of the field's mutants, scaled so that ``E[Δc_f ∇log π(v)]`` is exactly the field's
  gradient. The baseline is the same whichever tier was sampled: no dependence on the sampled
  value's neighbours;
- *presence fields* (``rollback_role``: the duties exist; ``drop_dependency``: the entry exists;
  ``remove_agent``: the agent exists): ``Δc_f = R(present) − R(absent)`` on specs where the
  thing is present, and nothing where it is absent. That is the baseline ``b = R(absent)`` for
  both values, so the estimate is unbiased too;
- *one-way value edits* (the paper's ``downgrade_capacity`` alone, or ``upgrade_capacity``
  alone): ``Δc_m = R(v) − R(m)`` per mutant, as the paper defines it. For tiers this is
  *biased*: the baseline is the tier below the sampled one, so it changes with ``v`` and the
  expectation gains ``−Σ_v ∇π(v) b(v)``. For a policy that ignores the task, with mean rewards
  ``R(small) = 0``, ``R(medium) = 0.263``, ``R(large) = 0.430``, the paper's credit averages 0,
  0.263 and 0.167 (medium ranked above large); the all-values credit averages −0.231, 0.032 and
  0.199, the right order (``tests/train/test_credit.py`` computes both).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from lemon.spec.spans import span_to_token_indices

__all__ = [
    "MutantScore",
    "SpanCredit",
    "byte_level_pieces",
    "byte_offsets",
    "credit_matrix",
    "field_credits",
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


@dataclass(frozen=True, slots=True)
class MutantScore:
    """A scored mutant: the field it edits, its kind, its reward and its credit tokens."""

    field: tuple[str, str]
    kind: str
    reward: float
    tokens: tuple[int, ...]
    value_edit: bool = False
    """True for capacity edits (a value among several); False for presence edits."""


def field_credits(
    reward: float, mutants: Sequence[MutantScore], *, all_values: bool
) -> list[SpanCredit]:
    """One credit per field (``all_values``) or per mutant (the paper's), see the module doc.

    ``all_values``: the mutants of each value field cover every other value of the field, and
    the credit is ``R − mean(R, R(m) for m of the field)``; a presence field (one mutant, the
    thing removed) gets ``R − R(m)``. Otherwise every mutant gets ``R − R(m)`` on its tokens.
    """
    if not all_values:
        return [SpanCredit(m.kind, m.tokens, reward - m.reward) for m in mutants]
    fields: dict[tuple[str, str], list[MutantScore]] = {}
    for m in mutants:
        fields.setdefault(m.field, []).append(m)
    out = []
    for group in fields.values():
        first = group[0]
        if first.value_edit:
            baseline = (reward + sum(m.reward for m in group)) / (len(group) + 1)
            tokens = tuple(sorted({t for m in group for t in m.tokens}))
            out.append(SpanCredit(first.field[1], tokens, reward - baseline))
        else:
            if len(group) != 1:
                raise ValueError(f"presence field {first.field} has {len(group)} mutants")
            out.append(SpanCredit(first.kind, first.tokens, reward - first.reward))
    return out


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
    decode: Callable[[Sequence[int]], str],
    ids: Sequence[int],
    *,
    token_bytes: Callable[[int], bytes] | None = None,
) -> list[tuple[int, int]]:
    """Character range of each token in ``decode(ids)``.

    With ``token_bytes`` (each token's UTF-8 bytes, empty for a special token), the tokens'
    bytes go through one incremental UTF-8 decoder: a character split across tokens belongs to
    the token that completes it, and every later offset stays exact (:func:`byte_offsets`).
    Without it, growing prefixes are decoded and each is cut to its common prefix with the whole
    text, so the replacement character a half-decoded multi-byte character shows at the end of
    a prefix never counts. ``decode`` is the tokenizer's decode with special tokens skipped (the
    text TRL gives the reward functions). A token that adds no characters gets an empty range at
    its position; ranges never go backwards.
    """
    if token_bytes is not None:
        return byte_offsets([token_bytes(i) for i in ids])
    whole = decode(ids)
    offsets: list[tuple[int, int]] = []
    previous = 0
    for end in range(1, len(ids) + 1):
        length = max(previous, _common_prefix(decode(ids[:end]), whole))
        offsets.append((previous, length))
        previous = length
    return offsets


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def byte_offsets(pieces: Sequence[bytes]) -> list[tuple[int, int]]:
    """Character range of each token from the tokens' bytes, through one incremental UTF-8
    decoder (invalid bytes become U+FFFD, as the tokenizer's decode makes them)."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    offsets: list[tuple[int, int]] = []
    position = 0
    for index, piece in enumerate(pieces):
        chars = len(decoder.decode(piece, final=index == len(pieces) - 1))
        offsets.append((position, position + chars))
        position += chars
    return offsets


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level BPE alphabet: each byte as the printable character that stands for
    it in the vocabulary (printable bytes as themselves, the rest shifted past 255)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {byte: chr(char) for byte, char in zip(printable, chars, strict=True)}


def byte_level_pieces(tokenizer: Any) -> Callable[[int], bytes] | None:
    """Each token's bytes for a byte-level BPE tokenizer (GPT-2's byte-to-unicode alphabet:
    SmolLM2, Qwen2.5, Llama 3), special tokens as no bytes; None for a tokenizer whose tokens
    are not byte-level."""
    alphabet = {char: byte for byte, char in _bytes_to_unicode().items()}
    special = set(getattr(tokenizer, "all_special_ids", []))

    def piece(token: int) -> bytes:
        if token in special:
            return b""
        text = tokenizer.convert_ids_to_tokens(int(token))
        return bytes(alphabet[char] for char in text)

    try:  # a tokenizer whose pieces fall outside the alphabet is not byte-level
        sample = tokenizer("héllo wörld ✓", add_special_tokens=False)["input_ids"]
        for token in sample:
            piece(token)
    except (KeyError, TypeError):
        return None
    return piece


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
    advantages: torch.Tensor,
    credit_term: torch.Tensor,
    completion_mask: torch.Tensor,
    token_logps: torch.Tensor,
) -> float:
    """Share of the loss gradient that the span terms carry, ``‖g_span‖ / (‖g_A‖ + ‖g_span‖)``.

    The gradients are taken with respect to the sampled tokens' logits at the sampling point
    (ratio 1, no clipping): for token ``t`` of completion ``i``, ``∂ℓ/∂z[i, t, y_t] =
    −A[i, t] · (1 − π(y_t)) / N``. ``g_A`` is that gradient from the global advantages
    ``A_i``, ``g_span`` from the span terms ``λ_cf · Σ Δc``; ``N`` cancels. A token the policy
    is sure of (``π ≈ 1``) carries no gradient, whatever credit it gets, so a large credit on a
    forced token does not count here. ``token_logps`` are the sampled tokens' log-probabilities
    (``(B, T)``); 0 when both gradients vanish.
    """
    mask = completion_mask.to(credit_term.dtype)
    weight = (1.0 - token_logps.detach().to(credit_term.dtype).exp()).clamp(min=0.0) * mask
    span = float((credit_term * weight).norm())
    base = float((advantages.to(credit_term.dtype).unsqueeze(1) * weight).norm())
    total = span + base
    return span / total if total > 0 else 0.0
