"""Located data errors: every problem names the file (and line, where there is one)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["DataError"]


class DataError(Exception):
    """A benchmark file is missing, unreadable or malformed.

    Rendered as ``FILE:LINE: message`` when a line is known, ``FILE: message`` otherwise.
    """

    def __init__(self, message: str, *, path: Path | str | None = None, line: int | None = None):
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        super().__init__(self.render())

    def render(self) -> str:
        if self.path is None:
            return self.message
        if self.line is None:
            return f"{self.path}: {self.message}"
        return f"{self.path}:{self.line}: {self.message}"
