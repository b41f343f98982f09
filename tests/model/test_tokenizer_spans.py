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
