"""Readers for the six benchmarks' files, producing typed items with stable ids.

Ids: ``gsm8k:<0-based line>``, ``svamp:<ID>``, ``multiarith:<iIndex>``, ``aqua:<0-based line>``,
``mmlu:<subject>:<0-based row, header excluded>``, ``humaneval:<task_id>``. The training-only
files get their own prefixes so they never collide with a test id: ``gsm8k-train:<line>`` and
``mmlu-dev:<subject>:<row>``. Every problem is a :class:`DataError` naming the file and line.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from lemon.data.items import Benchmark, ChoiceItem, CodeItem, Item, NumericItem
from lemon.data.paths import DataError, PublishedSplit, source_path

__all__ = ["load_items", "mmlu_subjects"]

_LETTERS = "ABCDE"
_AQUA_OPTION = re.compile(r"^\s*([A-E])\s*\)\s?(.*)$", re.DOTALL)


def load_items(
    benchmark: Benchmark | str,
    *,
    source: PublishedSplit | str = PublishedSplit.TEST,
    directory: Path | str | None = None,
) -> tuple[Item, ...]:
    """Every item of one published file set, in file order (cached per resolved path)."""
    bench, src = Benchmark(benchmark), PublishedSplit(source)
    path = source_path(bench, src, directory=directory).resolve()
    return _load(bench, src, path)


@lru_cache(maxsize=32)
def _load(benchmark: Benchmark, source: PublishedSplit, path: Path) -> tuple[Item, ...]:
    if not path.exists():
        raise DataError(
            f"missing {benchmark.value} {source.value} data (see 'lemon data' for the layout)",
            path=path,
        )
    if benchmark is Benchmark.GSM8K:
        prefix = "gsm8k" if source is PublishedSplit.TEST else "gsm8k-train"
        return tuple(_gsm8k(path, prefix))
    if benchmark is Benchmark.SVAMP:
        return tuple(_svamp(path))
    if benchmark is Benchmark.MULTIARITH:
        return tuple(_multiarith(path))
    if benchmark is Benchmark.AQUA:
        return tuple(_aqua(path))
    if benchmark is Benchmark.MMLU:
        prefix = "mmlu" if source is PublishedSplit.TEST else "mmlu-dev"
        return tuple(_mmlu(path, source, prefix))
    return tuple(_humaneval(path))


def mmlu_subjects(
    source: PublishedSplit | str = PublishedSplit.TEST, *, directory: Path | str | None = None
) -> list[str]:
    """The MMLU subjects present, sorted."""
    folder = source_path(Benchmark.MMLU, PublishedSplit(source), directory=directory)
    suffix = f"_{PublishedSplit(source).value}.csv"
    return sorted(p.name.removesuffix(suffix) for p in folder.glob(f"*{suffix}"))


# -- helpers ------------------------------------------------------------------------------------


def _read_text(path: Path) -> str:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                return handle.read()
        return path.read_text(encoding="utf-8")
    except (OSError, EOFError) as exc:
        raise DataError(
            f"cannot read: {getattr(exc, 'strerror', None) or exc}", path=path
        ) from None
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text ({exc.reason})", path=path) from None


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(0-based line index, object)`` for every line; blank lines are errors too."""
    lines = _read_text(path).split("\n")  # not splitlines(): U+0085/U+2028 are not line ends
    if lines and not lines[-1].strip():
        lines.pop()
    for index, line in enumerate(lines):
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"malformed JSON: {exc.msg}", path=path, line=index + 1) from None
        if not isinstance(value, dict):
            raise DataError("expected a JSON object", path=path, line=index + 1)
        yield index, value


def _json_array(path: Path) -> list[dict[str, Any]]:
    try:
        value = json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        raise DataError(f"malformed JSON: {exc.msg}", path=path, line=exc.lineno) from None
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise DataError("expected a JSON array of objects", path=path)
    return value


def _field(
    record: dict[str, Any],
    key: str,
    kind: type | tuple[type, ...],
    *,
    path: Path,
    where: str,
    line: int | None = None,
) -> Any:
    if key not in record:
        raise DataError(f"{where}: missing field {key!r}", path=path, line=line)
    value = record[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise DataError(
            f"{where}: field {key!r} should be {names}, got {type(value).__name__}",
            path=path,
            line=line,
        )
    return value


def _number(text: str, *, path: Path, where: str, line: int | None = None) -> float:
    try:
        value = float(text.replace(",", "").strip())
    except ValueError:
        raise DataError(f"{where}: answer {text!r} is not a number", path=path, line=line) from None
    if not math.isfinite(value):
        raise DataError(f"{where}: answer {text!r} is not finite", path=path, line=line)
    return value


# -- one reader per format ----------------------------------------------------------------------


def _gsm8k(path: Path, prefix: str) -> Iterator[NumericItem]:
    for index, record in _json_lines(path):
        where, line = f"item {index}", index + 1
        question = _field(record, "question", str, path=path, where=where, line=line)
        solution = _field(record, "answer", str, path=path, where=where, line=line)
        if "####" not in solution:
            raise DataError(f"{where}: answer has no '#### <final>'", path=path, line=line)
        final = solution.rsplit("####", 1)[1].strip()
        value = _number(final, path=path, where=where, line=line)
        yield NumericItem(
            id=f"{prefix}:{index}",
            benchmark=Benchmark.GSM8K,
            question=question,
            answer=value,
            answer_text=final,
        )


def _svamp(path: Path) -> Iterator[NumericItem]:
    for index, record in enumerate(_json_array(path)):
        where = f"item {index}"
        ident = _field(record, "ID", str, path=path, where=where)
        body = _field(record, "Body", str, path=path, where=where).strip()
        question = _field(record, "Question", str, path=path, where=where).strip()
        answer = _field(record, "Answer", (int, float), path=path, where=where)
        yield NumericItem(
            id=f"svamp:{ident}",
            benchmark=Benchmark.SVAMP,
            question=f"{body} {question}",
            answer=float(answer),
            answer_text=str(answer),
        )


def _multiarith(path: Path) -> Iterator[NumericItem]:
    for index, record in enumerate(_json_array(path)):
        where = f"item {index}"
        ident = _field(record, "iIndex", int, path=path, where=where)
        question = _field(record, "sQuestion", str, path=path, where=where).strip()
        solutions = _field(record, "lSolutions", list, path=path, where=where)
        if not solutions or not isinstance(solutions[0], int | float):
            raise DataError(f"{where}: lSolutions[0] should be a number", path=path)
        yield NumericItem(
            id=f"multiarith:{ident}",
            benchmark=Benchmark.MULTIARITH,
            question=question,
            answer=float(solutions[0]),
            answer_text=str(solutions[0]),
        )


def _aqua(path: Path) -> Iterator[ChoiceItem]:
    for index, record in _json_lines(path):
        where, line = f"item {index}", index + 1
        question = _field(record, "question", str, path=path, where=where, line=line)
        raw = _field(record, "options", list, path=path, where=where, line=line)
        correct = _field(record, "correct", str, path=path, where=where, line=line).strip()
        options = []
        for position, option in enumerate(raw):
            match = _AQUA_OPTION.match(option) if isinstance(option, str) else None
            if match is None or match.group(1) != _LETTERS[position]:
                raise DataError(
                    f"{where}: option {position} should start with '{_LETTERS[position]})'",
                    path=path,
                    line=line,
                )
            options.append(match.group(2).strip())
        if correct not in _LETTERS[: len(options)]:
            raise DataError(
                f"{where}: correct answer {correct!r} is not an option letter", path=path, line=line
            )
        yield ChoiceItem(
            id=f"aqua:{index}",
            benchmark=Benchmark.AQUA,
            question=question,
            options=tuple(options),
            answer=correct,
        )


def _mmlu(folder: Path, source: PublishedSplit, prefix: str) -> Iterator[ChoiceItem]:
    suffix = f"_{source.value}.csv"
    files = sorted(folder.glob(f"*{suffix}"))
    if not files:
        raise DataError(f"no *{suffix} files", path=folder)
    for path in files:
        subject = path.name.removesuffix(suffix)
        yield from _mmlu_file(path, subject, prefix)


def _mmlu_file(path: Path, subject: str, prefix: str) -> Iterator[ChoiceItem]:
    text = _read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        raise DataError("empty file (expected a header row)", path=path, line=1) from None
    except csv.Error as exc:
        raise DataError(f"malformed CSV: {exc}", path=path, line=1) from None
    expected = ["question", "choice0", "choice1", "choice2", "choice3", "answer"]
    if header != expected:
        raise DataError(f"header should be {','.join(expected)}", path=path, line=1)
    row_index = 0
    while True:
        line = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise DataError(f"malformed CSV: {exc}", path=path, line=line) from None
        if len(row) != 6:
            raise DataError(f"expected 6 fields, got {len(row)}", path=path, line=line)
        if row[5].strip() not in {"0", "1", "2", "3"}:
            raise DataError(f"answer {row[5]!r} should be 0-3", path=path, line=line)
        yield ChoiceItem(
            id=f"{prefix}:{subject}:{row_index}",
            benchmark=Benchmark.MMLU,
            question=row[0],
            options=tuple(row[1:5]),
            answer="ABCD"[int(row[5])],
            subject=subject,
        )
        row_index += 1


def _humaneval(path: Path) -> Iterator[CodeItem]:
    for index, record in _json_lines(path):
        where, line = f"item {index}", index + 1
        fields = {
            key: _field(record, key, str, path=path, where=where, line=line)
            for key in ("task_id", "prompt", "entry_point", "test", "canonical_solution")
        }
        yield CodeItem(
            id=f"humaneval:{fields['task_id']}",
            benchmark=Benchmark.HUMANEVAL,
            **fields,
        )
