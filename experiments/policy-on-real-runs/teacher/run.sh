#!/usr/bin/env bash
# Search teacher on training items with the real tiers (embedded profile: SmolLM2-135M /
# Qwen2.5-Coder-0.5B / Qwen2.5-Coder-1.5B on llama.cpp). Resumable: rerun to continue.
#   [BENCH=gsm8k|multiarith|svamp|...] bash experiments/policy-on-real-runs/teacher/run.sh [LIMIT]
# Rows go to $BENCH-train.jsonl (default BENCH=gsm8k).
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=experiments/policy-on-real-runs/teacher
bench=${BENCH:-gsm8k}
export LEMON_LLAMA_THREADS=${LEMON_LLAMA_THREADS:-1}
.venv/bin/lemon teacher search --benchmark "$bench" --split train --limit "${1:-10}" \
  --candidates 8 --max-tokens 300 --concurrency 2 --profile embedded \
  --out "$out/$bench-train.jsonl" --json
