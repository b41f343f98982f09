"""GRPO sampling with each prompt prefilled once (:mod:`lemon_train.sampling`): the same tokens
as TRL's path under greedy decoding, on the real SmolLM2-135M policy weights."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from lemon_train.sampling import distinct_prompts, shared_prefix_generate, until_eos

pytestmark = pytest.mark.model


def test_distinct_prompts_in_first_seen_order() -> None:
    rows = [[5, 6], [7], [5, 6], [7], [8, 9, 10], [5, 6]]
    assert distinct_prompts(rows) == ([[5, 6], [7], [8, 9, 10]], [0, 1, 0, 1, 2, 0])


def test_until_eos_keeps_the_first_eos_and_whole_rows_without_one() -> None:
    completions = torch.tensor([[4, 2, 9, 2], [4, 4, 4, 4], [3, 9, 0, 0]])
    assert until_eos(completions, [2, 3]) == [[4, 2], [4, 4, 4, 4], [3]]


def test_empty_prompts_are_refused() -> None:
    with pytest.raises(ValueError, match="non-empty prompt"):
        shared_prefix_generate(None, [[1], []], None, pad_token_id=0, eos_token_ids=[2])


def _prompt_ids(tokenizer: Any, messages: Any) -> list[int]:
    """The policy prompt's ids as TRL tokenizes a conversational prompt."""
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _trl_generate(model: Any, rows: list[list[int]], config: Any, pad: int) -> torch.Tensor:
    """TRL 1.16's transformers path: every row left-padded and prefilled on its own."""
    from trl.trainer.utils import pad as trl_pad

    tensors = [torch.tensor(ids) for ids in rows]
    ids = trl_pad(tensors, padding_value=pad, padding_side="left")
    mask = trl_pad([torch.ones_like(t) for t in tensors], padding_value=0, padding_side="left")
    with torch.no_grad():
        output = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    return output[:, ids.shape[1] :]


def test_greedy_tokens_match_trls_path_on_the_real_policy_model() -> None:
    """Prompts of different lengths (so rows are padded differently in the two batches), in an
    interleaved order; a wrong position, mask or cache row changes the tokens."""
    from transformers import GenerationConfig

    from lemon.policy.prompt import policy_messages
    from lemon_train.loading import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer("packaged")
    model.eval()
    tasks = [
        "What is 7 + 5?",
        "A farmer has 12 cows and buys 30 more, then sells half of them. How many are left?",
        "Write a Python function that reverses a string.",
    ]
    prompts = [_prompt_ids(tokenizer, policy_messages(task)) for task in tasks]
    assert len({len(p) for p in prompts}) == 3
    rows = [prompts[i] for i in (0, 1, 0, 2, 1, 2, 0)]
    config = GenerationConfig(
        max_new_tokens=24,
        do_sample=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    eos = [tokenizer.eos_token_id]
    shared, prefilled = shared_prefix_generate(
        model, rows, config, pad_token_id=tokenizer.pad_token_id, eos_token_ids=eos
    )
    assert prefilled == 3
    plain = until_eos(_trl_generate(model, rows, config, tokenizer.pad_token_id), eos)
    assert shared == plain
    assert all(len(tokens) > 0 for tokens in shared)


def test_sampled_rows_of_one_prompt_differ_and_follow_the_seed(tmp_path: Path) -> None:
    """Sampling from the shared cache: a group's rows are independent draws (not copies of one
    sample), and a fixed seed gives the same draws."""
    from transformers import GenerationConfig

    from lemon.policy.prompt import policy_messages
    from lemon_train.loading import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer("packaged")
    model.eval()
    ids = _prompt_ids(tokenizer, policy_messages("What is 7 + 5?"))
    config = GenerationConfig(
        max_new_tokens=16,
        do_sample=True,
        temperature=1.5,
        top_k=0,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )

    def draw() -> list[list[int]]:
        torch.manual_seed(0)
        out, _ = shared_prefix_generate(
            model,
            [ids] * 4,
            config,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_ids=[tokenizer.eos_token_id],
        )
        return out

    first = draw()
    assert len({tuple(row) for row in first}) > 1
    assert draw() == first


def test_completion_logps_equal_trls_fused_head_values_and_gradients() -> None:
    """The loss pass's log-probs and entropies with the LM head over the completions only equal
    TRL's fused head (which projects every position on a CPU), gradients included; rows padded on
    the left (prompts) and on the right (completions after EOS)."""
    from trl.trainer.utils import add_fused_lm_head

    from lemon.policy.prompt import policy_messages
    from lemon_train.loading import load_model_and_tokenizer
    from lemon_train.logprobs import completion_logps

    model, tokenizer = load_model_and_tokenizer("packaged")
    add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))
    prompts = [
        _prompt_ids(tokenizer, policy_messages(task))
        for task in ("What is 7 + 5?", "Sort a list of 12 numbers in Python, then sum it.")
    ]
    completions = [
        tokenizer("agents:\n  - name: solver")["input_ids"],
        tokenizer("output: x")["input_ids"],
    ]
    width, k = max(map(len, prompts)), max(map(len, completions))
    ids = torch.full((2, width + k), tokenizer.pad_token_id)
    mask = torch.zeros((2, width + k), dtype=torch.long)
    for row, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
        ids[row, width - len(prompt) : width] = torch.tensor(prompt)
        ids[row, width : width + len(completion)] = torch.tensor(completion)
        mask[row, width - len(prompt) : width + len(completion)] = 1
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-k] = -100
    trl = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    trl_logps, trl_entropy = trl.log_probs[:, -k:], trl.entropy[:, -k:]
    weights = torch.randn(2, k, generator=torch.Generator().manual_seed(0))
    (trl_logps * weights).sum().backward()
    trl_grad = model.model.layers[-1].mlp.down_proj.weight.grad.clone()
    model.zero_grad()
    logps, entropy = completion_logps(model, ids, mask, k, temperature=0.7, compute_entropy=True)
    (logps * weights).sum().backward()
    grad = model.model.layers[-1].mlp.down_proj.weight.grad
    assert entropy is not None
    assert logps.shape == trl_logps.shape == (2, k)
    assert (logps[mask[:, -k:] == 0] == 0).all()
    torch.testing.assert_close(logps, trl_logps, atol=2e-4, rtol=1e-4)
    torch.testing.assert_close(entropy, trl_entropy.detach(), atol=2e-4, rtol=1e-4)
    torch.testing.assert_close(grad, trl_grad, atol=1e-4, rtol=1e-3)
    # not vacuous: the log-probs move with the temperature
    hotter, _ = completion_logps(model, ids, mask, k, temperature=1.0)
    assert not torch.allclose(hotter, logps, atol=1e-2)
