"""Located errors: every problem in a spec points at the YAML node that caused it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Issue", "SpecError"]


@dataclass(frozen=True, slots=True, order=True)
class Issue:
    """One problem in a spec document, located at a 1-based line and column."""

    line: int
    column: int
    message: str

    def render(self, source: str) -> str:
        """Format as ``SOURCE:LINE:COL: message`` (the format editors and CI annotators parse)."""
        return f"{source}:{self.line}:{self.column}: {self.message}"


class SpecError(ValueError):
    """A spec was rejected; ``issues`` holds every independent problem found in one pass."""

    def __init__(self, issues: Iterable[Issue], *, source: str = "<spec>") -> None:
        self.issues: tuple[Issue, ...] = tuple(sorted(set(issues)))
        self.source = source
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(issue.render(self.source) for issue in self.issues)
