#!/usr/bin/env bash
# Fixed teams on the first 30 test items of $BENCH (default gsm8k), embedded profile (real
# tiers), 300 tokens per agent, greedy; resumable (rerun to continue).
#   [BENCH=multiarith] bash baselines.sh NAME...   NAME: a --baseline (template, chain, sc3, ...)
#   or single-small|single-medium|single-large (one agent on that tier)
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=experiments/policy-on-real-runs/pipeline
bench=${BENCH:-gsm8k}
export LEMON_LLAMA_THREADS=${LEMON_LLAMA_THREADS:-1}
for name in "$@"; do
  extra=(--baseline "$name")
  case $name in single-*) extra=(--baseline single --tier "${name#single-}") ;; esac
  .venv/bin/lemon eval --benchmark "$bench" "${extra[@]}" --limit 30 --max-tokens 300 \
    --concurrency 4 --deadline 86400 --out "$out" --name "$bench-$name" -q
done
