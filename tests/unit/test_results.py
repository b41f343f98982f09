"""Measured figures have their raw results: every results path the README and docs name (under
``benchmarks/results/`` or ``experiments/``) exists, and every file ``benchmarks/record.py`` wrote
carries its command, load and output."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

RESULTS = [ROOT / "benchmarks" / "results", ROOT / "experiments"]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_PATH = re.compile(r"(?:benchmarks/results|experiments)/[\w.*/-]*[\w*/]")


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: path.name)
def test_named_results_exist(doc: Path) -> None:
    named = set(_PATH.findall(doc.read_text(encoding="utf-8")))
    missing = [path for path in sorted(named) if not list(ROOT.glob(path.rstrip("/")))]
    assert missing == []


def test_recorded_results_carry_their_command() -> None:
    recorded = 0
    for path in sorted(p for results in RESULTS for p in results.rglob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        if not (isinstance(record, dict) and "recorded_at" in record):
            continue  # written by hand or by a bench's own --save, before record.py
        recorded += 1
        where = path.relative_to(ROOT)
        assert record["command"].startswith(("lemon bench ", "LEMON_")), where
        assert len(record["loadavg_before"]) == 3, where
        assert record["exit_code"] == 0, where
        assert record["result"]["benchmark"], where
    assert recorded > 0
