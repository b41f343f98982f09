"""How far the table build has come: per line of the plan, the cells built of those it asks,
and the CPU time the builds recorded.

    .venv/bin/python tables/progress.py [PLAN]      (default: plan.txt beside this file)

A line asks for its teams on the first LIMIT items of its table (in the table's order, which
`lemon table build` fixes from the split's items). CPU time is what each finished or stopped
`lemon table build` recorded in its table's ``builds`` (a build killed without its record is
not counted). The estimate of what remains is the recorded CPU seconds per built cell, over
every table, times the cells still missing: a rough figure (a code item or a large team costs
more than a maths item on the small tier; a vote costs nothing when its members are built).
"""

from __future__ import annotations

import sys
from pathlib import Path

from lemon.tables.store import Table

HERE = Path(__file__).resolve().parent


def plan_lines(plan: Path) -> list[tuple[str, int, list[str]]]:
    lines = []
    for raw in plan.read_text(encoding="utf-8").splitlines():
        parts = raw.split()
        if not parts or parts[0].startswith("#"):
            continue
        directory, _benchmark, _split, limit, teams = parts
        lines.append((directory, int(limit), teams.split(",")))
    return lines


def main(argv: list[str]) -> int:
    plan = Path(argv[0]) if argv else HERE / "plan.txt"
    built_total = asked_total = 0
    cpu_s = 0.0
    cells_built_by_builds = 0
    seen_tables: set[str] = set()
    print(f"{'line':<58} {'built':>7} {'asked':>7}")
    for directory, limit, teams in plan_lines(plan):
        path = HERE / directory
        asked = limit * len(teams)
        built = 0
        if (path / "table.json").is_file():
            table = Table.open(path)
            items = table.meta.items[:limit]
            built = sum(1 for i in items for t in teams if table.cell(i, t) is not None)
            if directory not in seen_tables:
                seen_tables.add(directory)
                for build in table.meta.builds:
                    cpu_s += float(build.get("cpu_s") or 0.0)
                    cells_built_by_builds += int(build.get("added") or 0)
        built_total += built
        asked_total += asked
        label = f"{directory} n={limit} {','.join(teams)}"
        if len(label) > 58:
            label = label[:55] + "..."
        print(f"{label:<58} {built:>7} {asked:>7}")
    missing = asked_total - built_total
    print(f"\ncells: {built_total} of {asked_total} built, {missing} missing")
    hours = cpu_s / 3600
    print(f"CPU recorded by the builds: {hours:.1f} CPU-hours for {cells_built_by_builds} cells")
    if cells_built_by_builds:
        per_cell = cpu_s / cells_built_by_builds
        print(
            f"at {per_cell:.1f} CPU-s per cell, what is missing is about "
            f"{missing * per_cell / 3600:.1f} CPU-hours (rough: see the docstring)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
