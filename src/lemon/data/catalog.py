"""What the data directory holds: one entry per benchmark file set (for ``lemon data``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from lemon.data.items import Benchmark
from lemon.data.loaders import load_items
from lemon.data.paths import DataError, PublishedSplit, data_dir, source_path, sources

__all__ = ["OFFICIAL_SOURCES", "Entry", "catalog"]

OFFICIAL_SOURCES: dict[Benchmark, str] = {
    Benchmark.GSM8K: "https://github.com/openai/grade-school-math (grade_school_math/data/)",
    Benchmark.SVAMP: "https://github.com/arkilpatel/SVAMP (SVAMP.json)",
    Benchmark.MULTIARITH: "https://github.com/kojima-takeshi188/zero_shot_cot "
    "(dataset/MultiArith/MultiArith.json)",
    Benchmark.AQUA: "https://github.com/google-deepmind/AQuA (test.json)",
    Benchmark.MMLU: "https://people.eecs.berkeley.edu/~hendrycks/data.tar, as CSVs with a header "
    "row question,choice0..choice3,answer (answer 0-3)",
    Benchmark.HUMANEVAL: "https://github.com/openai/human-eval (data/HumanEval.jsonl.gz)",
}


class Entry(BaseModel):
    model_config = ConfigDict(frozen=True)

    benchmark: Benchmark
    source: PublishedSplit
    path: str
    present: bool
    items: int | None = None
    error: str | None = None


def catalog(*, directory: Path | str | None = None, count: bool = True) -> list[Entry]:
    """Every expected file set, whether it is present and (with ``count``) how many items load."""
    root = data_dir(directory)
    entries = []
    for benchmark in Benchmark:
        for source in sources(benchmark):
            path = source_path(benchmark, source, directory=root)
            entry = Entry(benchmark=benchmark, source=source, path=str(path), present=path.exists())
            if entry.present and count:
                try:
                    n = len(load_items(benchmark, source=source, directory=root))
                    entry = entry.model_copy(update={"items": n})
                except DataError as exc:
                    entry = entry.model_copy(update={"error": exc.render()})
            entries.append(entry)
    return entries
