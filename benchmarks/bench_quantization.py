"""Weight-only CPU dtypes against bfloat16 on the packaged model: quality, speed, batch invariance.

The CPU default (``dtype: auto``) packs the linear layers' weights for fbgemm's float16 GEMM
with float32 activations (``float16-weights``), or stores them as int8 per output channel with
bfloat16 activations where fbgemm cannot run (:mod:`lemon.backends.cpu_linear`). This measures,
for bfloat16, int8 and float16-weights side by side on the packaged SmolLM2-135M-Instruct:

- quality: per-token perplexity of worked GSM8K *training* solutions (question and answer in
  the chat format; ``--items`` of them, read through ``LEMON_DATA_DIR``);
- speed: ``lemon bench batching`` for each dtype, alternating dtypes over ``--repeats`` so a
  change in this machine's speed hits both alike (medians reported);
- batch invariance: whether each of the 4 benchmark prompts decodes greedily to the same
  text in a batch of 4 as alone.

``ratio`` is the CPU default's batched tokens/s over bfloat16's.
Run: ``lemon bench quantization --json``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
from typing import Any

import harness
from bench_batching import PROMPTS
from bench_batching import run as run_batching
from lemon.backends import quality
from lemon.backends.base import Decoding, GenerationRequest, Message
from lemon.backends.cpu_linear import fbgemm_runs_here
from lemon.backends.local import PACKAGED, LocalBackend, ModelSource, load_model
from lemon.data.items import Benchmark
from lemon.data.paths import DataError, PublishedSplit, source_path


def solutions(limit: int) -> list[list[dict[str, str]]]:
    path = source_path(Benchmark.GSM8K, PublishedSplit.TRAIN)
    chats = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            chats.append(
                [
                    {"role": "user", "content": record["question"]},
                    {"role": "assistant", "content": record["answer"]},
                ]
            )
            if len(chats) == limit:
                break
    return chats


def perplexity(dtype: str, chats: list[list[dict[str, str]]]) -> float:
    model = load_model(ModelSource(PACKAGED, dtype, "cpu"))
    texts = [model.tokenizer.apply_chat_template(chat, tokenize=False) for chat in chats]
    return quality.perplexity(model, texts)


async def invariance(dtype: str, max_tokens: int) -> list[bool]:
    source = ModelSource(PACKAGED, dtype, "cpu")
    requests = [
        GenerationRequest((Message("user", p),), Decoding(max_tokens=max_tokens)) for p in PROMPTS
    ]
    backend = LocalBackend(source, window_s=0.05)
    together = await asyncio.gather(*(backend.generate(r) for r in requests))
    single = LocalBackend(source, window_s=0.0)
    alone = [await single.generate(r) for r in requests]
    return [a.text == b.text for a, b in zip(together, alone, strict=True)]


def main(argv: list[str] | None = None) -> int:
    bench = harness.Harness(
        "quantization",
        __doc__,
        rounds=3,
        rounds_help="rounds per batching run",
        repeats=2,
        repeats_help="batching runs per dtype",
    )
    bench.parser.add_argument(
        "--items", type=int, default=40, help="GSM8K training solutions scored"
    )
    bench.parser.add_argument("--max-tokens", type=int, default=48)
    args = bench.parse(argv)
    dtypes = ["bfloat16", "int8"] + (["float16-weights"] if fbgemm_runs_here() else [])
    default = ModelSource(PACKAGED, device="cpu").resolved_dtype()
    try:
        chats = solutions(args.items)
    except DataError as exc:
        print(f"lemon bench quantization: {exc}", file=sys.stderr)
        return 2
    ppl = {d: round(perplexity(d, chats), 3) for d in dtypes}
    runs: dict[str, list[dict[str, Any]]] = {d: [] for d in dtypes}
    for _ in range(args.repeats):
        for dtype in dtypes:
            runs[dtype].append(asyncio.run(run_batching(args.max_tokens, args.rounds, dtype)))

    def median(dtype: str, key: str) -> float:
        return round(statistics.median(float(r[key]) for r in runs[dtype]), 2)

    speed = {
        d: {
            "one_at_a_time_tokens_per_s": median(d, "one_at_a_time_tokens_per_s"),
            "batched_tokens_per_s": median(d, "batched_tokens_per_s"),
            "batching_ratio": median(d, "ratio"),
        }
        for d in dtypes
    }
    same = {d: asyncio.run(invariance(d, args.max_tokens)) for d in dtypes}

    def over_bfloat16(dtype: str, key: str) -> float:
        return harness.ratio(speed[dtype][key], speed["bfloat16"][key], digits=3)

    relative = {
        d: {
            "one_at_a_time": over_bfloat16(d, "one_at_a_time_tokens_per_s"),
            "batched": over_bfloat16(d, "batched_tokens_per_s"),
        }
        for d in dtypes[1:]
    }
    result = {
        "benchmark": "quantization",
        "model": "SmolLM2-135M-Instruct (packaged, in-process, CPU)",
        "perplexity": ppl,
        "perplexity_items": len(chats),
        "speed": speed,
        "over_bfloat16": relative,
        "batched_equals_alone": same,
        "cpu_default": default,
        "ratio": relative[default]["batched"],
        "repeats": args.repeats,
    }
    return bench.finish(
        args,
        result,
        text=lambda r: "\n".join(
            [
                f"{d:15} perplexity {ppl[d]:.3f}  one at a time "
                f"{speed[d]['one_at_a_time_tokens_per_s']} tok/s  batched "
                f"{speed[d]['batched_tokens_per_s']} tok/s  (x{speed[d]['batching_ratio']})  "
                f"batched == alone: {sum(same[d])}/{len(same[d])}"
                for d in dtypes
            ]
            + [f"{default} (the CPU default) / bfloat16 batched tokens/s: {r['ratio']}"]
        ),
    )


if __name__ == "__main__":
    raise SystemExit(main())
