"""The in-process prefix cache: a prompt's template prefix is prefilled once per model and its
key/value cache copied into later calls and batches, without changing any answer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from lemon.backends.base import Decoding, GenerationRequest, Message
from lemon.backends.local import LocalBackend, LocalModel, ModelSource, load_model

pytestmark = pytest.mark.model

QUESTIONS = ["Count to three.", "Name a colour.", "What is 2 + 2?", "Say hello to the team."]


def ask(text: str, system: str | None = None, max_tokens: int = 8) -> GenerationRequest:
    messages = (Message("user", text),)
    if system is not None:
        messages = (Message("system", system), *messages)
    return GenerationRequest(messages, Decoding(max_tokens=max_tokens))


def fresh_model(tiny_model_dir: Path, dtype: str = "float32") -> LocalModel:
    """The process-wide model with an empty prefix cache."""
    model = load_model(ModelSource(str(tiny_model_dir), dtype, "cpu"))
    model.prefix_cache_size = 8
    model._prefixes.clear()
    model.prefix_tokens_reused = 0
    return model


def together(model: LocalModel, requests: list[GenerationRequest]) -> list[str]:
    return [g.text for g in model.generate_batch(requests)]


def alone(model: LocalModel, requests: list[GenerationRequest]) -> list[str]:
    return [model.generate_batch([r])[0].text for r in requests]


def test_prefix_is_prefilled_once_and_answers_do_not_change(tiny_model_dir: Path) -> None:
    model = fresh_model(tiny_model_dir)
    requests = [ask(q) for q in QUESTIONS]
    model.prefix_cache_size = 0
    plain_batch, plain_alone = together(model, requests), alone(model, requests)
    assert model.prefix_tokens_reused == 0
    assert not model._prefixes

    model.prefix_cache_size = 8
    cached_batch = together(model, requests)
    (prefix,) = model._prefixes  # one template prefix, shared by the four rows
    assert model.tokenizer.decode(list(prefix)).endswith("<|im_start|>user\n")
    assert model.prefix_tokens_reused == 3 * len(prefix)  # the first row prefilled it
    cached_alone = alone(model, requests)
    assert model.prefix_tokens_reused == 7 * len(prefix)
    assert cached_batch == cached_alone == plain_batch == plain_alone
    # prompt tokens still count the whole prompt, cached prefix included
    generations = model.generate_batch(requests)
    model.prefix_cache_size = 0
    assert [g.prompt_tokens for g in generations] == [
        g.prompt_tokens for g in model.generate_batch(requests)
    ]


def test_rows_with_different_prefixes_are_prefilled_in_full(tiny_model_dir: Path) -> None:
    model = fresh_model(tiny_model_dir)
    mixed = [ask(QUESTIONS[0], system="You plan."), ask(QUESTIONS[1], system="You check.")]
    answers = together(model, mixed)
    assert model.prefix_tokens_reused == 0
    assert not model._prefixes
    assert answers == alone(model, mixed)  # alone, each row caches its own system turn
    assert len(model._prefixes) == 2


def test_raw_prompts_bypass_the_prefix_cache(tiny_model_dir: Path) -> None:
    model = fresh_model(tiny_model_dir)
    raw = GenerationRequest((), Decoding(max_tokens=4), raw_prompt="Once upon a time there was")
    model.generate_batch([raw, raw])
    assert not model._prefixes
    assert model.prefix_tokens_reused == 0


def test_prefix_cache_keeps_only_the_most_recent_prefixes(tiny_model_dir: Path) -> None:
    model = fresh_model(tiny_model_dir)
    model.prefix_cache_size = 2
    systems = ["You are the planner.", "You are the solver.", "You are the verifier."]
    for system in systems:
        model.generate_batch([ask("Go.", system=system, max_tokens=2)])
    kept = [model.tokenizer.decode(list(p)) for p in model._prefixes]
    assert len(kept) == 2
    assert "planner" not in "".join(kept)
    assert "verifier" in kept[-1]


def test_backend_batches_share_the_prefix(tiny_model_dir: Path) -> None:
    model = fresh_model(tiny_model_dir)
    backend = LocalBackend(ModelSource(str(tiny_model_dir), "float32", "cpu"), window_s=0.05)

    async def level() -> list[str]:
        results = await asyncio.gather(*(backend.generate(ask(q)) for q in QUESTIONS))
        return [g.text for g in results]

    before = model.batches
    texts = asyncio.run(level())
    assert model.batches == before + 1
    assert model.prefix_tokens_reused > 0
    assert texts == alone(model, [ask(q) for q in QUESTIONS])
