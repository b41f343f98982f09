#!/usr/bin/env bash
# The learned policy on the outcome tables, one benchmark (svamp or mmlu), resumable:
#   bash experiments/policy-tables/run.sh svamp STAGE...
# STAGE: rows (teacher rows from the train table, and the shuffled control's), rows-cs (every team's
# row weighted by its reward above the item's worst team's, for cost-sensitive SFT, and its control), sft-S (the SFT warm
# start of seed S), grpo-ARM-S (ARM global or credit), eval-NAME (a policy version under
# policies/tables/ on the test table), evalc-NAME (the same under the spec grammar: evals/NAME-constrained),
# evalk-NAME (the policy chooses among the table's teams by log-probability: evals/NAME-columns), report. LEMON_CODE: a checkout whose code runs it (a git
# worktree at a fixed commit, so edits elsewhere cannot change a run midway). LEMON_EVAL_LIMIT:
# evaluate on the test table's first N items only (those every team has answered so far).
set -euo pipefail
cd "$(dirname "$0")/../.."
bench=$1; shift
out=experiments/policy-tables/$bench
tables=tables
if [ -n "${LEMON_CODE:-}" ]; then
  export PYTHONPATH="$LEMON_CODE/src:$LEMON_CODE/operator:$LEMON_CODE/services:$LEMON_CODE/training_jobs"
fi
lemon() { nice -n "${LEMON_NICE:-5}" .venv/bin/lemon "$@"; }
# the teams the teacher rows choose among (the train tables' later columns cover only some items)
case "$bench" in
  svamp) teams=single-small,single-medium,single-large,pot-medium,pot-large ;;
  *) teams=quick-small,quick-medium,quick-large ;;
esac
for stage in "$@"; do
  echo "== $(date -u +%FT%TZ) $bench $stage"
  case "$stage" in
    rows)
      fit=$(cd experiments/policy-tables && python3 -c "import policy_tables as p; print(p.EXPERIMENTS['$bench']['fit'])")
      for shuffle in "" "--shuffle 0"; do
        name=rows; [ -n "$shuffle" ] && name=rows-shuffled
        lemon teacher tables "$tables/$bench-train" --limit "$fit" --prompt-format lemon-policy-prompt/v2 \
          --token-cost 0.2 --teams "$teams" --balance $shuffle --out "$out/$name.jsonl"
      done ;;
    rows-cs)  # cost-sensitive SFT's rows (every team, repeated by weight) and the shuffled control's
      fit=$(cd experiments/policy-tables && python3 -c "import policy_tables as p; print(p.EXPERIMENTS['$bench']['fit'])")
      lemon teacher tables "$tables/$bench-train" --limit "$fit" --prompt-format lemon-policy-prompt/v2 \
        --token-cost 0.2 --teams "$teams" --cost-sensitive --out "$out/rows-cs.jsonl"
      lemon teacher tables "$tables/$bench-train" --limit "$fit" --prompt-format lemon-policy-prompt/v2 \
        --token-cost 0.2 --teams "$teams" --cost-sensitive --shuffle 0 --out "$out/rows-cs-shuffled.jsonl" ;;
    sft-shuffled)
      lemon train sft --config "$out/sft-shuffled.yaml" ;;
    sft-*) lemon train sft --config "$out/$stage.yaml" ;;
    grpo-*) lemon train grpo --config "$out/$stage.yaml" ;;
    evalc-*)  # the same, decoded under the spec grammar (every spec valid by construction)
      name=${stage#evalc-}
      lemon eval --policy "policies/tables/$bench-$name" --table "$tables/$bench-test" \
        --limit "${LEMON_EVAL_LIMIT:-0}" --max-tokens 300 --policy-attempts 1 --policy-max-tokens 160 --concurrency 8 \
        --policy-constrained --out "$out/evals" --name "$name-constrained" -q ;;
    evalk-*)  # the policy scores the table's teams and writes the one it likes best
      name=${stage#evalk-}
      lemon eval --policy "policies/tables/$bench-$name" --table "$tables/$bench-test" \
        --limit "${LEMON_EVAL_LIMIT:-0}" --max-tokens 300 --concurrency 8 \
        --policy-columns "${LEMON_COLUMNS:-single-small,single-medium,single-large,pot-medium,pot-large}" \
        --out "$out/evals" --name "$name-columns" -q ;;
    eval-learned)  # the policy the package ships (--policy learned), as a user runs it
      lemon eval --policy learned --table "$tables/$bench-test" \
        --limit "${LEMON_EVAL_LIMIT:-0}" --max-tokens 300 --policy-attempts 1 --policy-max-tokens 96 --concurrency 8 \
        --out "$out/evals" --name shipped-learned -q ;;
    eval-*)
      name=${stage#eval-}
      lemon eval --policy "policies/tables/$bench-$name" --table "$tables/$bench-test" \
        --limit "${LEMON_EVAL_LIMIT:-0}" --max-tokens 300 --policy-attempts 1 --policy-max-tokens 96 --concurrency 8 \
        --out "$out/evals" --name "$name" -q ;;
    report)  # routers and baselines always; the policy's evaluations where there are some
      runs=()
      for dir in "$out"/evals/*/; do [ -d "$dir" ] && runs+=(--policy-run "$dir"); done
      case "$bench" in mmlu) runs+=(--cheap-team quick-medium) ;; esac
      mkdir -p "$out"
      lemon report "$tables/$bench-test" "${runs[@]}" --json > "$out/report.json"
      lemon report "$tables/$bench-test" "${runs[@]}" --markdown "$out/report.md" --png "$out/report.png" >/dev/null ;;
    *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
done
