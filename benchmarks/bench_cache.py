"""The persistent call cache: a repeated teacher search, warm cache over cold.

``lemon teacher search`` runs twice over the same GSM8K training items with a fresh cache
file: the first (cold) run computes every worker call and stores it; the second (warm) run,
in a new set of backends as a new process would have, finds every call on disk. Both write
their SFT rows to separate files, which must be identical (same chosen specs, same rewards).

``ratio`` = warm wall time / cold wall time (goal <= 0.1); ``hit_rate`` = the warm run's calls
answered from the cache over all calls that reached a backend. Every run's clock starts after its
models are loaded (one uncached call per distinct backend first, timed as ``load_s``), so the
cold time is the calls' own. With ``--profile scripted`` the workers are the scripted test double
(for checking the plumbing only; not a model).

Replaying identical work is the cache's best case. The overlapping case: a third, wider search
over the same items (``--wider`` more candidate teams: the first ``--candidates`` of its teams
are the first run's), in a new process's backends on the same cache file. ``wider_hit_rate`` is
its calls answered from the cache over all it made; ``wider_new_calls`` those it had to compute.

Run: ``lemon bench cache --json [--items N] [--candidates K] [--wider W] [--max-tokens M]
[--profile P]``.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import harness
from lemon.backends.base import Decoding, GenerationRequest, Message
from lemon.backends.callcache import PersistentCallCache, wrap_backends
from lemon.capacity import build_backends, close_backends, resolve_profile
from lemon.data import Benchmark, split_items
from lemon.teaching import SearchSettings, search_teacher

_LOAD = GenerationRequest(
    messages=(Message(role="user", content="Say OK."),), decoding=Decoding(max_tokens=1)
)


async def _search(
    items: list[Any], *, profile: str, cache: PersistentCallCache, out: Path, settings: Any
) -> tuple[float, float, Any]:
    """(load seconds, search seconds, stats): the clock starts once every model is loaded."""
    raw = build_backends(resolve_profile(profile))
    loading = time.perf_counter()
    for backend in {id(b): b for b in raw.values()}.values():
        await backend.generate(_LOAD)  # not through the cache: loads the weights, stores nothing
    load_s = time.perf_counter() - loading
    backends = wrap_backends(raw, cache)
    started = time.perf_counter()
    try:
        stats = await search_teacher(items, backends=backends, out=out, settings=settings)
    finally:
        await close_backends(backends)
    return load_s, time.perf_counter() - started, stats


def _rows(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        row["provenance"].pop("workers", None)
    return sorted(rows, key=lambda r: r["id"])


def _run(
    chosen: list[Any], root: Path, name: str, *, profile: str, settings: SearchSettings
) -> dict[str, Any]:
    """One search in fresh backends on a new connection to the cache file, as a new process."""
    cache = PersistentCallCache(root / "calls.sqlite")
    try:
        load_s, search_s, stats = asyncio.run(
            _search(chosen, profile=profile, cache=cache, out=root / f"{name}.jsonl",
                    settings=settings)
        )  # fmt: skip
        return {"load_s": load_s, "s": search_s, "stats": stats, "hits": cache.hits,
                "misses": cache.misses, "entries": cache.stats().entries}  # fmt: skip
    finally:
        cache.close()


def measure(
    items: int, candidates: int, max_tokens: int, profile: str, wider: int = 2
) -> dict[str, Any]:
    chosen = split_items(Benchmark.GSM8K, split="train")[:items]
    settings = SearchSettings(candidates=candidates, max_tokens=max_tokens, concurrency=2)
    with tempfile.TemporaryDirectory(prefix="lemon-bench-cache-") as tmp:
        root = Path(tmp)
        cold = _run(chosen, root, "cold", profile=profile, settings=settings)
        warm = _run(chosen, root, "warm", profile=profile, settings=settings)
        identical = _rows(root / "cold.jsonl") == _rows(root / "warm.jsonl")
        wide = None
        if wider > 0:
            wide_settings = SearchSettings(
                candidates=candidates + wider, max_tokens=max_tokens, concurrency=2
            )
            wide = _run(chosen, root, "wider", profile=profile, settings=wide_settings)
    reached = warm["hits"] + warm["misses"]
    out: dict[str, Any] = {
        "benchmark": "cache",
        "profile": profile,
        "items": items,
        "candidates": candidates,
        "max_tokens": max_tokens,
        "cold_s": round(cold["s"], 3),
        "warm_s": round(warm["s"], 3),
        "ratio": harness.ratio(warm["s"], cold["s"]),
        "goal": "ratio <= 0.1",
        "timing": "each run's clock starts after its models are loaded (load_s: before it)",
        "cold_load_s": round(cold["load_s"], 3),
        "warm_load_s": round(warm["load_s"], 3),
        "hit_rate": round(warm["hits"] / reached, 4) if reached else 0.0,
        "cached_calls": cold["entries"],
        "executions": cold["stats"].executions,
        "cold_cache_hits": cold["stats"].cache_hits,
        "warm_cache_hits": warm["stats"].cache_hits,
        "identical_rows": identical,
    }
    if wide is not None:
        made = wide["hits"] + wide["misses"]
        out.update(
            wider_candidates=candidates + wider,
            wider_s=round(wide["s"], 3),
            wider_calls=made,
            wider_new_calls=wide["misses"],
            wider_hit_rate=round(wide["hits"] / made, 4) if made else 0.0,
            wider_over_cold=round(wide["s"] / cold["s"], 4),
        )
    return out


def main(argv: list[str] | None = None) -> int:
    bench = harness.Harness("cache", __doc__)
    bench.parser.add_argument("--items", type=int, default=2)
    bench.parser.add_argument("--candidates", type=int, default=3)
    bench.parser.add_argument(
        "--wider", type=int, default=2, help="then a search with this many more teams (0: none)"
    )
    bench.parser.add_argument("--max-tokens", type=int, default=32)
    bench.parser.add_argument("--profile", default="embedded")
    args = bench.parse(argv)
    result = measure(args.items, args.candidates, args.max_tokens, args.profile, args.wider)
    return bench.finish(args, result, text=_summary)


def _summary(result: dict[str, Any]) -> str:
    return (
        f"teacher search warm/cold: {result['ratio']} ({result['warm_s']} s / "
        f"{result['cold_s']} s), hit rate {result['hit_rate']}, "
        f"identical rows: {result['identical_rows']}"
        + (
            f"; wider search ({result['wider_candidates']} teams): hit rate "
            f"{result['wider_hit_rate']}, {result['wider_new_calls']} new calls"
            if "wider_hit_rate" in result
            else ""
        )
    )


if __name__ == "__main__":
    raise SystemExit(main())
