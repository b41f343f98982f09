"""Embedded batching: a DAG level of 4 concurrent agents on the packaged model, batched vs not.

The in-process backend gathers concurrent calls into one ``generate`` (left-padded). This
times 4 agent calls made together (one batch) against the same 4 calls made one at a time,
interleaved over rounds, on the packaged SmolLM2-135M-Instruct (converted once from the GGUF
to a cached bf16 safetensors copy, then loaded in the default dtype unless ``--dtype`` says
otherwise: fbgemm float16 weights on the CPU, bfloat16 on CUDA). ``ratio`` is batched tokens/s
over one-at-a-time tokens/s (goal ≥ 3); ``completion_tokens`` gives each agent's length in the
last round (a batch runs until its longest member ends). The first load (GGUF conversion) and a
warm-up call are excluded. ``lemon bench quantization`` runs this for bfloat16, int8 and
float16-weights side by side.

Run: ``lemon bench batching --json``.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import harness
from lemon.backends.base import Decoding, GenerationRequest, Message
from lemon.backends.local import DTYPES, PACKAGED, LocalBackend, LocalModel, ModelSource

PROMPTS = [
    "Tom has 3 apples and buys 4 more. How many apples does he have? Think step by step.",
    "A train travels 60 km in 1 hour. How far does it go in 3 hours? Think step by step.",
    "Sara reads 12 pages a day. How many pages does she read in a week? Think step by step.",
    "There are 5 boxes with 6 pens each. How many pens are there? Think step by step.",
]


async def run(
    max_tokens: int, rounds: int, dtype: str, prefix_cache: bool = True
) -> dict[str, object]:
    source = ModelSource(PACKAGED, dtype)
    batched_backend = LocalBackend(source)  # the engine's window (20 ms) and max_batch (8)
    single_backend = LocalBackend(source, window_s=0.0)
    started = time.perf_counter()
    model = await batched_backend.model()
    load_s = time.perf_counter() - started
    model.prefix_cache_size = LocalModel.prefix_cache_size if prefix_cache else 0
    requests = [
        GenerationRequest((Message("user", p),), Decoding(max_tokens=max_tokens)) for p in PROMPTS
    ]
    await single_backend.generate(requests[0])  # warm-up
    batched_rates, single_rates = [], []
    lengths: dict[str, list[int]] = {}
    for _ in range(rounds):
        t0 = time.perf_counter()
        together = await asyncio.gather(*(batched_backend.generate(r) for r in requests))
        batched_rates.append(
            sum(g.completion_tokens for g in together) / (time.perf_counter() - t0)
        )
        t0 = time.perf_counter()
        alone = [await single_backend.generate(r) for r in requests]
        single_rates.append(sum(g.completion_tokens for g in alone) / (time.perf_counter() - t0))
        lengths = {
            "batched": [g.completion_tokens for g in together],
            "one_at_a_time": [g.completion_tokens for g in alone],
        }
    batched, single = statistics.median(batched_rates), statistics.median(single_rates)
    return {
        "benchmark": "batching",
        "model": "SmolLM2-135M-Instruct (packaged, in-process)",
        "dtype": source.resolved_dtype(),
        "device": source.resolved_device(),
        "agents_per_level": len(requests),
        "max_tokens": max_tokens,
        "completion_tokens": lengths,
        "load_s": round(load_s, 2),
        "prefix_cache": prefix_cache,
        "batched_tokens_per_s": round(batched, 1),
        "one_at_a_time_tokens_per_s": round(single, 1),
        "ratio": harness.ratio(batched, single, digits=3),
        "goal": "ratio >= 3",
        "rounds": rounds,
    }


def main(argv: list[str] | None = None) -> int:
    bench = harness.Harness("batching", __doc__, rounds=3)
    bench.parser.add_argument("--max-tokens", type=int, default=48)
    bench.parser.add_argument("--dtype", default="auto", choices=DTYPES)
    bench.parser.add_argument(
        "--no-prefix-cache", action="store_true", help="prefill every prompt in full"
    )
    args = bench.parse(argv)
    result = asyncio.run(
        run(args.max_tokens, args.rounds, args.dtype, prefix_cache=not args.no_prefix_cache)
    )
    return bench.finish(
        args,
        result,
        text=lambda r: (
            f"batched {r['batched_tokens_per_s']} tok/s vs one at a time "
            f"{r['one_at_a_time_tokens_per_s']} tok/s: ratio {r['ratio']}"
        ),
    )


if __name__ == "__main__":
    raise SystemExit(main())
