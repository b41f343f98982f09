"""Constrained decoding on real models and a real tokenizer: every spec parses, validates and
is acyclic; in-process (llguidance matchers per row), through a real HTTP server (one grammar
per line), and for the untrained packaged SmolLM2 policy."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lemon.backends.base import BackendError, Decoding, GenerationRequest, LarkGrammar, Message
from lemon.backends.callcache import PersistentCallCache
from lemon.backends.converting import converted_packaged_model
from lemon.backends.guided import SpecMatcher, guide_tokenizer
from lemon.backends.local import PACKAGED, LocalBackend, ModelSource, load_model
from lemon.backends.openai import OpenAIBackend
from lemon.evals.baselines import BASELINES, baseline_spec
from lemon.policy.inference import load_policy
from lemon.policy.prompt import policy_messages
from lemon.policy.template import TemplateVariant, template_spec
from lemon.spec import compile_spec, format_spec, parse_spec
from lemon.spec.grammar import GrammarLimits, SpecGrammar
from tests.conftest import write_one_spec
from tests.model.conftest import ModelServer

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(converted_packaged_model("bfloat16")))


def _check(text: str, *, tokens: int, budget: int) -> None:
    """Valid, acyclic, every reference to an earlier agent, within the budget."""
    parsed = parse_spec(text)
    compile_spec(parsed.spec, output=parsed.output)
    seen: set[str] = set()
    for agent in parsed.spec.agents:
        assert set(agent.depends_on) <= seen, text
        seen.add(agent.name)
    assert format_spec(parsed.spec, output=parsed.output) == text  # the canonical layout
    assert tokens <= budget


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data(), budget=st.integers(min_value=130, max_value=400))
def test_every_constrained_walk_is_a_valid_spec(tokenizer: Any, data: Any, budget: int) -> None:
    guide = guide_tokenizer(tokenizer, vocab=len(tokenizer))
    matcher = SpecMatcher(SpecGrammar.build(budget=budget), guide)
    row = np.zeros(guide.words, dtype=np.int32)
    out: list[int] = []
    while not matcher.finished:
        assert matcher.error is None
        assert len(out) <= budget, "the spec did not close within its budget"
        matcher.fill_mask(row)
        allowed = np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little"))
        assert len(allowed) > 0
        # hypothesis picks; biased towards the end token and newlines now and then
        token = int(data.draw(st.sampled_from(allowed.tolist())))
        out.append(token)
        matcher.consume(token)
    if out[-1] != guide.eos:  # llguidance stops as soon as only the end token can follow
        matcher.fill_mask(row)
        allowed = np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little"))
        assert allowed.tolist() == [guide.eos]
        out.append(guide.eos)
    _check(tokenizer.decode(out[:-1]), tokens=len(out), budget=budget)


def test_canonical_team_specs_are_inside_the_grammar(tokenizer: Any) -> None:
    """What SFT teaches (template and baseline teams, canonical text, natural tokenization)
    is accepted token by token, so constraining a trained policy costs it nothing."""
    guide = guide_tokenizer(tokenizer, vocab=len(tokenizer))
    tasks = ["What is 2 + 3?", "Which? (A) x (B) y (C) z (D) w", "Write a Python function f(x)"]
    specs = [template_spec(t, variant=v)[1] for t in tasks for v in TemplateVariant]
    specs += [baseline_spec(name, tasks[0]) for name in BASELINES]
    for spec in specs:
        text = format_spec(spec)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        matcher = SpecMatcher(SpecGrammar.build(budget=1024), guide)
        row = np.zeros(guide.words, dtype=np.int32)
        for token in [*ids, guide.eos]:
            matcher.fill_mask(row)
            assert row[token // 32] >> (token % 32) & 1, (text, tokenizer.decode([token]))
            matcher.consume(token)
            assert matcher.error is None, text
        assert matcher.finished


def _policy_request(task: str, constraint: Any, max_tokens: int) -> GenerationRequest:
    messages = tuple(Message(m["role"], m["content"]) for m in policy_messages(task))  # type: ignore[arg-type]
    return GenerationRequest(messages, Decoding(max_tokens=max_tokens), constraint=constraint)


def test_a_batch_mixes_constrained_and_free_rows(tiny_model_dir: Path) -> None:
    model = load_model(ModelSource(str(tiny_model_dir), "float32"))
    grammar = SpecGrammar.build(budget=200)
    free = _policy_request("What is 5 - 2?", None, 12)
    batch = [
        _policy_request("What is 2 + 2?", grammar, 200),
        free,
        _policy_request("Name a prime number.", grammar, 200),
    ]
    results = model.generate_batch(batch)
    for result in (results[0], results[2]):
        _check(result.text, tokens=result.completion_tokens, budget=200)
    assert model.last_guide is not None
    assert model.last_guide.mask_s > 0
    (alone,) = model.generate_batch([free])
    assert results[1].text == alone.text  # the free row was left alone


def test_a_fixed_lark_grammar_through_a_real_server(model_server: ModelServer) -> None:
    async def go() -> tuple[str, str]:
        vllm = OpenAIBackend(model_server.url, model="tiny", grammar_dialect="vllm")
        cpp = OpenAIBackend(model_server.url, model="tiny", grammar_dialect="llamacpp")
        grammar = LarkGrammar('start: ("yes" | "no") "!"')
        try:
            one = await vllm.generate(_policy_request("Answer", grammar, 8))
            two = await cpp.generate(_policy_request("Answer", grammar, 8))
            return one.text, two.text
        finally:
            await vllm.aclose()
            await cpp.aclose()

    for text in asyncio.run(go()):
        assert text in {"yes!", "no!"}


def test_bad_grammars_are_refused_by_the_server(model_server: ModelServer) -> None:
    import httpx

    body = {"model": "tiny", "messages": [{"role": "user", "content": "x"}], "max_tokens": 4}
    gbnf = httpx.post(
        f"{model_server.url}/chat/completions", json={**body, "grammar": 'root ::= "a"'}
    )
    assert gbnf.status_code == 400
    assert "GBNF" in gbnf.json()["error"]["message"]
    broken = httpx.post(
        f"{model_server.url}/chat/completions", json={**body, "guided_grammar": "start: nothing"}
    )
    assert broken.status_code == 400
    assert "invalid grammar" in broken.json()["error"]["message"]


def test_the_spec_grammar_line_by_line_through_a_real_server(model_server: ModelServer) -> None:
    async def go() -> Any:
        backend = OpenAIBackend(model_server.url, model="tiny", grammar_dialect="guided")
        try:
            return await backend.generate(
                _policy_request("What is 2 + 2?", SpecGrammar.build(budget=160), 160)
            )
        finally:
            await backend.aclose()

    result = asyncio.run(go())
    _check(result.text, tokens=result.completion_tokens, budget=160)


def test_a_server_that_ignores_grammars_fails_the_call(tiny_model_dir: Path) -> None:
    """An in-process stand-in for a server without grammar support: the same backend, with
    the grammar dropped (as such a server would)."""

    class Deaf(LocalBackend):
        async def generate(self, request: GenerationRequest) -> Any:
            from dataclasses import replace

            return await super().generate(replace(request, constraint=None))

    deaf = Deaf(ModelSource(str(tiny_model_dir), "float32"))

    async def go() -> None:
        import httpx

        from lemon.serving import create_app

        transport = httpx.ASGITransport(app=create_app(deaf, served_name="tiny"))
        backend = OpenAIBackend("http://deaf/v1", model="tiny", transport=transport)
        with pytest.raises(BackendError, match="did not follow the grammar"):
            await backend.generate(_policy_request("x", SpecGrammar.build(budget=160), 160))

    asyncio.run(go())


def test_the_untrained_packaged_policy_writes_valid_specs_first_time() -> None:
    policy = load_policy("packaged", constrained=True)
    assert policy.constraint(None) is not None
    decision = write_one_spec(policy)
    assert not decision.fallback
    assert len(decision.attempts) == 1
    assert decision.attempts[0].valid
    assert "constrained" in decision.origin


def test_content_id_follows_the_weights(tiny_model_dir: Path, tmp_path: Path) -> None:
    cache = PersistentCallCache(tmp_path / "c.sqlite")
    copy = tmp_path / "model"
    shutil.copytree(tiny_model_dir, copy)
    first = LocalBackend(ModelSource(str(copy), "float32")).content_id(cache)
    assert first == LocalBackend(ModelSource(str(copy), "float32")).content_id(cache)
    assert first != LocalBackend(ModelSource(str(copy), "bfloat16")).content_id(cache)
    weights = next(copy.glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    assert LocalBackend(ModelSource(str(copy), "float32")).content_id(cache) != first
    packaged = LocalBackend(ModelSource(PACKAGED)).content_id(cache)
    assert packaged.startswith("local:")
    assert "name:" not in packaged


def test_grammar_limits_are_typed() -> None:
    with pytest.raises(ValueError, match="max_agents"):
        GrammarLimits(max_agents=0)


def test_a_tokenizers_guide_is_never_another_tokenizers(tokenizer: Any) -> None:
    """The vocabulary masks are cached per tokenizer object, held weakly, and matchers per
    vocabulary digest: a tokenizer made after another was collected (so it may reuse its
    ``id``, which the old cache was keyed by) gets its own vocabulary."""
    import copy
    import gc

    from lemon.backends import guided

    first = guide_tokenizer(tokenizer, vocab=len(tokenizer))
    assert guide_tokenizer(tokenizer, vocab=len(tokenizer)) is first
    other = copy.deepcopy(tokenizer)
    other.add_tokens(["<lemon-extra-token>"])
    second = guide_tokenizer(other, vocab=len(other))
    assert second.vocab == first.vocab + 1
    assert second.digest != first.digest
    del other, second
    gc.collect()
    assert not any("<lemon-extra-token>" in t.get_vocab() for t in guided._TOKENIZERS)
