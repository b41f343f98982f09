"""The loss pass's per-token log-probabilities, with the LM head over the completions only.

TRL 1.16 scores a GRPO batch through its fused LM head (``add_fused_lm_head``): on devices with
Triton it projects only the positions with a label (the completions); elsewhere (CPU included) it
projects **every** position, prompt too, "so tile shapes do not change between batches", and
masks the prompt's results away. On the outcome tables' SVAMP prompts (about 150 tokens before
a completion under 50) that is 4.4 × the needed head work, in the forward and the backward
pass; scoring the completions only makes the loss pass 2.31× [2.24, 2.38] faster there
(4 tasks × 4 samples, one thread; ``lemon bench grpo-sampling``).

:func:`completion_logps` runs the model's own forward with ``logits_to_keep`` (the LM head on
the last ``k + 1`` positions only) and takes the tempered log-softmax at the completion tokens,
and the entropy when asked: the values TRL's kernel computes (a test compares both, and their
gradients, on the same weights), with completion padding set to 0 as TRL's masking does.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["completion_logps"]


def completion_logps(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    *,
    temperature: float,
    compute_entropy: bool = False,
    batch_size: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probabilities ``(B, logits_to_keep)`` of the last ``logits_to_keep`` tokens of each
    row under ``softmax(logits / temperature)``, and their entropies if ``compute_entropy``;
    positions whose ``attention_mask`` is 0 get 0, as in TRL."""
    if logits_to_keep < 1 or logits_to_keep >= input_ids.shape[1]:
        raise ValueError(
            f"logits_to_keep={logits_to_keep}: needs 1 <= k < sequence length {input_ids.shape[1]}"
        )
    size = batch_size or input_ids.shape[0]
    all_logps: list[torch.Tensor] = []
    all_entropies: list[torch.Tensor] = []
    for start in range(0, input_ids.shape[0], size):
        ids = input_ids[start : start + size]
        mask = attention_mask[start : start + size]
        output = model(
            input_ids=ids, attention_mask=mask, logits_to_keep=logits_to_keep + 1, use_cache=False
        )
        logits = output.logits[:, :-1].float() / temperature  # position t predicts token t + 1
        targets = ids[:, -logits_to_keep:]
        log_probs = torch.log_softmax(logits, dim=-1)
        picked = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        padding = mask[:, -logits_to_keep:] == 0
        all_logps.append(picked.masked_fill(padding, 0.0))
        if compute_entropy:
            with torch.no_grad():
                entropy = -(log_probs.exp() * log_probs).sum(-1)
            all_entropies.append(entropy.masked_fill(padding, 0.0))
    entropies = torch.cat(all_entropies) if compute_entropy else None
    return torch.cat(all_logps), entropies
