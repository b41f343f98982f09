"""Counterfactual credit maths, computed by hand (CPU, no model)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from lemon.spec.mutations import MutationKind, mutations
from lemon.spec.validation import parse_spec
from lemon_train.credit import (
    MutantScore,
    SpanCredit,
    byte_level_pieces,
    byte_offsets,
    credit_matrix,
    field_credits,
    group_advantages,
    span_advantages,
    span_share,
    span_to_token_indices,
    token_offsets,
)


def test_group_advantages_by_hand() -> None:
    # group 1: rewards 1, 3 → mean 2, sample std √2 → ∓1/√2; group 2: equal → 0
    rewards = torch.tensor([1.0, 3.0, 5.0, 5.0])
    out = group_advantages(rewards, 2, eps=0.0)
    assert out[:2].tolist() == pytest.approx([-1 / math.sqrt(2), 1 / math.sqrt(2)])
    assert group_advantages(rewards, 2)[2:].tolist() == [0.0, 0.0]
    # centring only
    assert group_advantages(rewards, 2, scale=False).tolist() == [-1.0, 1.0, 0.0, 0.0]
    # groups of 4: mean 3.5, deviations -2.5, -0.5, 1.5, 1.5; var = (6.25+.25+2.25+2.25)/3
    std = math.sqrt(11 / 3)
    expected = [d / std for d in (-2.5, -0.5, 1.5, 1.5)]
    assert group_advantages(rewards, 4, eps=0.0).tolist() == pytest.approx(expected)


def test_group_advantages_match_trl() -> None:
    from trl.trainer.utils import nanstd

    rewards = torch.tensor([0.2, -1.0, 0.7, 0.7, 0.1, 0.3])
    grouped = rewards.view(-1, 3)
    trl = (grouped - grouped.mean(1, keepdim=True)) / (nanstd(grouped, dim=1).unsqueeze(1) + 1e-4)
    assert group_advantages(rewards, 3).tolist() == pytest.approx(trl.reshape(-1).tolist())


def test_group_advantages_rejects_ragged_groups() -> None:
    with pytest.raises(ValueError, match="groups of 3"):
        group_advantages(torch.zeros(4), 3)


def test_token_offsets_from_incremental_decoding() -> None:
    pieces = {1: "ab", 2: "", 3: "cde", 4: "f"}  # 2 decodes to nothing (a special token)

    def decode(ids: object) -> str:
        return "".join(pieces[i] for i in ids)  # type: ignore[attr-defined]

    assert token_offsets(decode, [1, 2, 3, 4]) == [(0, 2), (2, 2), (2, 5), (5, 6)]
    assert token_offsets(decode, []) == []


def test_span_to_tokens_by_hand() -> None:
    offsets = [(0, 2), (2, 2), (2, 5), (5, 6)]
    assert span_to_token_indices((2, 5), offsets) == [2]  # the empty token never matches
    assert span_to_token_indices((1, 3), offsets) == [0, 2]  # straddling tokens count
    assert span_to_token_indices((6, 6), offsets) == []


def test_credit_matrix_and_span_advantages_by_hand() -> None:
    credits = [
        [SpanCredit("downgrade_capacity", (1, 2), 0.5), SpanCredit("drop_dependency", (2,), -0.25)],
        [],
    ]
    credit = credit_matrix(credits, 4)
    assert credit.tolist() == [[0.0, 0.5, 0.25, 0.0], [0.0, 0.0, 0.0, 0.0]]
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    adv = span_advantages(torch.tensor([1.0, -2.0]), credit, 2.0, mask)
    assert adv.tolist() == [[1.0, 2.0, 1.5, 1.0], [-2.0, -2.0, -2.0, -2.0]]
    # gradient share, weights (1 − π(y_t)) on unmasked tokens:
    # row 0: π = .5 .75 .5 (.2 masked) → w = .5 .25 .5 0; row 1: π = .75 .5 → w = .25 .5 0 0
    term = adv - torch.tensor([1.0, -2.0]).unsqueeze(1)
    probs = torch.tensor([[0.5, 0.75, 0.5, 0.2], [0.75, 0.5, 0.3, 0.3]])
    # g_span = (0, 1·.25, .5·.5, 0) → ‖·‖ = √.125; g_A = (.5, .25, .5; −.5, −1) → √1.8125
    expected = math.sqrt(0.125) / (math.sqrt(0.125) + math.sqrt(1.8125))
    assert span_share(torch.tensor([1.0, -2.0]), term, mask, probs.log()) == pytest.approx(expected)
    # the same credit on tokens the policy is sure of carries no gradient
    sure = torch.tensor([[0.5, 1.0, 1.0, 0.2], [0.75, 0.5, 0.3, 0.3]])
    assert span_share(torch.tensor([1.0, -2.0]), term, mask, sure.log()) == 0.0


def test_field_credits_by_hand() -> None:
    tier = ("solver", "capacity")
    small = MutantScore(tier, "downgrade_capacity", 0.2, (4,), value_edit=True)
    large = MutantScore(tier, "upgrade_capacity", 0.9, (4,), value_edit=True)
    duties = MutantScore(("solver", "duties"), "rollback_role", 0.5, (2, 3))
    # the paper's credit: one per mutant, R − R(m)
    paper = field_credits(0.6, [small, duties], all_values=False)
    assert [(c.kind, c.tokens) for c in paper] == [
        ("downgrade_capacity", (4,)),
        ("rollback_role", (2, 3)),
    ]
    assert [c.delta for c in paper] == pytest.approx([0.4, 0.1])
    # all values: medium sampled (0.6), small 0.2, large 0.9 → 0.6 − (0.6 + 0.2 + 0.9) / 3
    both = field_credits(0.6, [small, large, duties], all_values=True)
    assert [(c.kind, c.tokens) for c in both] == [("capacity", (4,)), ("rollback_role", (2, 3))]
    assert [c.delta for c in both] == pytest.approx([0.6 - 1.7 / 3, 0.1])
    # = (2/3)·(R − mean of the field's two mutants)
    assert both[0].delta == pytest.approx(2 / 3 * (0.6 - (0.2 + 0.9) / 2))
    with pytest.raises(ValueError, match="presence field"):
        field_credits(0.6, [duties, duties], all_values=True)


def test_the_papers_tier_credit_is_biased_and_the_all_values_one_is_not() -> None:
    """The issue's example: a task-blind policy, mean rewards per solver tier 0, 0.263, 0.430.
    The one-way (downgrade) credit averages 0, 0.263, 0.167 and ranks medium above large; the
    all-values credit averages R(v) − mean, in the right order."""
    mean = {"small": 0.0, "medium": 0.263, "large": 0.430}
    below = {"medium": "small", "large": "medium"}
    field = ("solver", "capacity")

    def paper(tier: str) -> float:
        if tier not in below:
            return 0.0  # no downgrade mutant: no credit
        down = MutantScore(field, "downgrade_capacity", mean[below[tier]], (0,), value_edit=True)
        (credit,) = field_credits(mean[tier], [down], all_values=False)
        return credit.delta

    def unbiased(tier: str) -> float:
        others = [
            MutantScore(field, "capacity", mean[other], (0,), value_edit=True)
            for other in mean
            if other != tier
        ]
        (credit,) = field_credits(mean[tier], others, all_values=True)
        return credit.delta

    assert [paper(t) for t in mean] == pytest.approx([0.0, 0.263, 0.167])
    assert paper("medium") > paper("large")  # the bias: medium ranked above large
    assert [unbiased(t) for t in mean] == pytest.approx([-0.231, 0.032, 0.199], abs=1e-3)
    # unbiased: for any softmax over the tiers, Σ_v π(v) Δc(v) ∇log π(v) = ∇ Σ_v π(v) R(v)
    logits = torch.tensor([0.3, -0.2, 0.1], requires_grad=True)
    rewards = torch.tensor(list(mean.values()))
    (torch.softmax(logits, 0) * rewards).sum().backward()
    exact = logits.grad.clone()
    probs = torch.softmax(logits.detach(), 0)
    for name, credit in (("unbiased", unbiased), ("paper", paper)):
        estimate = torch.zeros(3)
        for v, tier in enumerate(mean):
            onehot = torch.zeros(3)
            onehot[v] = 1.0
            estimate += probs[v] * credit(tier) * (onehot - probs)  # ∇_logits log π(v)
        if name == "unbiased":
            assert estimate.tolist() == pytest.approx(exact.tolist(), abs=1e-6)
        else:
            assert (estimate - exact).abs().max() > 0.01


def test_spans_of_real_mutations_land_on_the_field_tokens() -> None:
    """Character spans from the parser map to exactly the tokens spelling the value."""
    text = (
        "agents:\n  - name: solver\n    role: math_solver\n    capacity: large\n"
        "  - name: checker\n    role: verifier\n    capacity: small\n"
        "    depends_on: [solver]\noutput: checker\n"
    )
    # a toy tokenizer: one token per whitespace-separated chunk, keeping the separators
    import re

    chunks = [*re.findall(r"\s*\S+", text), "\n"]
    assert "".join(chunks) == text

    def decode(ids: object) -> str:
        return "".join(chunks[i] for i in ids)  # type: ignore[attr-defined]

    offsets = token_offsets(decode, list(range(len(chunks))))
    parsed = parse_spec(text)
    found = {m.kind: m for m in mutations(parsed)}
    tier = span_to_token_indices(found[MutationKind.DOWNGRADE_CAPACITY].span, offsets)
    assert [chunks[i].strip() for i in tier] == ["large"]
    edge = span_to_token_indices(found[MutationKind.DROP_DEPENDENCY].span, offsets)
    assert [chunks[i].strip() for i in edge] == ["[solver]"]


def test_span_advantage_moves_gradient_only_on_its_tokens() -> None:
    """With zero global advantage, d loss / d logp is zero outside the span (TRL's formula;
    test_grpo checks the same through the real trainer's ``_compute_loss``)."""
    logps = torch.randn(2, 5, requires_grad=True)
    mask = torch.ones(2, 5)
    credit = credit_matrix([[SpanCredit("rollback_role", (1, 3), 0.4)], []], 5)
    advantages = span_advantages(torch.zeros(2), credit, 1.0, mask)
    # the per-token GRPO objective at the sampling point (ratio 1, clipping inactive)
    old = logps.detach()
    coef_1 = torch.exp(logps - old)
    coef_2 = torch.clamp(coef_1, 0.8, 1.2)
    per_token = -torch.min(coef_1 * advantages, coef_2 * advantages)
    loss = (per_token * mask).sum() / mask.sum()  # dapo/bnpo normalisation
    loss.backward()
    grad = logps.grad
    assert grad is not None
    nonzero = {tuple(i) for i in grad.nonzero().tolist()}
    assert nonzero == {(0, 1), (0, 3)}
    assert grad[0, 1].item() == pytest.approx(-0.4 / 10)


def test_offsets_stay_exact_after_a_character_split_across_tokens() -> None:
    """'é' is two UTF-8 bytes; here a token boundary falls between them. Decoding growing
    prefixes sees a replacement character at the cut; the bytes say where every later token
    lies. (The old prefix lengths put every later offset one character off.)"""
    text = 'duties: "Résumé ✓"\ncapacity: large\n'
    data = text.encode()
    cut = data.index("é".encode()) + 1  # inside the first é
    pieces = [data[:cut], data[cut : cut + 3], data[cut + 3 :]]
    offsets = byte_offsets(pieces)
    assert "".join(text[a:b] for a, b in offsets) == text
    assert offsets[0] == (0, text.index("é"))  # the half character waits for its second byte

    def decode(ids: object) -> str:
        return b"".join(pieces[i] for i in ids).decode("utf-8", "replace")  # type: ignore[attr-defined]

    assert token_offsets(decode, [0, 1, 2]) == offsets  # the decode-only path agrees
    assert token_offsets(decode, [0, 1, 2], token_bytes=lambda i: pieces[i]) == offsets
    start = text.index("large")
    assert span_to_token_indices((start, start + 5), offsets) == [2]


@pytest.mark.model
def test_byte_level_pieces_of_a_real_tokenizer(tiny_model: Path) -> None:
    """On the policy's own tokenizer, a non-ASCII duties string's tokens add up to its text and
    the capacity field's span lands on the tokens that spell it."""
    from lemon_train.loading import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_model))
    pieces = byte_level_pieces(tokenizer)
    assert pieces is not None
    text = (
        'agents:\n  - name: a\n    role: critic\n    duties: "Prüfe die Lösung ✓"\n'
        "    capacity: large\noutput: a\n"
    )
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]

    def decode(seq: object) -> str:
        return str(tokenizer.decode(list(seq), skip_special_tokens=True))  # type: ignore[call-overload]

    offsets = token_offsets(decode, ids, token_bytes=pieces)
    assert "".join(text[a:b] for a, b in offsets) == text == decode(ids)
    start = text.index("large")
    tokens = span_to_token_indices((start, start + len("large")), offsets)
    assert "".join(decode([ids[t]]) for t in tokens).strip() == "large"
