"""A policy choosing among fixed teams (``lemon eval --policy-columns``): each spec text is
scored by the real packaged SmolLM2 as its answer to the policy's prompt, and the choice is the
highest log-probability. Checked against the model's own loss, computed independently."""

from __future__ import annotations

import asyncio
import math

import pytest

from lemon.backends.base import Message
from lemon.backends.local import PACKAGED, LocalBackend, ModelSource, load_model
from lemon.backends.openai import OpenAIBackend
from lemon.policy.inference import LearnedPolicy
from lemon.policy.prompt import policy_messages
from lemon.tasks import TaskKind

pytestmark = pytest.mark.model

SOURCE = ModelSource(PACKAGED, "float32", "cpu")
ONE = "agents:\n  - name: solver\n    role: math_solver\n    capacity: medium\noutput: solver\n"
POT = (
    "agents:\n  - name: coder\n    role: programmer\n    capacity: large\n  - name: run\n"
    "    role: python_executor\n    capacity: small\n    depends_on: [coder]\noutput: run\n"
)
TASK = "Tom has 3 apples and buys 4 more. How many apples does he have?"


def _reference(messages: list[dict[str, str]], completion: str) -> tuple[float, int]:
    """log p(completion | prompt) from the model's cross-entropy loss on the full chat, the
    prompt's positions masked out: the same quantity by another route."""
    import torch

    model = load_model(SOURCE)
    tok = model.tokenizer
    prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    full = tok.apply_chat_template(
        [*messages, {"role": "assistant", "content": completion}], tokenize=False
    )
    ids = tok(full, add_special_tokens=False)["input_ids"]
    start = len(tok(prompt, add_special_tokens=False)["input_ids"])
    end = ids.index(tok.eos_token_id, start) + 1  # the turn's end token is scored too
    labels = [-100] * start + ids[start:end]
    with torch.inference_mode():
        loss = model.model(input_ids=torch.tensor([ids[:end]]), labels=torch.tensor([labels])).loss
    return -float(loss) * (end - start), end - start


def test_each_choice_is_scored_by_its_log_probability() -> None:
    messages = policy_messages(TASK)
    model = load_model(SOURCE)
    chat = tuple(Message(m["role"], m["content"]) for m in messages)  # type: ignore[arg-type]
    prompt_tokens, scored = model.score(chat, [ONE, POT, "banana"])
    assert prompt_tokens > 50
    for text, (logprob, tokens) in zip([ONE, POT, "banana"], scored, strict=True):
        expected, count = _reference(messages, text)
        assert tokens == count
        assert logprob < 0
        assert math.isclose(logprob, expected, rel_tol=1e-3, abs_tol=1e-3)
    assert scored[1][1] > scored[0][1] > scored[2][1]  # the two-agent spec is the longest


def test_the_policy_writes_the_choice_its_model_prefers() -> None:
    backend = LocalBackend(SOURCE, tier="policy")
    policy = LearnedPolicy(backend, name="packaged", choices={TaskKind.MATH: (ONE, POT)})
    decision = asyncio.run(policy.write_spec(TASK, kind=TaskKind.MATH))
    _, scored = load_model(SOURCE).score(
        tuple(Message(m["role"], m["content"]) for m in policy_messages(TASK)),  # type: ignore[arg-type]
        [ONE, POT],
    )
    preferred = "solver" if scored[0][0] >= scored[1][0] else "coder"
    assert decision.spec.agents[0].name == preferred
    assert not decision.fallback
    (attempt,) = decision.attempts
    assert attempt.completion_tokens == scored[0][1] + scored[1][1]  # every choice was read
    assert attempt.prompt_tokens > 50
    assert "choosing among up to 2 teams" in decision.origin


def test_a_backend_that_cannot_score_is_refused_clearly() -> None:
    backend = OpenAIBackend("http://127.0.0.1:9/v1", model="policy")  # never called
    policy = LearnedPolicy(backend, name="served", choices={TaskKind.MATH: (ONE,)})
    with pytest.raises(ValueError, match="cannot score completions"):
        asyncio.run(policy.write_spec(TASK, kind=TaskKind.MATH))
