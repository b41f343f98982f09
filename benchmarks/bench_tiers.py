"""Capacity tiers: decoding speed of the embedded profile's three models on llama.cpp.

Per tier (small SmolLM2-135M-Instruct, medium Qwen2.5-Coder-0.5B-Instruct, large
Qwen2.5-Coder-1.5B-Instruct, as the ``embedded`` profile runs them): single-stream tokens/s (one
request at a time, prefill included) and aggregate tokens/s with 8 concurrent requests (8
agents of a DAG level; the backend decodes them together in llama.cpp multi-sequence batches).
For the large tier the same single-stream request also runs on the transformers in-process path
(``AutoModelForCausalLM.from_pretrained(dir, gguf_file=...)``, greedy ``generate``), interleaved
with the llama.cpp runs in the same process, twice: the GGUF dequantized to float32 (what
``gguf_file=`` gives), and the same weights at the precision transformers runs fastest here
(:mod:`lemon.backends.cpu_linear`: fbgemm float16 weights with float32 activations where fbgemm
runs, else int8 weights; the in-process backend's own CPU default).

- ``ratio``: large-tier single-stream tokens/s on llama.cpp (Q4_K_M, 4.5 bits a weight) over
  transformers in float32 (goal >= 8). It sets a 4-bit kernel against a 32-bit one, so it is
  mostly the bytes each step reads; ``ratio_best`` sets it against transformers at its best
  CPU precision here, the fairer reference;
- ``concurrency_gain``: large-tier aggregate tokens/s at 8 concurrent over single-stream
  (goal >= 2).

Medians over ``--rounds`` (single-stream and concurrent runs alternate). Both sides use the
same number of CPU threads (``--threads``; default ``$LEMON_LLAMA_THREADS``, else every CPU).
Loads and one warm-up call per model are excluded. Greedy, ``--max-tokens`` per request.

Run: ``lemon bench tiers --json``.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import harness
from lemon.backends.base import Decoding, GenerationRequest, Message
from lemon.backends.ggufs import GGUF_MODELS, locate
from lemon.backends.llamacpp import LlamaModel, LlamaSettings, default_decode_group
from lemon.capacity import BUILTIN_PROFILES
from lemon.pricing import resolve_prices
from lemon.spec.models import Capacity

PROMPTS = [
    "A baker makes 24 muffins a day and sells them in boxes of 4 at $3 a box. How much does he "
    "earn in a week? Explain each step.",
    "A train travels 60 km in the first hour and 45 km in each later hour. How far has it gone "
    "after 5 hours? Explain each step.",
    "Sara reads 12 pages on weekdays and 20 pages on weekend days. How many pages does she read "
    "in 3 weeks? Explain each step.",
    "There are 5 shelves with 6 boxes each, and every box holds 8 pens. 37 pens are sold. How "
    "many are left? Explain each step.",
    "Write a Python function that returns the prime factors of an integer, with a docstring, "
    "and explain how it works.",
    "A garden is 12 m long and 7 m wide. A path 1 m wide runs around it. What is the area of "
    "the path? Explain each step.",
    "Tom saves $15 a week and spends $4 of it on snacks. How many weeks until he has saved "
    "$132? Explain each step.",
    "Write a Python function that merges two sorted lists into one sorted list, and explain "
    "its running time.",
]
CONCURRENT = 8
CONTEXT = 1024
"""Tokens per sequence in the benchmark's contexts (prompts here are under 100 tokens)."""


def _request(prompt: str, max_tokens: int) -> GenerationRequest:
    return GenerationRequest((Message("user", prompt),), Decoding(max_tokens=max_tokens))


def _single(model: LlamaModel, request: GenerationRequest) -> tuple[float, int]:
    started = time.perf_counter()
    result = model.submit(request).result()
    return result.completion_tokens / (time.perf_counter() - started), result.completion_tokens


def _concurrent(model: LlamaModel, max_tokens: int) -> tuple[float, list[int]]:
    started = time.perf_counter()
    futures = [model.submit(_request(p, max_tokens)) for p in PROMPTS[:CONCURRENT]]
    results = [f.result() for f in futures]
    elapsed = time.perf_counter() - started
    tokens = [r.completion_tokens for r in results]
    return sum(tokens) / elapsed, tokens


class _Transformers:
    """The large tier's GGUF on the transformers in-process path."""

    def __init__(self, path: str, threads: int, *, weights: str = "float32") -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from lemon.backends.cpu_linear import convert_linears, load_dtype

        torch.set_num_threads(threads)
        started = time.perf_counter()
        directory, name = os.path.split(path)
        self.tokenizer: Any = AutoTokenizer.from_pretrained(directory, gguf_file=name)
        self.model: Any = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name)
        if weights != "float32":  # the linear layers repacked: fbgemm float16 or int8 weights
            self.model.to(getattr(torch, load_dtype(weights)))  # the activations' dtype
            convert_linears(self.model, weights)
        self.model.eval()
        self.load_s = time.perf_counter() - started
        self.dtype = (
            str(next(self.model.parameters()).dtype).removeprefix("torch.")
            if weights == "float32"
            else weights
        )

    def rate(self, prompt: str, max_tokens: int) -> tuple[float, int]:
        import torch

        text = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
        )
        ids = self.tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        started = time.perf_counter()
        with torch.inference_mode():
            output = self.model.generate(
                ids,
                max_new_tokens=max_tokens,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                pad_token_id=self.tokenizer.eos_token_id,
            )
        new = output.shape[1] - ids.shape[1]
        return new / (time.perf_counter() - started), int(new)


def run(
    *,
    max_tokens: int,
    rounds: int,
    threads: int,
    transformers: bool,
    decode_group: int | None = None,
) -> dict[str, Any]:
    profile = BUILTIN_PROFILES["embedded"]
    prices = resolve_prices(profile=profile)
    tiers: dict[str, Any] = {}
    probe = _request(PROMPTS[0], max_tokens)
    for tier in Capacity:
        config = profile.tiers[tier]
        pinned = GGUF_MODELS[str(config.model)]
        path = str(locate(pinned))
        started = time.perf_counter()
        # the backend's engine, loaded on its own (not the process-wide registry) so that each
        # tier's memory is freed before the next; a short context keeps the KV cache small
        settings = LlamaSettings(
            path,
            slots=CONCURRENT,
            context=CONTEXT,
            threads=threads,
            decode_group=default_decode_group(str(config.model))
            if decode_group is None
            else decode_group,
        )
        model = LlamaModel(settings)
        load_s = time.perf_counter() - started
        model.submit(_request(PROMPTS[1], 8)).result()  # warm-up
        singles, aggregates, lengths = [], [], {}
        for _ in range(rounds):
            rate, tokens = _single(model, probe)
            singles.append(rate)
            aggregate, each = _concurrent(model, max_tokens)
            aggregates.append(aggregate)
            lengths = {"single": tokens, "concurrent": each}
        single, aggregate = statistics.median(singles), statistics.median(aggregates)
        tiers[tier.value] = {
            "model": pinned.title,
            "parameters": pinned.parameters,
            "price": prices.price(tier),
            "load_s": round(load_s, 2),
            "single_tokens_per_s": round(single, 2),
            "aggregate_tokens_per_s": round(aggregate, 2),
            "concurrency_gain": harness.ratio(aggregate, single, digits=3),
            "most_sequences_in_one_step": model.max_batch_sequences,
            "completion_tokens": lengths,
        }
        if tier is not Capacity.LARGE or not transformers:
            model.close()
    result: dict[str, Any] = {
        "benchmark": "tiers",
        "backend": "llama.cpp in-process (llama-cpp-python), Q4_K_M / Q4_1 GGUF",
        "threads": threads,
        "max_tokens": max_tokens,
        "concurrent": CONCURRENT,
        "decode_group": "per model (lemon.backends.llamacpp.default_decode_group)"
        if decode_group is None
        else decode_group,
        "rounds": rounds,
        "tiers": tiers,
        "concurrency_gain": tiers["large"]["concurrency_gain"],
        "goals": {"ratio": ">= 8", "concurrency_gain": ">= 2"},
    }
    if transformers:
        from lemon.backends.cpu_linear import fbgemm_runs_here

        large = str(locate(GGUF_MODELS[str(profile.tiers[Capacity.LARGE].model)]))
        best = "float16-weights" if fbgemm_runs_here() else "int8"
        for key, ratio_key, weights in (
            ("transformers", "ratio", "float32"),
            ("transformers_best", "ratio_best", best),
        ):
            # one reference in memory at a time (the 1.5B in float32 is about 7 GB)
            reference = _Transformers(large, threads, weights=weights)
            reference.rate(PROMPTS[1], 4)  # warm-up
            llama_rates, hf_rates, hf_tokens = [], [], 0
            for _ in range(rounds):
                llama_rates.append(_single(model, probe)[0])
                rate, hf_tokens = reference.rate(PROMPTS[0], max_tokens)
                hf_rates.append(rate)
            llama_rate, hf_rate = statistics.median(llama_rates), statistics.median(hf_rates)
            result[key] = {
                "path": "AutoModelForCausalLM.from_pretrained(dir, gguf_file=...)",
                "dtype": reference.dtype,
                "load_s": round(reference.load_s, 1),
                "single_tokens_per_s": round(hf_rate, 2),
                "completion_tokens": hf_tokens,
                "llama_single_tokens_per_s_same_rounds": round(llama_rate, 2),
            }
            result[ratio_key] = harness.ratio(llama_rate, hf_rate, digits=2)
            del reference
        model.close()
        result["ratio_sets"] = (
            "ratio: llama.cpp Q4_K_M against transformers with the GGUF dequantized to float32; "
            f"ratio_best: against transformers with {best} weights (its fastest CPU path here)"
        )
    return result


def main(argv: list[str] | None = None) -> int:
    bench = harness.Harness("tiers", __doc__, rounds=2)
    parser = bench.parser
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument(
        "--threads",
        type=int,
        default=int(os.environ.get("LEMON_LLAMA_THREADS", "0") or 0)
        or len(os.sched_getaffinity(0)),
        help="CPU threads for both paths (default: $LEMON_LLAMA_THREADS, else every CPU)",
    )
    parser.add_argument(
        "--no-transformers", action="store_true", help="skip the transformers reference"
    )
    parser.add_argument(
        "--decode-group",
        type=int,
        default=None,
        help="most sequences in one llama_decode (0: all 8 agents in one call; default: the "
        "backend's per-model choice)",
    )
    args = bench.parse(argv)
    result = run(
        max_tokens=args.max_tokens,
        rounds=args.rounds,
        threads=args.threads,
        transformers=not args.no_transformers,
        decode_group=args.decode_group,
    )
    return bench.finish(args, result, text=_summary)


def _summary(result: dict[str, Any]) -> str:
    lines = [
        f"{name:<6} {tier['model']:<40} single {tier['single_tokens_per_s']:>6} tok/s, "
        f"{CONCURRENT} concurrent {tier['aggregate_tokens_per_s']:>6} tok/s "
        f"(gain {tier['concurrency_gain']})"
        for name, tier in result["tiers"].items()
    ]
    if "ratio" in result:
        lines.append(
            f"large tier, llama.cpp over transformers: ratio {result['ratio']} (float32), "
            f"{result['ratio_best']} ({result['transformers_best']['dtype']})"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
