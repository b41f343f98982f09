"""Reading prediction files: JSON Lines of ``{"id": ..., "output": ...}``, located errors."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict

__all__ = ["Prediction", "PredictionError", "read_predictions"]


class PredictionError(Exception):
    """A prediction file problem, rendered as ``FILE:LINE: message`` (or ``FILE: message``)."""

    def __init__(self, message: str, *, path: str, line: int | None = None) -> None:
        self.message, self.path, self.line = message, path, line
        super().__init__(self.render())

    def render(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.message}"


class Prediction(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    output: str
    line: int = 0
    """1-based line in the file it came from (0 when built in code)."""


def read_predictions(path: Path | str) -> list[Prediction]:
    """Every prediction in file order; blank lines are skipped, anything else malformed raises."""
    name = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise PredictionError(f"cannot read: {exc.strerror or exc}", path=name) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise PredictionError("not UTF-8 text", path=name, line=line) from None
    found = []
    for index, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise PredictionError(f"malformed JSON: {exc.msg}", path=name, line=index) from None
        if not isinstance(value, dict):
            raise PredictionError("expected a JSON object", path=name, line=index)
        for key in ("id", "output"):
            if key not in value:
                raise PredictionError(f"missing field {key!r}", path=name, line=index)
            if not isinstance(value[key], str):
                kind = type(value[key]).__name__
                raise PredictionError(
                    f"field {key!r} should be a string, got {kind}", path=name, line=index
                )
        found.append(Prediction(id=value["id"], output=value["output"], line=index))
    return found
