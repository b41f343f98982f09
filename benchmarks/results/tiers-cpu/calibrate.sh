#!/usr/bin/env bash
# Tier calibration on this machine's CPUs (resumable: rerun a lane to continue where it stopped).
#   bash benchmarks/results/tiers-cpu/calibrate.sh LANE
# Lanes (run them side by side; no two lanes share a run):
#   large-a, large-b, medium, small: one agent on that tier (`--tier`), per benchmark;
#   baselines: the fixed baselines on the embedded profile (all tiers), first 50 items.
# Greedy decoding; 300 tokens for maths and multiple choice, 512 for code; 8 items in flight
# (decoded together by llama.cpp); one llama.cpp thread per lane (LEMON_LLAMA_THREADS=1); no
# per-item deadline to speak of (a day): on a shared machine an item may wait long for the CPU.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=benchmarks/results/tiers-cpu
export LEMON_LLAMA_THREADS=${LEMON_LLAMA_THREADS:-1}
lemon=.venv/bin/lemon

single() {  # TIER BENCHMARK: first 50 test items (MMLU stratified by subject), HumanEval all 164
  local tier=$1 bench=$2 limit=50 tokens=300 extra=()
  [ "$bench" = humaneval ] && { limit=0; tokens=512; }
  [ "$bench" = mmlu ] && extra=(--stratified)
  $lemon eval --benchmark "$bench" --baseline single --tier "$tier" --limit "$limit" \
    --max-tokens "$tokens" --concurrency 8 --deadline 86400 "${extra[@]}" --out "$out" \
    --name "$bench-single-$tier" -q
}

baseline() {  # NAME BENCHMARK: first 50 test items on the embedded profile
  local name=$1 bench=$2 tokens=300
  [ "$bench" = humaneval ] && tokens=512
  $lemon eval --benchmark "$bench" --baseline "$name" --limit 50 --max-tokens "$tokens" \
    --concurrency 8 --deadline 86400 --out "$out" --name "$bench-$name" -q
}

case ${1:?LANE: large-a, large-b, medium, small or baselines} in
  large-a) for bench in gsm8k svamp multiarith; do single large "$bench"; done ;;
  large-b) for bench in humaneval aqua mmlu; do single large "$bench"; done ;;
  medium | small)
    for bench in gsm8k humaneval svamp multiarith aqua mmlu; do single "$1" "$bench"; done ;;
  baselines)
    for bench in gsm8k humaneval; do
      for name in chain sc3 template pot plan-pot; do baseline "$name" "$bench"; done
    done ;;
  *) echo "unknown lane $1" >&2; exit 2 ;;
esac
