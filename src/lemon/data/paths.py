"""Where benchmark files live: the data directory, its layout, and the located error for a
file that is missing, unreadable or malformed.

The project ships the benchmark files as package data (``lemon/data/benchmarks/``, with each
dataset's source, licence and a ``SHA256SUMS``), so a fresh clone or an installed wheel needs no
setting. ``$LEMON_DATA_DIR`` or an explicit directory overrides that copy; the layout is the
same (files under their original names). Nothing is downloaded, at import or ever.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Literal

from lemon.data.items import Benchmark

__all__ = [
    "DATA_DIR_ENV",
    "PACKAGED_DATA_DIR",
    "DataError",
    "DataLocation",
    "PublishedSplit",
    "data_dir",
    "layout",
    "locate_data",
    "source_path",
    "sources",
    "verify_checksums",
]


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


DATA_DIR_ENV = "LEMON_DATA_DIR"
PACKAGED_DATA_DIR = Path(__file__).resolve().parent / "benchmarks"
"""The copy shipped with the package (``lemon/data/benchmarks``)."""
CHECKSUMS = "SHA256SUMS"


class PublishedSplit(StrEnum):
    """A benchmark's file set as published: the official test set, or GSM8K's train / MMLU's dev
    set (not a split LEMON carves, :class:`~lemon.data.splits.Split`)."""

    TEST = "test"
    TRAIN = "train"
    DEV = "dev"


_FILES: dict[tuple[Benchmark, PublishedSplit], str] = {
    (Benchmark.GSM8K, PublishedSplit.TEST): "gsm8k/test.jsonl",
    (Benchmark.GSM8K, PublishedSplit.TRAIN): "gsm8k/train.jsonl",
    (Benchmark.SVAMP, PublishedSplit.TEST): "svamp/SVAMP.json",
    (Benchmark.MULTIARITH, PublishedSplit.TEST): "multiarith/MultiArith.json",
    (Benchmark.AQUA, PublishedSplit.TEST): "aqua/test.json",
    (Benchmark.MMLU, PublishedSplit.TEST): "mmlu/test",
    (Benchmark.MMLU, PublishedSplit.DEV): "mmlu/dev",
    (Benchmark.HUMANEVAL, PublishedSplit.TEST): "humaneval/HumanEval.jsonl.gz",
}


def layout() -> list[tuple[Benchmark, PublishedSplit, str]]:
    """Every expected file set and its path relative to the data directory."""
    return [(bench, source, relative) for (bench, source), relative in _FILES.items()]


def sources(benchmark: Benchmark) -> list[PublishedSplit]:
    """The published file sets of ``benchmark`` (always ``test`` first)."""
    return [source for (bench, source) in _FILES if bench is benchmark]


Origin = Literal["argument", "environment", "packaged"]


@dataclass(frozen=True)
class DataLocation:
    """The data directory in use and why: given explicitly, from the environment, or shipped."""

    path: Path
    origin: Origin

    def describe(self) -> str:
        why = {
            "argument": "given with --data-dir",
            "environment": f"from ${DATA_DIR_ENV}",
            "packaged": "the copy shipped with lemon",
        }[self.origin]
        return f"{self.path} ({why})"


def locate_data(path: Path | str | None = None) -> DataLocation:
    """``path`` if given, else ``$LEMON_DATA_DIR`` if set, else the packaged copy; it must exist."""
    if path is not None:
        location = DataLocation(Path(path), "argument")
    elif os.environ.get(DATA_DIR_ENV):
        location = DataLocation(Path(os.environ[DATA_DIR_ENV]), "environment")
    else:
        location = DataLocation(PACKAGED_DATA_DIR, "packaged")
    if not location.path.is_dir():
        hint = {
            "argument": "",
            "environment": f" (set by ${DATA_DIR_ENV}; unset it to use the shipped copy)",
            "packaged": " (the shipped copy is missing: reinstall lemon-orchestration, or set "
            f"${DATA_DIR_ENV} to a directory laid out as 'lemon data' shows)",
        }[location.origin]
        raise DataError("data directory does not exist" + hint, path=location.path)
    return location


def data_dir(path: Path | str | None = None) -> Path:
    """The data directory (see :func:`locate_data`)."""
    return locate_data(path).path


def verify_checksums(directory: Path | str | None = None) -> list[str]:
    """Check every file listed in the directory's ``SHA256SUMS``; returns the problems found
    (``FILE: message``), empty when every file is present with its recorded hash."""
    root = data_dir(directory)
    sums = root / CHECKSUMS
    if not sums.is_file():
        return [f"{sums}: missing (no checksums to verify against)"]
    problems = []
    for number, line in enumerate(sums.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        expected, _, relative = line.partition("  ")
        if len(expected) != 64 or not relative:
            problems.append(f"{sums}:{number}: malformed line")
            continue
        path = root / relative
        if not path.is_file():
            problems.append(f"{path}: missing")
            continue
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != expected:
            problems.append(f"{path}: sha256 {digest}, expected {expected}")
    return problems


def source_path(
    benchmark: Benchmark,
    source: PublishedSplit = PublishedSplit.TEST,
    *,
    directory: Path | str | None = None,
) -> Path:
    """The file (or, for MMLU, the folder of CSV files) holding ``benchmark``'s ``source``."""
    relative = _FILES.get((benchmark, source))
    if relative is None:
        known = ", ".join(s.value for s in sources(benchmark))
        raise DataError(f"{benchmark.value} has no {source.value} set (has: {known})")
    return data_dir(directory) / relative
