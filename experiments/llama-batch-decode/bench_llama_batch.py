"""Where llama.cpp's multi-sequence batch loses its gain on this CPU: ``llama_decode`` alone.

``lemon bench tiers``' ``concurrency_gain`` (8 concurrent agents' aggregate tokens/s over one
agent's) includes LEMON's scheduler (Python, one thread). This times only the kernel: one model
and context per configuration, ``k`` sequences prefilled with the same prompt, then ``steps``
decode calls of one token per sequence (the shape of the decode phase of a DAG level of ``k``
agents). It reports seconds per ``llama_decode`` and the batch gain (k × t(1) / t(k)) for each
thread count, repacking on or off, and the key/value layout (one stream per sequence, as the
backend runs, or unified). Python overhead outside ``llama_decode`` is measured the same way:
the backend's ``_step`` (batch filling and sampling) over the same batch.

Run: ``python experiments/llama-batch-decode/bench_llama_batch.py --json
[--model qwen2.5-coder-1.5b-instruct]``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import time
from typing import Any

from lemon.backends.ggufs import GGUF_MODELS, locate
from lemon.backends.llamacpp import _lib

PROMPT = (
    "A baker makes 24 muffins a day and sells them in boxes of 4 at $3 a box. How much does he "
    "earn in a week? Explain each step."
)


def _context(lib: Any, model: Any, *, threads: int, sequences: int, unified: bool) -> Any:
    cparams = lib.llama_context_default_params()
    cparams.n_ctx = 512 * sequences
    cparams.n_seq_max = sequences
    cparams.kv_unified = unified
    cparams.n_batch = 512
    cparams.n_ubatch = 512
    cparams.n_threads = threads
    cparams.n_threads_batch = threads
    cparams.no_perf = True
    ctx = lib.llama_init_from_model(model, cparams)
    if not ctx:
        raise RuntimeError("llama.cpp could not create the context")
    return ctx


def _decode_times(
    lib: Any, model: Any, vocab: Any, *, threads: int, k: int, unified: bool, steps: int
) -> list[float]:
    ctx = _context(lib, model, threads=threads, sequences=k, unified=unified)
    batch = lib.llama_batch_init(512, 0, 1)
    try:
        text = PROMPT.encode()
        buf = (ctypes.c_int32 * 256)()
        n_prompt = lib.llama_tokenize(vocab, text, len(text), buf, 256, True, True)
        prompt = list(buf[:n_prompt])
        for seq in range(k):  # prefill each sequence (not timed)
            for i, token in enumerate(prompt):
                batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, i, 1
                batch.seq_id[i][0] = seq
                batch.logits[i] = i == len(prompt) - 1
            batch.n_tokens = len(prompt)
            if lib.llama_decode(ctx, batch) != 0:
                raise RuntimeError("prefill failed")
        times = []
        for step in range(steps + 2):  # two warm-up steps
            for seq in range(k):
                batch.token[seq] = prompt[(step + seq) % len(prompt)]
                batch.pos[seq] = len(prompt) + step
                batch.n_seq_id[seq] = 1
                batch.seq_id[seq][0] = seq
                batch.logits[seq] = True
            batch.n_tokens = k
            started = time.perf_counter()
            if lib.llama_decode(ctx, batch) != 0:
                raise RuntimeError("decode failed")
            lib.llama_synchronize(ctx)
            if step >= 2:
                times.append(time.perf_counter() - started)
        return times
    finally:
        lib.llama_batch_free(batch)
        lib.llama_free(ctx)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct", choices=list(GGUF_MODELS))
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--batches", default="1,2,4,8")
    parser.add_argument("--repack", choices=("both", "on", "off"), default="both")
    parser.add_argument("--kv", choices=("both", "streams", "unified"), default="both")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    lib = _lib()
    path = str(locate(GGUF_MODELS[args.model]))
    rows = []
    for repack in (True, False) if args.repack == "both" else (args.repack == "on",):
        params = lib.llama_model_default_params()
        params.use_extra_bufts = repack
        model = lib.llama_model_load_from_file(path.encode(), params)
        vocab = lib.llama_model_get_vocab(model)
        try:
            for threads in (int(t) for t in args.threads.split(",")):
                for unified in (False, True) if args.kv == "both" else (args.kv == "unified",):
                    base = None
                    for k in (int(b) for b in args.batches.split(",")):
                        times = _decode_times(
                            lib, model, vocab, threads=threads, k=k, unified=unified,
                            steps=args.steps,
                        )  # fmt: skip
                        t = statistics.median(times)
                        base = t if k == 1 else base
                        row = {
                            "repack": repack, "threads": threads, "kv_unified": unified,
                            "sequences": k, "decode_s": round(t, 5),
                            "tokens_per_s": round(k / t, 2),
                            "gain": round(k * base / t, 3) if base else None,
                        }  # fmt: skip
                        rows.append(row)
                        if not args.json:
                            print(row, flush=True)
        finally:
            lib.llama_model_free(model)
    result = {
        "benchmark": "llama-batch",
        "model": args.model,
        "path": os.path.basename(path),
        "steps": args.steps,
        "loadavg_1m_before": round(os.getloadavg()[0], 2),
        "system_info": lib.llama_print_system_info().decode().strip(),
        "rows": rows,
    }
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(result, handle, indent=1)
    if args.json:
        print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
