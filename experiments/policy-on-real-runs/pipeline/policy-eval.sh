#!/usr/bin/env bash
# A trained policy on the first 30 test items of $BENCH (default gsm8k), its teams run on the
# embedded profile (real tiers); resumable.
#   [BENCH=multiarith] bash policy-eval.sh [POLICY_DIR RUN_NAME]
#   (default: policies/gsm8k-real gsm8k-sft-real; the second run:
#   policies/gsm8k-real-succeeded gsm8k-sft-real-succeeded)
set -euo pipefail
cd "$(dirname "$0")/../../.."
export LEMON_LLAMA_THREADS=${LEMON_LLAMA_THREADS:-1}
policy=${1:-policies/gsm8k-real} name=${2:-gsm8k-sft-real}
.venv/bin/lemon eval --benchmark "${BENCH:-gsm8k}" --policy "$policy" --policy-attempts 2 \
  --policy-max-tokens 128 --limit 30 --max-tokens 300 --concurrency 4 --deadline 86400 \
  --out experiments/policy-on-real-runs/pipeline --name "$name" -q
