#!/usr/bin/env bash
# Search teacher on GSM8K training items with the real tiers (embedded profile: SmolLM2-135M /
# Qwen2.5-Coder-0.5B / Qwen2.5-Coder-1.5B on llama.cpp). Resumable: rerun to continue.
#   bash benchmarks/results/teacher-real-cpu/run.sh [LIMIT]
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=benchmarks/results/teacher-real-cpu
export LEMON_LLAMA_THREADS=${LEMON_LLAMA_THREADS:-1}
.venv/bin/lemon teacher search --benchmark gsm8k --split train --limit "${1:-10}" \
  --candidates 8 --max-tokens 300 --concurrency 2 --profile embedded \
  --out "$out/gsm8k-train.jsonl" --json
