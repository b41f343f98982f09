#!/usr/bin/env bash
# Tier calibration on this machine's CPUs (resumable: rerun to continue where it stopped).
#   bash benchmarks/results/tiers-cpu/calibrate.sh LANE
# LANE large:  the large tier, one agent, every benchmark.
# LANE rest:   the medium then the small tier, then the fixed baselines on the embedded profile.
# Greedy decoding; 300 tokens for maths and multiple choice, 512 for code; 8 items in flight
# (decoded together by llama.cpp); one llama.cpp thread per lane (two lanes on two cores).
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=benchmarks/results/tiers-cpu
export LEMON_LLAMA_THREADS=${LEMON_LLAMA_THREADS:-1}
lemon=.venv/bin/lemon

single() {  # TIER BENCHMARK
  local tier=$1 bench=$2 limit=50 tokens=300 extra=()
  [ "$bench" = humaneval ] && { limit=0; tokens=512; }
  [ "$bench" = mmlu ] && extra=(--stratified)
  $lemon eval --benchmark "$bench" --baseline single --tier "$tier" --limit "$limit" \
    --max-tokens "$tokens" --concurrency 8 "${extra[@]}" --out "$out" \
    --name "$bench-single-$tier" -q
}

baseline() {  # NAME BENCHMARK
  local name=$1 bench=$2 tokens=300
  [ "$bench" = humaneval ] && tokens=512
  $lemon eval --benchmark "$bench" --baseline "$name" --limit 50 --max-tokens "$tokens" \
    --concurrency 8 --out "$out" --name "$bench-$name" -q
}

case ${1:?LANE: large or rest} in
  large)
    for bench in gsm8k humaneval svamp multiarith aqua mmlu; do single large "$bench"; done ;;
  rest)
    for bench in gsm8k humaneval; do single medium "$bench"; single small "$bench"; done
    for bench in svamp multiarith aqua mmlu; do single medium "$bench"; single small "$bench"; done
    for name in chain sc3 template pot plan-pot; do
      for bench in gsm8k humaneval; do baseline "$name" "$bench"; done
    done ;;
  *) echo "unknown lane $1" >&2; exit 2 ;;
esac
