"""Numeric answers (GSM8K, SVAMP, MultiArith): extraction from free text and tolerant equality.

An explicit answer wins over the last number in the text. Explicit forms, any case:
``#### 42``, ``\\boxed{42}``, ``The (final) answer is 42``, ``Answer: 42``. When several appear,
the last one in the text counts; when an explicit form carries no number, the next rule applies.
Numbers may carry thousands separators (``1,234``), a currency sign (``$``, ``€``, ``£``,
``¥``, ``₹``), a sign (``-``, ``+``, ``−``), decimals, a trailing ``%``, and inside an explicit
answer a simple fraction (``3/4``, ``\\frac{3}{4}``). A ``-`` right after a digit, letter or
closing bracket is subtraction, not a sign (``10-3`` holds ``10`` and ``3``). After an answer
phrase only its sentence counts, and the number after its last ``=`` (``The answer is 5 - 3 =
2`` gives 2).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = ["ExtractedNumber", "extract_number", "numbers_equal"]

_NUMBER = re.compile(
    r"""
    (?:(?<![\w)\].])(?P<sign>[-+−]))?     # a sign, unless it reads as subtraction
    (?:\s?(?P<currency>[$€£¥₹])\s?
       (?P<sign2>[-−])?)?                 # $-5
    (?P<digits>
        \d{1,3}(?:,\d{3})+(?:\.\d+)?      # 1,234 or 1,234.5
      | \d+(?:\.\d+)?                     # 1234 or 12.5
      | \.\d+                             # .5
    )
    (?![\d,]*\d)
    """,
    re.VERBOSE,
)
_FRACTION = re.compile(r"\\[dt]?frac\s*\{\s*([-−]?\d+(?:\.\d+)?)\s*\}\s*\{\s*(\d+(?:\.\d+)?)\s*\}")
_SLASH = re.compile(r"^\s*([-−]?\d+)\s*/\s*(\d+)(?!\d)")
_EXPLICIT = re.compile(
    r"(?P<hash>\#\#\#\#)"
    r"|(?P<boxed>\\boxed\s*\{)"
    r"|(?P<phrase>\b(?:the\s+)?(?:final\s+)?answer\s*(?:is|=|:)\s*(?::\s*)?)",
    re.IGNORECASE,
)
_EXPLICIT_WINDOW = 80
_SENTENCE_END = re.compile(r"[.;!?](?:\s|$)")


@dataclass(frozen=True, slots=True)
class ExtractedNumber:
    value: float
    text: str
    explicit: bool


def _to_float(match: re.Match[str]) -> float:
    value = float(match.group("digits").replace(",", ""))
    negative = match.group("sign") in ("-", "−") or match.group("sign2") is not None
    return -value if negative else value


def _boxed_content(text: str, start: int) -> str:
    """The text inside the braces opened just before ``start`` (nested braces balanced)."""
    depth = 1
    for position in range(start, len(text)):
        if text[position] == "{":
            depth += 1
        elif text[position] == "}":
            depth -= 1
            if depth == 0:
                return text[start:position]
    return text[start:]


def _first_number(segment: str) -> ExtractedNumber | None:
    fraction = _FRACTION.search(segment)
    number = _NUMBER.search(segment)
    if fraction and (number is None or fraction.start() <= number.start()):
        numerator = float(fraction.group(1).replace("−", "-"))
        denominator = float(fraction.group(2))
        if denominator:
            return ExtractedNumber(numerator / denominator, fraction.group(0), True)
    if number is None:
        return None
    slash = _SLASH.match(segment[number.start() :])
    if slash and number.group("currency") is None and float(slash.group(2)) != 0:
        value = float(slash.group(1).replace("−", "-")) / float(slash.group(2))
        return ExtractedNumber(value, slash.group(0).strip(), True)
    return ExtractedNumber(_to_float(number), number.group(0).strip(), True)


def extract_number(text: str) -> ExtractedNumber | None:
    """The answer a model's output states, or ``None`` when it holds no number at all."""
    for marker in reversed(list(_EXPLICIT.finditer(text))):
        end = marker.end()
        if marker.group("boxed"):
            segment = _boxed_content(text, end)
        else:
            segment = text[end : end + _EXPLICIT_WINDOW].split("\n\n", 1)[0]
            if marker.group("phrase"):
                segment = _SENTENCE_END.split(segment.split("\n", 1)[0], maxsplit=1)[0]
                segment = segment.rsplit("=", 1)[-1]  # "the answer is 5 - 3 = 2": the result
        found = _first_number(segment)
        if found is not None:
            return found
    last = None
    for last in _NUMBER.finditer(text):  # noqa: B007 - we want the last match
        pass
    if last is None:
        return None
    return ExtractedNumber(_to_float(last), last.group(0).strip(), False)


def numbers_equal(a: float, b: float, *, rel_tol: float = 1e-6, abs_tol: float = 1e-6) -> bool:
    """Equal within a small tolerance (``0.1 + 0.2`` equals ``0.3``; ``17`` never ``17.01``)."""
    return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)
