"""The llama.cpp backend on real GGUF models: the packaged SmolLM2-135M-Instruct, and the
medium tier's Qwen2.5-Coder-0.5B-Instruct (fetched through the real fetcher when missing)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from lemon.backends.base import BackendError, Decoding, GenerationRequest, Message
from lemon.backends.fetching import fetch
from lemon.backends.ggufs import GGUF_MODELS
from lemon.backends.llamacpp import LlamaBackend, LlamaSettings, load_llama

pytestmark = pytest.mark.model

SMOL = "smollm2-135m-instruct"
QUESTIONS = [
    "Tom has 3 apples and buys 4 more. How many apples does he have?",
    "A train travels 60 km in 1 hour. How far does it go in 3 hours?",
    "Write a Python function that reverses a string.",
    "Name three primary colours.",
    "Sara reads 12 pages a day. How many pages does she read in a week?",
]


def _ask(question: str, **decoding: object) -> GenerationRequest:
    return GenerationRequest((Message("user", question),), Decoding(**decoding))  # type: ignore[arg-type]


def _run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


@pytest.fixture(scope="module")
def smol() -> LlamaBackend:
    return LlamaBackend(SMOL)


def test_chat_template_from_the_gguf_and_usage(smol: LlamaBackend) -> None:
    async def go() -> tuple[str, int, object]:
        model = await smol.model()
        request = _ask(QUESTIONS[0], max_tokens=12)
        text = model.prompt_text(request)
        tokens = len(model.prompt_tokens(request))
        return text, tokens, await smol.generate(request)

    text, tokens, result = _run(go())
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert text.endswith(f"<|im_start|>user\n{QUESTIONS[0]}<|im_end|>\n<|im_start|>assistant\n")
    assert result.prompt_tokens == tokens
    assert result.completion_tokens == 12
    assert result.finish_reason == "length"
    assert smol.model_id == "llamacpp:smollm2-135m-instruct"
    assert "SmolLM2-135M-Instruct" in smol.label


def test_stop_string_cuts_where_the_free_text_has_it(smol: LlamaBackend) -> None:
    free = _run(smol.generate(_ask(QUESTIONS[4], max_tokens=60)))
    words = free.text.split()
    assert len(words) > 6
    stop = " " + words[4]  # a string that occurs in the unconstrained answer
    cut = _run(smol.generate(_ask(QUESTIONS[4], max_tokens=60, stop=(stop,))))
    assert cut.finish_reason == "stop"
    assert stop not in cut.text
    assert cut.text == free.text[: free.text.index(stop)]
    assert cut.completion_tokens < free.completion_tokens


def test_prefill_is_completed_raw_and_returned(smol: LlamaBackend) -> None:
    prefill = "Let's think step by step. First,"
    request = GenerationRequest(
        (Message("user", QUESTIONS[0]),), Decoding(max_tokens=20), prefill=prefill
    )
    result = _run(smol.generate(request))
    assert result.text.startswith(prefill)
    assert len(result.text) > len(prefill)

    async def raw() -> object:
        model = await smol.model()
        template = model.prompt_text(GenerationRequest(request.messages))
        same = GenerationRequest((), Decoding(max_tokens=20), prefill=prefill, raw_prompt=template)
        return await smol.generate(same)

    again = _run(raw())
    assert again.text == result.text
    assert again.prompt_tokens == result.prompt_tokens


def test_seeds_make_sampling_reproducible(smol: LlamaBackend) -> None:
    def sample(seed: int) -> str:
        request = _ask(QUESTIONS[3], max_tokens=24, temperature=1.0, seed=seed)
        return _run(smol.generate(request)).text

    assert sample(7) == sample(7)
    assert len({sample(seed) for seed in range(4)}) > 1
    greedy = [_run(smol.generate(_ask(QUESTIONS[3], max_tokens=24))).text for _ in range(2)]
    assert greedy[0] == greedy[1]


def test_concurrent_requests_share_decode_steps(smol: LlamaBackend) -> None:
    """Five concurrent requests are decoded together: far fewer decode steps than tokens."""

    async def go() -> tuple[list[int], int, int]:
        model = await smol.model()
        steps = model.steps
        results = await asyncio.gather(*(smol.generate(_ask(q, max_tokens=16)) for q in QUESTIONS))
        return (
            [r.completion_tokens for r in results],
            model.steps - steps,
            model.max_batch_sequences,
        )

    tokens, steps, widest = _run(go())
    assert widest >= len(QUESTIONS)
    assert steps <= max(tokens) + 2 < sum(tokens)


def test_the_event_loop_stays_free(smol: LlamaBackend) -> None:
    async def go() -> int:
        ticks = 0
        task = asyncio.ensure_future(smol.generate(_ask(QUESTIONS[2], max_tokens=48)))
        while not task.done():
            await asyncio.sleep(0.005)
            ticks += 1
        await task
        return ticks

    assert _run(go()) > 5


def test_a_cancelled_call_frees_its_slot() -> None:
    backend = LlamaBackend(SMOL, slots=1, context=512)

    async def go() -> str:
        first = asyncio.ensure_future(backend.generate(_ask(QUESTIONS[2], max_tokens=400)))
        await asyncio.sleep(0.5)
        first.cancel()
        result = await asyncio.wait_for(backend.generate(_ask(QUESTIONS[0], max_tokens=8)), 120)
        return result.text

    assert _run(go())


def test_errors_are_backend_errors(tmp_path: Path) -> None:
    missing = LlamaBackend(str(tmp_path / "absent.gguf"))
    with pytest.raises(BackendError, match=r"cannot load absent\.gguf: no GGUF file at"):
        _run(missing.generate(_ask("hi")))
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"GGUF" + b"\x00" * 64)
    bad = LlamaBackend(str(garbage))
    with pytest.raises(BackendError, match=r"llama\.cpp cannot load .* as a GGUF model") as info:
        _run(bad.generate(_ask("hi")))
    assert not info.value.transient
    small = LlamaBackend(SMOL, slots=1, context=64)
    with pytest.raises(
        BackendError, match=r"context overflow: the prompt has \d+ tokens .* holds 64"
    ):
        _run(small.generate(_ask("word " * 200)))


def test_a_grammar_constrains_the_answer(smol: LlamaBackend) -> None:
    from lemon.backends.base import LarkGrammar

    ask = (Message("user", "yes or no?"),)
    grammar = LarkGrammar('start: "maybe" | "perhaps"\n')
    answer = _run(smol.generate(GenerationRequest(ask, Decoding(max_tokens=8), constraint=grammar)))
    assert answer.text in ("maybe", "perhaps")
    broken = GenerationRequest(ask, Decoding(max_tokens=4), constraint=LarkGrammar("x"))
    with pytest.raises(BackendError, match="cannot apply the grammar") as info:
        _run(smol.generate(broken))
    assert not info.value.transient


def test_the_persistent_call_cache_keys_by_the_gguf(
    smol: LlamaBackend, qwen_05b: Path, tmp_path: Path
) -> None:
    from lemon.backends.callcache import CachedBackend, PersistentCallCache

    cached = CachedBackend(smol, PersistentCallCache(tmp_path / "calls.sqlite"))
    request = _ask(QUESTIONS[1], max_tokens=8)
    first = _run(cached.generate(request))
    second = _run(cached.generate(request))
    assert (first.cached, second.cached) == (False, True)
    assert second.text == first.text
    assert second.completion_tokens == first.completion_tokens
    assert cached.identity().startswith("llamacpp:")
    assert "@llama-cpp-python-" in cached.identity()
    # a pinned model keys by its pinned SHA-256 (no hashing of the gigabyte)
    medium = GGUF_MODELS["qwen2.5-coder-0.5b-instruct"]
    assert medium.wheels is not None
    identity = LlamaBackend(medium.name).content_id(cached.cache)
    assert identity.startswith(f"llamacpp:{medium.wheels.sha256[:24]}@")


def test_unfetched_model_says_how_to_fetch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEMON_CACHE_DIR", str(tmp_path))
    backend = LlamaBackend("qwen2.5-coder-1.5b-instruct")
    with pytest.raises(BackendError, match=r"lemon models fetch qwen2\.5-coder-1\.5b-instruct"):
        _run(backend.generate(_ask("hi")))


@pytest.fixture(scope="module")
def qwen_05b() -> Path:
    """The medium tier's GGUF, fetched through the fetcher when this machine lacks it."""
    return fetch(GGUF_MODELS["qwen2.5-coder-0.5b-instruct"])


def test_batched_decoding_equals_one_at_a_time(qwen_05b: Path) -> None:
    """Greedy answers decoded together in one multi-sequence batch are the answers each
    gives alone (weights not repacked: the same kernels for one row and for many)."""
    model = load_llama(LlamaSettings(str(qwen_05b), slots=4, context=1024, repack=False))
    requests = [_ask(q, max_tokens=32) for q in QUESTIONS[:4]]
    alone = [model.submit(r).result(timeout=600) for r in requests]
    futures = [model.submit(r) for r in requests]
    together = [f.result(timeout=600) for f in futures]
    assert [g.text for g in together] == [g.text for g in alone]
    assert [g.completion_tokens for g in together] == [g.completion_tokens for g in alone]
    assert model.max_batch_sequences == 4


def test_a_step_decodes_in_groups_to_the_same_answers(qwen_05b: Path) -> None:
    """With ``decode_group`` 2, a step over 4 sequences makes two ``llama_decode`` calls, and
    the greedy answers are those of one call over all 4 (weights not repacked)."""
    requests = [_ask(q, max_tokens=24) for q in QUESTIONS[:4]]
    answers = {}
    for group in (0, 2):
        model = load_llama(
            LlamaSettings(str(qwen_05b), slots=4, context=1024, repack=False, decode_group=group)
        )
        try:
            futures = [model.submit(r) for r in requests]
            answers[group] = [f.result(timeout=600).text for f in futures]
            assert model.max_batch_sequences == 4
            if group == 0:
                assert model.decode_calls == model.steps
            else:  # every step over 3-4 sequences took two calls
                assert model.steps < model.decode_calls <= 2 * model.steps
        finally:
            model.close()
    assert answers[2] == answers[0]


def test_tier_decode_groups_come_from_the_profile_or_the_pinned_model() -> None:
    from lemon.capacity import TierBackend

    assert LlamaBackend("qwen2.5-coder-1.5b-instruct").decode_group == 4
    assert LlamaBackend("qwen2.5-coder-0.5b-instruct").decode_group == 0
    assert LlamaBackend("qwen2.5-coder-1.5b-instruct", decode_group=0).decode_group == 0
    with pytest.raises(ValueError, match="decode_group applies to llamacpp tiers"):
        TierBackend(type="openai", url="http://x/v1", model="m", decode_group=2)
    from lemon.capacity import CapacityProfile, build_backends
    from lemon.spec.models import Capacity

    tiers = {
        tier: TierBackend(type="llamacpp", model="qwen2.5-coder-0.5b-instruct") for tier in Capacity
    }
    tiers[Capacity.LARGE] = TierBackend(
        type="llamacpp", model="qwen2.5-coder-1.5b-instruct", decode_group=2
    )
    built = build_backends(CapacityProfile(name="groups", tiers=tiers))  # lazy: nothing loads
    assert [getattr(built[t], "decode_group", None) for t in Capacity] == [0, 0, 2]


def test_the_medium_tier_answers_a_sum(qwen_05b: Path) -> None:
    backend = LlamaBackend("qwen2.5-coder-0.5b-instruct", slots=2, context=1024)
    started = time.perf_counter()
    result = _run(backend.generate(_ask("What is 17 + 25? Reply with the number only.")))
    assert "42" in result.text, result.text
    assert time.perf_counter() - started < 300
