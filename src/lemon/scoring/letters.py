"""Option letters (AQuA, MMLU): extraction from free text, with the option's text as fallback.

In order, the first rule that finds a valid letter wins:

1. an explicit answer: ``The answer is C``, ``Answer: (C)``, ``#### C``, ``\\boxed{C}`` (the
   last such statement in the text), else ``the correct option is C`` (``correct``, ``right``
   or ``best`` ``option`` or ``choice``; a bare "option D" is not an answer); a lower-case
   letter counts only where it ends the statement (``answer: c``);
2. a bare reply: the whole output is a letter, optionally bracketed or followed by ``)``/``.``/``:``
   and the option text (``C``, ``(C)``, ``C) 42``);
3. the last bracketed letter, ``(C)``;
4. the option's text: the output names exactly one option's text (case and spacing ignored;
   when several appear, the one that appears last wins, longer texts first on ties).

Only letters of the item's options count (``A``-``D`` for MMLU, ``A``-``E`` for AQuA).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["extract_letter"]

_LETTER = r"\(?\s*\b([A-J])\b(?![\w'])"
_ANSWER = re.compile(
    r"(?:\b(?:the\s+)?(?:final\s+|correct\s+|best\s+)?answer"
    r"(?:\s+(?:is|would\s+be|should\s+be))?\s*(?:[:=]\s*)?|\#\#\#\#\s*|\\boxed\s*\{\s*)" + _LETTER,
    re.IGNORECASE,
)
_OPTION = re.compile(
    r"\b(?:the\s+)?(?:correct|right|best)\s+(?:option|choice)"
    r"(?:\s+(?:is|would\s+be|should\s+be))?\s*(?:[:=]\s*)?" + _LETTER,
    re.IGNORECASE,
)
_LOWER_END = re.compile(r"\)|[ \t]*[.!]?[ \t]*(?:\n|$)")
_BARE = re.compile(r"^\s*[\(\[]?\s*([A-J])\s*(?:[\)\]\.:]|$)(?:\s|$)")
_BRACKETED = re.compile(r"\(([A-J])\)")


def _explicit_letter(text: str, match: re.Match[str]) -> str | None:
    """The matched letter; a lower-case one only when it ends the statement (``answer: c``,
    ``answer is (c).``), since ``the answer is a number`` uses the article."""
    letter = match.group(1)
    if letter.isupper():
        return letter
    if _LOWER_END.match(text, match.end()):
        return letter.upper()
    return None


def _normalise(text: str) -> str:
    return " ".join(text.lower().split())


def extract_letter(text: str, *, options: Sequence[str]) -> str | None:
    """The option letter an output chooses, or ``None`` when it names none."""
    letters = "ABCDEFGHIJ"[: len(options)]
    for pattern in (_ANSWER, _OPTION):
        for match in reversed(list(pattern.finditer(text))):
            letter = _explicit_letter(text, match)
            if letter is not None and letter in letters:
                return letter
    bare = _BARE.match(text)
    if bare and bare.group(1) in letters:
        return bare.group(1)
    for match in reversed(list(_BRACKETED.finditer(text))):
        if match.group(1) in letters:
            return match.group(1)
    return _by_option_text(text, options, letters)


def _by_option_text(text: str, options: Sequence[str], letters: str) -> str | None:
    haystack = _normalise(text)
    best: tuple[int, int, str] | None = None
    for letter, option in zip(letters, options, strict=True):
        needle = _normalise(option)
        if not needle:
            continue
        position = _find_word(haystack, needle)
        if position < 0:
            continue
        candidate = (position + len(needle), len(needle), letter)
        if best is None or candidate[:2] > best[:2]:
            best = candidate
    return None if best is None else best[2]


def _find_word(haystack: str, needle: str) -> int:
    """Last position of ``needle`` in ``haystack`` not inside a longer word or number."""
    pattern = re.compile(r"(?<![\w.])" + re.escape(needle) + r"(?![\w])")
    found = -1
    for match in pattern.finditer(haystack):
        found = match.start()
    return found
