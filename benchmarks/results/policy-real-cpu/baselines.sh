#!/usr/bin/env bash
# Fixed teams on the first 30 GSM8K test items, embedded profile (real tiers), 300 tokens per
# agent, greedy; resumable (rerun to continue).
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=benchmarks/results/policy-real-cpu
export LEMON_LLAMA_THREADS=${LEMON_LLAMA_THREADS:-1}
for name in "$@"; do
  .venv/bin/lemon eval --benchmark gsm8k --baseline "$name" --limit 30 --max-tokens 300 \
    --concurrency 4 --deadline 86400 --out "$out" --name "gsm8k-$name" -q
done
