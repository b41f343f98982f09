"""Character spans to token positions (hand-computed offsets)."""

from __future__ import annotations

import pytest

from lemon.spec import span_to_token_indices

# "capacity: large" tokenised as ["capacity", ":", " large"], with a BOS and padding
OFFSETS = [(0, 0), (0, 8), (8, 9), (9, 15), (0, 0), (0, 0)]


@pytest.mark.parametrize(
    ("span", "expected"),
    [
        ((10, 15), [3]),  # "large" sits inside the token " large"
        ((0, 15), [1, 2, 3]),
        ((8, 9), [2]),
        ((7, 10), [1, 2, 3]),  # straddling spans take every token they touch
        ((15, 15), []),
        ((20, 30), []),
    ],
)
def test_span_to_tokens(span: tuple[int, int], expected: list[int]) -> None:
    assert span_to_token_indices(span, OFFSETS) == expected


def test_invalid_span() -> None:
    with pytest.raises(ValueError, match="invalid span"):
        span_to_token_indices((5, 2), OFFSETS)
