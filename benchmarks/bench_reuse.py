"""Counterfactual reuse: model calls for every single-field mutant, with reuse over without.

For each example spec, the original runs once and fills a call cache; then every
single-field mutant (drop_dependency, rollback_role, downgrade_capacity) runs twice: with a
copy of that cache (only agents whose inputs changed call the model) and without any cache.
``ratio`` is the total calls with reuse over the total calls without (goal ≤ 0.6); the answers
must be identical. The backend is the scripted test double, whose answer is a hash of the full
prompt (plus the tier's model id), so any change in an agent's inputs changes its answer and
propagates downstream exactly as a model's would.

Run: ``lemon bench reuse --json``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import harness
from lemon.backends.base import Backend
from lemon.backends.scripted import ScriptedBackend, ScriptedConfig, ScriptedRule
from lemon.engine.executor import CallCache, execute
from lemon.spec import Capacity, load_spec, mutations

ROOT = harness.ROOT
TASK = "A farmer has 17 sheep and buys 5 more. How many sheep does he have?"


async def measure(paths: list[Path]) -> dict[str, object]:
    config = ScriptedConfig(rules=(ScriptedRule(output="answer {digest} from {model}"),))
    backends: dict[Capacity, Backend] = {
        tier: ScriptedBackend(config, tier=tier.value) for tier in Capacity
    }
    with_reuse = without = mutants = mismatches = 0
    per_kind: dict[str, list[int]] = {}
    for path in paths:
        parsed = load_spec(path)
        cache = CallCache()
        await execute(parsed.spec, task=TASK, backends=backends, output=parsed.output, cache=cache)
        for mutation in mutations(parsed):
            reused = await execute(mutation.spec, task=TASK, backends=backends, cache=cache.copy())
            fresh = await execute(mutation.spec, task=TASK, backends=backends)
            mutants += 1
            with_reuse += reused.calls
            without += fresh.calls
            mismatches += reused.answer != fresh.answer
            counts = per_kind.setdefault(mutation.kind.value, [0, 0])
            counts[0] += reused.calls
            counts[1] += fresh.calls
    return {
        "benchmark": "reuse",
        "backend": "scripted test double (answers hash the prompt)",
        "specs": [p.name for p in paths],
        "mutants": mutants,
        "calls_with_reuse": with_reuse,
        "calls_without_reuse": without,
        "ratio": harness.ratio(with_reuse, without),
        "goal": "ratio <= 0.6",
        "identical_answers": mismatches == 0,
        "answer_mismatches": mismatches,
        "ratio_by_kind": {k: round(a / b, 4) for k, (a, b) in per_kind.items()},
    }


def main(argv: list[str] | None = None) -> int:
    bench = harness.Harness("reuse", __doc__)
    bench.parser.add_argument("specs", nargs="*", type=Path)
    args = bench.parse(argv)
    paths = args.specs or sorted((ROOT / "examples" / "specs").glob("*.yaml"))
    result = asyncio.run(measure(paths))
    return bench.finish(
        args,
        result,
        text=lambda r: (
            f"{r['mutants']} mutants: {r['calls_with_reuse']} calls with reuse, "
            f"{r['calls_without_reuse']} without (ratio {r['ratio']}); "
            f"identical answers: {r['identical_answers']}"
        ),
    )


if __name__ == "__main__":
    raise SystemExit(main())
