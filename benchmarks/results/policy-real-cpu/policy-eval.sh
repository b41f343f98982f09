#!/usr/bin/env bash
# The SFT policy (policies/gsm8k-real, from sft-config.yaml) on the first 30 GSM8K test items,
# its teams run on the embedded profile (real tiers); resumable.
set -euo pipefail
cd "$(dirname "$0")/../../.."
export LEMON_LLAMA_THREADS=${LEMON_LLAMA_THREADS:-1}
.venv/bin/lemon eval --benchmark gsm8k --policy policies/gsm8k-real --policy-attempts 2 \
  --policy-max-tokens 128 --limit 30 --max-tokens 300 --concurrency 4 --deadline 86400 \
  --out benchmarks/results/policy-real-cpu --name gsm8k-sft-real -q
