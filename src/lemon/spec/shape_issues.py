"""Pydantic's errors on a spec's shape, translated into issues located at their YAML nodes.

Below :mod:`lemon.spec.validation` and :mod:`lemon.spec.roles` (the role files are checked the
same way), so that neither imports the other back.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

from pydantic import ValidationError

from lemon.spec.issues import Issue
from lemon.spec.models import Agent, LemonSpec, LemonSpecBody, ObjectMeta
from lemon.spec.source import NodePath, SourceMap

__all__ = ["pydantic_issues", "suggest"]

_KNOWN_KEYS = sorted(
    {
        *Agent.model_fields,
        *LemonSpecBody.model_fields,
        *LemonSpec.model_fields,
        *ObjectMeta.model_fields,
    }
)


def _dotted(path: Sequence[str | int]) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out or "<root>"


def suggest(word: str, choices: Iterable[str]) -> str:
    """``; did you mean X?`` for the closest of ``choices``, or nothing."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _names_an_agent(path: NodePath) -> bool:
    return bool(path) and (
        path[-1] in {"name", "output", "profile"} or (len(path) > 1 and path[-2] == "depends_on")
    )


def pydantic_issues(
    exc: ValidationError, source_map: SourceMap, *, base: NodePath = ()
) -> list[Issue]:
    """Translate pydantic's errors into issues located at their YAML nodes."""
    issues = []
    for error in exc.errors(include_url=False):
        path: NodePath = (*base, *(step for step in error["loc"] if isinstance(step, str | int)))
        kind = error["type"]
        on_key = path[-1:] == ("[key]",)  # a mapping's key failed (e.g. an unknown tier)
        if on_key:
            path = path[:-1]
        where = _dotted(path)
        if on_key:
            message = f"{where}: invalid key: {error['msg']}"
            issues.append(source_map.locate(path, message, at_key=True))
            continue
        if kind == "extra_forbidden":
            key = str(path[-1])
            message = f"unknown key {key!r} at {where}{suggest(key, _KNOWN_KEYS)}"
            issues.append(source_map.locate(path, message, at_key=True))
        elif kind == "too_short" and path[-1:] == ("agents",):
            issues.append(source_map.locate(path, "no agents: a spec needs at least one"))
        elif kind == "string_pattern_mismatch" and _names_an_agent(path):
            message = (
                f"{where}: {error.get('input')!r} is not a valid name (a lowercase DNS-1123 "
                "label: a-z, 0-9 and '-', starting and ending with a letter or digit)"
            )
            issues.append(source_map.locate(path, message))
        elif kind == "missing":
            message = f"missing required key {str(path[-1])!r} at {where}"
            issues.append(source_map.locate(path[:-1], message))
        else:
            got = error.get("input")
            shown = f" (got {got!r})" if isinstance(got, str | int | float | bool) else ""
            message = f"{where}: {error['msg']}{shown}"
            if got is None and kind in {"string_type", "enum", "literal_error"}:
                message = f"{where}: a value is required here (got null)"
            issues.append(source_map.locate(path, message))
    return issues
