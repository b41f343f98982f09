"""Mutation spans land on the right tokens of the real policy tokenizer (SmolLM2)."""

from __future__ import annotations

from typing import Any

import pytest

from lemon.backends.packaged import packaged_model
from lemon.spec import mutations, parse_spec, span_to_token_indices
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return packaged_model().load_tokenizer()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_mutation_spans_map_to_the_tokens_that_spell_the_value(tokenizer: Any, path: Any) -> None:
    text = path.read_text()
    parsed = parse_spec(text)
    encoding = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    offsets = encoding["offset_mapping"]
    ids = encoding["input_ids"]
    found = mutations(parsed)
    assert found
    for mutation in found:
        start, end = mutation.span
        positions = span_to_token_indices(mutation.span, offsets)
        assert positions == list(range(positions[0], positions[-1] + 1))  # contiguous
        decoded = tokenizer.decode([ids[i] for i in positions])
        value = text[start:end]
        # The tokens spell the value, plus at most the whitespace or punctuation merged into
        # the edge tokens by the BPE (e.g. " large", "[planner").
        assert value in decoded
        assert len(decoded) - len(value) <= 3, (value, decoded)
        # Tokens outside the span do not touch it.
        before = positions[0] - 1
        after = positions[-1] + 1
        if before >= 0:
            assert offsets[before][1] <= start
        if after < len(offsets):
            assert offsets[after][0] >= end


def test_the_table_teacher_counts_the_policys_prompt_tokens() -> None:
    """`lemon teacher tables` prices the policy's own tokens with the packaged tokenizer. Under
    transformers 5 `apply_chat_template(tokenize=True)` returns a BatchEncoding, a UserDict (not
    a dict): the counter once took its length, 2 keys, for the prompt's tokens."""
    from transformers import AutoTokenizer

    from lemon.backends.converting import converted_packaged_model
    from lemon.cli.teacher import _token_counter

    count, how = _token_counter()
    assert how.startswith("the packaged SmolLM2-135M-Instruct tokenizer")
    messages = [{"role": "user", "content": "Sam has 3 apples and buys 4 more. How many now?"}]
    tokenizer = AutoTokenizer.from_pretrained(str(converted_packaged_model("bfloat16")))
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    prompt = len(tokenizer(text, add_special_tokens=False)["input_ids"])
    assert prompt > 20
    completion = "agents:\n  - name: solver\n"
    expected = prompt + len(tokenizer(completion, add_special_tokens=False)["input_ids"]) + 1
    assert count(messages, completion) == expected
