"""What a training run reads (``TrainingConfig.data``): one typed value, parsed once.

On the wire (a config file, a ``LemonTraining``) it stays one string, in one of these forms:

- ``synthetic:<N>`` / ``synthetic-v2:<N>``: N tasks of simulator v1 / v2
  (:mod:`lemon.learning.simulator`, :mod:`lemon.learning.simulator_v2`), GRPO only;
- ``benchmark:<name>[:<split>[:<limit>[:<offset>]]]``: a shipped benchmark's items (default
  split ``train``, the held-in items; limit 0 means every item), GRPO only;
- ``table:<dir>[,<dir>...][:<limit>[:<offset>[:<part>]]]``: the items of one or more outcome
  tables (:mod:`lemon.tables`; several: a mixed workload, the tables' items in the order given),
  GRPO only: rollouts whose worker calls the tables hold are answered from them, the rest run
  live and join the run's calls; ``part`` is ``all`` (default), ``fit`` or ``validation``: a
  train table's fit part or its validation part (:func:`lemon.data.splits.validation_ids`, by
  template), so that held-out scoring never reads an item the policy trains on;
- anything else: a path to a JSONL file (SFT rows, or GRPO task rows).

:func:`parse_data` turns the string into a :data:`TrainingData` value (a ``ValueError`` saying
what is wrong otherwise) and ``str()`` of the value gives the string back.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "BenchmarkData",
    "FileData",
    "SyntheticData",
    "SyntheticV2Data",
    "TableData",
    "TrainingData",
    "parse_data",
]


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SyntheticData(_Data):
    kind: Literal["synthetic"] = "synthetic"
    tasks: int = Field(ge=1)

    def __str__(self) -> str:
        return f"synthetic:{self.tasks}"


class SyntheticV2Data(_Data):
    kind: Literal["synthetic-v2"] = "synthetic-v2"
    tasks: int = Field(ge=1)

    def __str__(self) -> str:
        return f"synthetic-v2:{self.tasks}"


class BenchmarkData(_Data):
    kind: Literal["benchmark"] = "benchmark"
    name: str
    split: Literal["train", "test", "all"] = "train"
    limit: int = Field(default=0, ge=0)
    offset: int = Field(default=0, ge=0)

    def __str__(self) -> str:
        return f"benchmark:{self.name}:{self.split}:{self.limit}:{self.offset}"


class TableData(_Data):
    kind: Literal["table"] = "table"
    path: str = Field(min_length=1)
    """One table directory, or several joined by commas."""
    limit: int = Field(default=0, ge=0)
    offset: int = Field(default=0, ge=0)
    part: Literal["all", "fit", "validation"] = "all"

    @property
    def paths(self) -> list[str]:
        return [p for p in self.path.split(",") if p]

    def __str__(self) -> str:
        tail = "" if self.part == "all" else f":{self.part}"
        return f"table:{self.path}:{self.limit}:{self.offset}{tail}"


class FileData(_Data):
    kind: Literal["file"] = "file"
    path: str = Field(min_length=1)

    def __str__(self) -> str:
        return self.path


TrainingData = Annotated[
    SyntheticData | SyntheticV2Data | BenchmarkData | TableData | FileData,
    Field(discriminator="kind"),
]


def _count(text: str, prefix: str) -> int:
    value = text.removeprefix(prefix)
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"data {text!r}: expected {prefix}<N> with N a positive integer")
    return int(value)


def _numbers(text: str, parts: list[str], labels: tuple[str, ...]) -> list[int]:
    numbers = []
    for label, value in zip(labels, parts, strict=False):
        if value == "":
            numbers.append(0)
            continue
        if not value.isdigit():
            raise ValueError(f"data {text!r}: {label} must be a whole number, not {value!r}")
        numbers.append(int(value))
    return [*numbers, 0, 0][: len(labels)]


def _benchmark(text: str) -> BenchmarkData:
    from lemon.data.items import Benchmark

    parts = text.split(":")
    if not 2 <= len(parts) <= 5 or not parts[1]:
        raise ValueError(f"data {text!r}: expected benchmark:<name>[:<split>[:<limit>[:<offset>]]]")
    known = [b.value for b in Benchmark]
    if parts[1] not in known:
        raise ValueError(
            f"data {text!r}: unknown benchmark {parts[1]!r} (known: {', '.join(known)})"
        )
    split = parts[2] if len(parts) > 2 and parts[2] else "train"
    if split not in ("train", "test", "all"):
        raise ValueError(f"data {text!r}: split must be train, test or all, not {split!r}")
    limit, offset = _numbers(text, parts[3:], ("limit", "offset"))
    return BenchmarkData(name=parts[1], split=split, limit=limit, offset=offset)


_PARTS = ("all", "fit", "validation")


def _table(text: str) -> TableData:
    body = text.removeprefix("table:")
    parts = body.split(":")
    path, numbers = parts[0], parts[1:]
    part = "all"
    if len(numbers) == 3:
        part = numbers.pop()
        if part not in _PARTS:
            raise ValueError(f"data {text!r}: part must be all, fit or validation, not {part!r}")
    if not [p for p in path.split(",") if p] or len(numbers) > 2:
        raise ValueError(
            f"data {text!r}: expected table:<dir>[,<dir>...][:<limit>[:<offset>[:<part>]]]"
        )
    limit, offset = _numbers(text, numbers, ("limit", "offset"))
    return TableData(path=path, limit=limit, offset=offset, part=part)


def parse_data(text: str) -> SyntheticData | SyntheticV2Data | BenchmarkData | TableData | FileData:
    """The typed form of a data string (see the module docstring); ``ValueError`` otherwise."""
    if text.startswith("synthetic-v2:"):
        return SyntheticV2Data(tasks=_count(text, "synthetic-v2:"))
    if text.startswith("synthetic:"):
        return SyntheticData(tasks=_count(text, "synthetic:"))
    if text.startswith("benchmark:"):
        return _benchmark(text)
    if text.startswith("table:"):
        return _table(text)
    if not text.strip():
        raise ValueError("data: empty")
    return FileData(path=text)
