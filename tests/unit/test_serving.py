"""The serve-model app's pure parts: how much of a streamed text may go out before a stop
string is decided, and the error table."""

from __future__ import annotations

import pytest

from lemon.serving import ERRORS, releasable


@pytest.mark.parametrize(
    ("text", "stops", "expected"),
    [
        ("abc", (), 3),
        ("abc", ("xyz",), 3),
        ("abc\n", ("\n\n",), 3),  # "\n" may become the stop: held back
        ("ab", ("abc",), 0),
        ("hello wor", ("world", "or"), 6),  # the longest possible start wins
        ("hello w", ("world", "xw"), 6),
        ("", ("x",), 0),
    ],
)
def test_releasable_holds_back_what_could_start_a_stop(
    text: str, stops: tuple[str, ...], expected: int
) -> None:
    assert releasable(text, stops) == expected


def test_error_table_matches_openai_and_vllm() -> None:
    assert ERRORS["model_not_found"] == (404, "invalid_request_error")
    assert ERRORS["invalid_request"][0] == 400
    assert ERRORS["unavailable"][0] == 503
