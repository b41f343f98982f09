cd "$(dirname "$0")/../../../.."  # the checkout
for engine in llamacpp transformers llamacpp transformers; do
  s=$(date +%s.%N)
  LEMON_POLICY_ENGINE=$engine nice -n 5 .venv/bin/lemon run --policy learned > "benchmarks/results/policy-cpu/lemon-run/last-$engine.txt" 2>&1
  rc=$?
  e=$(date +%s.%N)
  echo "$engine rc=$rc wall=$(echo "$e - $s" | bc)"
done
