"""Paired comparisons of two teams of one outcome table, item by item:

    python experiments/team-pairs/table_pairs.py tables/mmlu-test quick-large expert-large

Pairs are ``A B`` arguments (A minus B). For each pair: the items both answered, the accuracy
difference with its 95% paired bootstrap interval (``lemon.scoring.stats``, 2,000 resamples,
seed 0), the tier-priced cost
ratio A / B, and how many answers each side gave without an extractable answer. Reads the
table's ``cells.jsonl`` only (no model). ``--json`` prints one object.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lemon.scoring.stats import mean_difference_ci


def compare(table: Path, a: str, b: str, *, resamples: int = 2000) -> dict[str, Any]:
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    with (table / "cells.jsonl").open(encoding="utf-8") as f:
        for line in f:
            cell = json.loads(line)
            cells[(cell["item"], cell["team"])] = cell
    items = sorted({item for item, team in cells if team == a} & {i for i, t in cells if t == b})
    if not items:
        raise SystemExit(f"{table}: no item answered by both {a} and {b}")
    left, right = [cells[(i, a)] for i in items], [cells[(i, b)] for i in items]
    diffs = [x["success"] - y["success"] for x, y in zip(left, right, strict=True)]
    n = len(diffs)
    low, high = mean_difference_ci(
        [float(x["success"]) for x in left], [float(y["success"]) for y in right], rounds=resamples
    )
    return {
        "a": a,
        "b": b,
        "items": n,
        "accuracy": [round(sum(c["success"] for c in side) / n, 4) for side in (left, right)],
        "difference": round(sum(diffs) / n, 4),
        "difference_ci95": [round(low, 4), round(high, 4)],
        "priced_per_item": [round(sum(c["priced"] for c in side) / n, 1) for side in (left, right)],
        "cost_ratio": round(sum(c["priced"] for c in left) / sum(c["priced"] for c in right), 3),
        "no_answer": [sum(c["extracted"] is None for c in side) for side in (left, right)],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", type=Path)
    parser.add_argument("teams", nargs="+", help="pairs: A B [A B ...]")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if len(args.teams) % 2:
        parser.error("teams come in pairs (A B)")
    pairs = list(zip(args.teams[::2], args.teams[1::2], strict=True))
    results = [compare(args.table, a, b) for a, b in pairs]
    if args.json:
        print(json.dumps({"table": str(args.table), "pairs": results}, indent=2))
        return 0
    for r in results:
        low, high = r["difference_ci95"]
        print(
            f"{r['a']} - {r['b']} on {r['items']} items: accuracy {r['accuracy'][0]} vs "
            f"{r['accuracy'][1]}, difference {r['difference']:+} [{low:+}, {high:+}]; "
            f"cost {r['priced_per_item'][0]} vs {r['priced_per_item'][1]} "
            f"({r['cost_ratio']}x); no answer {r['no_answer'][0]} vs {r['no_answer'][1]}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
