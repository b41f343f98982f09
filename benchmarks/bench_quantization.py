"""int8 weights against bfloat16 on the packaged model: quality, speed, batch invariance.

The CPU default (``dtype: auto``) stores the linear layers' weights as int8 per output channel
with bfloat16 activations (:mod:`lemon.backends.int8`). This measures, for each dtype side by
side on the packaged SmolLM2-135M-Instruct:

- quality: per-token perplexity of worked GSM8K *training* solutions (question and answer in
  the chat format; ``--items`` of them, read through ``LEMON_DATA_DIR``);
- speed: ``lemon bench batching`` for each dtype, alternating dtypes over ``--repeats`` so a
  change in this machine's speed hits both alike (medians reported);
- batch invariance: whether each of the 4 benchmark prompts decodes greedily to the same
  text in a batch of 4 as alone.

``ratio`` is int8's batched tokens/s over bfloat16's. Run: ``lemon bench quantization --json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_batching import PROMPTS
from bench_batching import run as run_batching
from lemon.backends.base import Decoding, GenerationRequest, Message
from lemon.backends.local import PACKAGED, LocalBackend, ModelSource, load_model
from lemon.data.errors import DataError
from lemon.data.items import Benchmark
from lemon.data.paths import Source, source_path


def solutions(limit: int) -> list[list[dict[str, str]]]:
    path = source_path(Benchmark.GSM8K, Source.TRAIN)
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
    return model.perplexity(texts)


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--items", type=int, default=40, help="GSM8K training solutions scored")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per batching run")
    parser.add_argument("--repeats", type=int, default=2, help="batching runs per dtype")
    args = parser.parse_args(argv)
    dtypes = ["bfloat16", "int8"]
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
    batched = round(
        speed["int8"]["batched_tokens_per_s"] / speed["bfloat16"]["batched_tokens_per_s"], 3
    )
    single = round(
        speed["int8"]["one_at_a_time_tokens_per_s"]
        / speed["bfloat16"]["one_at_a_time_tokens_per_s"],
        3,
    )
    result = {
        "benchmark": "quantization",
        "model": "SmolLM2-135M-Instruct (packaged, in-process, CPU)",
        "perplexity": ppl,
        "perplexity_items": len(chats),
        "speed": speed,
        "int8_over_bfloat16": {"one_at_a_time": single, "batched": batched},
        "batched_equals_alone": same,
        "ratio": batched,
        "repeats": args.repeats,
    }
    if args.json:
        print(json.dumps(result))
    else:
        for d in dtypes:
            print(
                f"{d:9} perplexity {ppl[d]:.3f}  one at a time "
                f"{speed[d]['one_at_a_time_tokens_per_s']} tok/s  batched "
                f"{speed[d]['batched_tokens_per_s']} tok/s  (x{speed[d]['batching_ratio']})  "
                f"batched == alone: {sum(same[d])}/{len(same[d])}"
            )
        print(f"int8 / bfloat16 batched tokens/s: {result['ratio']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
