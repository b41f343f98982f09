"""The persistent call cache: a repeated teacher search, warm cache over cold.

``lemon teacher search`` runs twice over the same GSM8K training items with a fresh cache
file: the first (cold) run computes every worker call and stores it; the second (warm) run,
in a new set of backends as a new process would have, finds every call on disk. Both write
their SFT rows to separate files, which must be identical (same chosen specs, same rewards).

``ratio`` = warm wall time / cold wall time (goal <= 0.1); ``hit_rate`` = the warm run's calls
answered from the cache over all calls that reached a backend. With ``--profile scripted`` the
workers are the scripted test double (for checking the plumbing only; not a model).

Run: ``lemon bench cache --json [--items N] [--candidates K] [--max-tokens M] [--profile P]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from lemon.backends.callcache import PersistentCallCache, wrap_backends
from lemon.capacity import build_backends, close_backends, resolve_profile
from lemon.data import Benchmark, split_items
from lemon.teaching import SearchSettings, search_teacher


async def _search(
    items: list[Any], *, profile: str, cache: PersistentCallCache, out: Path, settings: Any
) -> tuple[float, Any]:
    backends = wrap_backends(build_backends(resolve_profile(profile)), cache)
    started = time.perf_counter()
    try:
        stats = await search_teacher(items, backends=backends, out=out, settings=settings)
    finally:
        await close_backends(backends)
    return time.perf_counter() - started, stats


def _rows(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        row["provenance"].pop("workers", None)
    return sorted(rows, key=lambda r: r["id"])


def measure(items: int, candidates: int, max_tokens: int, profile: str) -> dict[str, Any]:
    chosen = split_items(Benchmark.GSM8K, split="train")[:items]
    settings = SearchSettings(candidates=candidates, max_tokens=max_tokens, concurrency=2)
    with tempfile.TemporaryDirectory(prefix="lemon-bench-cache-") as tmp:
        root = Path(tmp)
        cache = PersistentCallCache(root / "calls.sqlite")
        cold_s, cold = asyncio.run(
            _search(
                chosen, profile=profile, cache=cache, out=root / "cold.jsonl", settings=settings
            )
        )
        entries = cache.stats().entries
        cache.close()
        cache = PersistentCallCache(root / "calls.sqlite")  # as a later process would open it
        warm_s, warm = asyncio.run(
            _search(
                chosen, profile=profile, cache=cache, out=root / "warm.jsonl", settings=settings
            )
        )
        identical = _rows(root / "cold.jsonl") == _rows(root / "warm.jsonl")
        reached = cache.hits + cache.misses
        cache.close()
    return {
        "benchmark": "cache",
        "profile": profile,
        "items": items,
        "candidates": candidates,
        "max_tokens": max_tokens,
        "cold_s": round(cold_s, 3),
        "warm_s": round(warm_s, 3),
        "ratio": round(warm_s / cold_s, 4),
        "goal": "ratio <= 0.1",
        "hit_rate": round(cache.hits / reached, 4) if reached else 0.0,
        "cached_calls": entries,
        "executions": cold.executions,
        "cold_cache_hits": cold.cache_hits,
        "warm_cache_hits": warm.cache_hits,
        "identical_rows": identical,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--items", type=int, default=2)
    parser.add_argument("--candidates", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--profile", default="embedded")
    args = parser.parse_args(argv)
    result = measure(args.items, args.candidates, args.max_tokens, args.profile)
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"teacher search warm/cold: {result['ratio']} ({result['warm_s']} s / "
            f"{result['cold_s']} s), hit rate {result['hit_rate']}, "
            f"identical rows: {result['identical_rows']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
