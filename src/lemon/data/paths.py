"""Where benchmark files live: the data directory (setting ``LEMON_DATA_DIR``) and its layout.

The layout is that of ``shared/data/benchmarks`` (files under their original names); nothing
is downloaded at import or evaluation time.
"""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path

from lemon.data.errors import DataError
from lemon.data.items import Benchmark

__all__ = ["DATA_DIR_ENV", "Source", "data_dir", "layout", "source_path", "sources"]

DATA_DIR_ENV = "LEMON_DATA_DIR"


class Source(StrEnum):
    """A file set as published: the official test set, or GSM8K's train / MMLU's dev set."""

    TEST = "test"
    TRAIN = "train"
    DEV = "dev"


_FILES: dict[tuple[Benchmark, Source], str] = {
    (Benchmark.GSM8K, Source.TEST): "gsm8k/test.jsonl",
    (Benchmark.GSM8K, Source.TRAIN): "gsm8k/train.jsonl",
    (Benchmark.SVAMP, Source.TEST): "svamp/SVAMP.json",
    (Benchmark.MULTIARITH, Source.TEST): "multiarith/MultiArith.json",
    (Benchmark.AQUA, Source.TEST): "aqua/test.json",
    (Benchmark.MMLU, Source.TEST): "mmlu/test",
    (Benchmark.MMLU, Source.DEV): "mmlu/dev",
    (Benchmark.HUMANEVAL, Source.TEST): "humaneval/HumanEval.jsonl.gz",
}


def layout() -> list[tuple[Benchmark, Source, str]]:
    """Every expected file set and its path relative to the data directory."""
    return [(bench, source, relative) for (bench, source), relative in _FILES.items()]


def sources(benchmark: Benchmark) -> list[Source]:
    """The published file sets of ``benchmark`` (always ``test`` first)."""
    return [source for (bench, source) in _FILES if bench is benchmark]


def data_dir(path: Path | str | None = None) -> Path:
    """The data directory: ``path`` if given, else ``$LEMON_DATA_DIR``; it must exist."""
    if path is None:
        env = os.environ.get(DATA_DIR_ENV)
        if not env:
            raise DataError(
                f"no data directory: set {DATA_DIR_ENV} (e.g. to ../shared/data/benchmarks); "
                "'lemon data' shows the layout"
            )
        path = env
    directory = Path(path)
    if not directory.is_dir():
        raise DataError("data directory does not exist", path=directory)
    return directory


def source_path(
    benchmark: Benchmark, source: Source = Source.TEST, *, directory: Path | str | None = None
) -> Path:
    """The file (or, for MMLU, the folder of CSV files) holding ``benchmark``'s ``source``."""
    relative = _FILES.get((benchmark, source))
    if relative is None:
        known = ", ".join(s.value for s in sources(benchmark))
        raise DataError(f"{benchmark.value} has no {source.value} set (has: {known})")
    return data_dir(directory) / relative
