"""From a character span in a completion to the positions of the tokens that spell it."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["span_to_token_indices"]


def span_to_token_indices(span: tuple[int, int], offsets: Sequence[Sequence[int]]) -> list[int]:
    """Indices of the tokens whose characters overlap ``span`` (``[start, end)``).

    ``offsets`` is a tokenizer's offset mapping for the same text (``return_offsets_mapping``):
    one ``(start, end)`` character range per token. Tokens with an empty range (special tokens,
    padding) never match. A token that straddles the span's edge counts: credit for a field
    goes to every token that spells part of it.
    """
    start, end = span
    if start < 0 or end < start:
        raise ValueError(f"invalid span {span!r}: need 0 <= start <= end")
    return [
        index
        for index, (token_start, token_end) in enumerate(offsets)
        if token_start < token_end and token_start < end and token_end > start
    ]
