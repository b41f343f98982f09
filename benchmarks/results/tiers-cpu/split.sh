#!/usr/bin/env bash
# One slice of a long single-agent calibration run, as an extra process beside calibrate.sh's
# lanes (same run folder; the run resumes by item id, so slices only add items):
#   bash benchmarks/results/tiers-cpu/split.sh TIER BENCHMARK OFFSET LIMIT
# Rerun the lane's full command afterwards to write the run's summary over all its items.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=benchmarks/results/tiers-cpu
export LEMON_LLAMA_THREADS=${LEMON_LLAMA_THREADS:-1}
tier=$1 bench=$2 offset=$3 limit=$4 tokens=300
[ "$bench" = humaneval ] && tokens=512
.venv/bin/lemon eval --benchmark "$bench" --baseline single --tier "$tier" --offset "$offset" \
  --limit "$limit" --max-tokens "$tokens" --concurrency 8 --deadline 86400 \
  --profiles "$out/profiles.yaml" --out "$out" --name "$bench-single-$tier" -q
