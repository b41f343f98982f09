#!/usr/bin/env bash
# One learned policy over the mixed workload (issue 48), resumable, from the repository root:
#   bash experiments/mixed-policy/run.sh STAGE...
# STAGE:
#   configs     pin the benchmarks whose tables are complete (plan.json) and write configs/
#   rows        cost-sensitive teacher rows (v3 prompt, every cost weight) of each benchmark's
#               fit part: rows/<benchmark>.jsonl; rows.jsonl draws the first two pilots' SFT
#               rows from them, an equal share per benchmark (mixed_policy.py balance)
#   rows-router the router teacher's rows (lemon teacher tables --router logistic: per item and
#               weight, the team a logistic router on the task text, cross-fitted over the fit
#               parts of the item's kind, picks): rows/router.jsonl; rows-router.jsonl draws the
#               SFT's rows from them, an equal share per benchmark (the design's SFT reads them)
#   sft-S       (or sft-sS) the SFT warm start of seed S (policies/mixed/sft-sS), after rows-router
#   grpo-ARM-S  GRPO, ARM global or credit, seed S, from sft-sS; its metrics.jsonl is copied to
#               grpo/ARM-sS/
#   choose      the run and step with the best validation reward (chosen.json); a step before
#               the last is published from its checkpoint as its own version (grpo-ARM-sS-atK)
#   train-CONFIG  lemon train with configs/CONFIG.yaml (e.g. train-pilot-sft-s0)
#   val-NAME    policies/mixed/NAME on every pinned train table's validation part, answered from
#               the table: validation/NAME/<benchmark>/
#   valc-NAME   the same decoded under the spec grammar (--policy-constrained):
#               validation/NAME-constrained/<benchmark>/
#   val-report  lemon report --mix --validation with every version under validation/:
#               validation/report/
#   eval-NAME   policies/mixed/NAME on every pinned test table: evals/NAME/<benchmark>/
#               (eval-chosen: the chosen run)
#   eval-all    eval-NAME for every SFT and GRPO run of plan.json
#   eval-curve  the chosen run at each trained cost weight (--policy-cost-weight W):
#               evals/<run>-wW/, each one more method of the report (the policy's curve)
#   report      lemon report --mix with every evaluated policy (report/), and lemon report TABLE
#               with the chosen run's evaluations (reports/<run>/<benchmark>.json)
#   summary     summary.json
# Every command run is appended to commands.log (time, commit, command). LEMON_CODE: a checkout
# whose code runs it (a git worktree at a fixed commit, so edits elsewhere cannot change a run
# midway). LEMON_NICE: the niceness (default 10: the table build goes first).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=experiments/mixed-policy
tables=tables
code=.
if [ -n "${LEMON_CODE:-}" ]; then
  export PYTHONPATH="$LEMON_CODE/src:$LEMON_CODE/operator:$LEMON_CODE/services:$LEMON_CODE/training_jobs"
  code=$LEMON_CODE
fi
commit=$(git -C "$code" rev-parse --short HEAD)
nice_=${LEMON_NICE:-10}
logged() {  # run a command, recording it first
  echo "$(date -u +%FT%TZ) $commit $*" >> "$out/commands.log"
  nice -n "$nice_" "$@"
}
lemon() { logged .venv/bin/lemon "$@"; }
driver() { nice -n "$nice_" .venv/bin/python "$out/mixed_policy.py" "$@"; }
benchmarks() { driver benchmarks; }  # lines: NAME TEAMS
chosen_run() { .venv/bin/python -c "import json; print(json.load(open('$out/chosen.json'))['run'])"; }

evaluate() {  # NAME [WEIGHT]: policies/mixed/NAME on every pinned test table (at cost weight
  # WEIGHT, into evals/NAME-wWEIGHT; none: the v3 prompt's default)
  local name=$1 weight=${2:-} dir=$1 extra=()
  [ -d "policies/mixed/$name" ] || { echo "policies/mixed/$name: no such policy version" >&2; exit 2; }
  if [ -n "$weight" ]; then dir="$name-w$weight"; extra=(--policy-cost-weight "$weight"); fi
  while read -r bench teams; do
    if [ -s "$out/evals/$dir/$bench/items.jsonl" ] && [ -s "$out/evals/$dir/$bench/summary.json" ]; then
      echo "evals/$dir/$bench: done"; continue
    fi
    lemon eval --policy "policies/mixed/$name" --table "$tables/$bench-test" \
      --max-tokens 300 --policy-attempts 1 --policy-max-tokens 192 --concurrency 8 \
      "${extra[@]}" --out "$out/evals/$dir" --name "$bench" -q
  done < <(benchmarks)
}

validate() {  # NAME [constrained]: policies/mixed/NAME on every pinned train table's validation
  # part (by template or sibling), answered from the table: validation/NAME/<benchmark>/ (where
  # choices among versions are made; the test tables are read once, for the report);
  # constrained: decoded under the spec grammar, into validation/NAME-constrained/
  local name=$1 dir=$1 extra=()
  [ -d "policies/mixed/$name" ] || { echo "policies/mixed/$name: no such policy version" >&2; exit 2; }
  if [ "${2:-}" = constrained ]; then dir="$name-constrained"; extra=(--policy-constrained); fi
  while read -r bench teams; do
    if [ -s "$out/validation/$dir/$bench/summary.json" ]; then
      echo "validation/$dir/$bench: done"; continue
    fi
    lemon eval --policy "policies/mixed/$name" --table "$tables/$bench-train" --part validation \
      --max-tokens 300 --policy-attempts 1 --policy-max-tokens 192 --concurrency 8 \
      "${extra[@]}" --out "$out/validation/$dir" --name "$bench" -q
  done < <(benchmarks)
}

for stage in "$@"; do
  echo "== $(date -u +%FT%TZ) $stage"
  case "$stage" in
    configs) logged .venv/bin/python "$out/mixed_policy.py" configs ;;
    rows)
      mkdir -p "$out/rows"
      weights=$(.venv/bin/python -c "import json; print(','.join(map(str, json.load(open('$out/plan.json'))['cost_weights'])))")
      parts=()
      while read -r bench teams; do
        lemon teacher tables "$tables/$bench-train" --part fit --prompt-format lemon-policy-prompt/v3 \
          --cost-weights "$weights" --teams "$teams" --cost-sensitive --out "$out/rows/$bench.jsonl"
        parts+=("$out/rows/$bench.jsonl")
      done < <(benchmarks)
      logged .venv/bin/python "$out/mixed_policy.py" balance  # an equal share per benchmark
      wc -l "${parts[@]}" "$out/rows.jsonl" ;;
    rows-router)
      mkdir -p "$out/rows"
      weights=$(.venv/bin/python -c "import json; print(','.join(map(str, json.load(open('$out/plan.json'))['cost_weights'])))")
      train=()
      while read -r bench teams; do train+=("$tables/$bench-train"); done < <(benchmarks)
      lemon teacher tables "${train[@]}" --part fit --prompt-format lemon-policy-prompt/v3 \
        --cost-weights "$weights" --router logistic --out "$out/rows/router.jsonl"
      logged .venv/bin/python "$out/mixed_policy.py" balance --rows rows/router.jsonl --out rows-router.jsonl
      wc -l "$out/rows/router.jsonl" "$out/rows-router.jsonl" ;;
    sft-*) seed=${stage#sft-}; lemon train sft --config "$out/configs/sft-s${seed#s}.yaml" ;;
    train-*) config="$out/configs/${stage#train-}.yaml"  # any config, e.g. train-pilot-sft-s0
      kind=$(sed -n 's/^stage: //p' "$config"); lemon train "$kind" --config "$config" ;;
    grpo-*)
      arm_seed=${stage#grpo-}  # ARM-S (or ARM-sS)
      arm=${arm_seed%-*}; seed=${arm_seed##*-}; seed=${seed#s}
      lemon train grpo --config "$out/configs/grpo-$arm-s$seed.yaml"
      mkdir -p "$out/grpo/$arm-s$seed"
      cp "policies/mixed/grpo-$arm-s$seed/metrics.jsonl" "$out/grpo/$arm-s$seed/metrics.jsonl" ;;
    choose)
      logged .venv/bin/python "$out/mixed_policy.py" choose
      run=$(chosen_run)
      case "$run" in
        *-at*)  # the run's best validation step before its last: its checkpoint, published
          base=${run%-at*}; step=${run##*-at}
          [ -d "policies/mixed/$run" ] || lemon train grpo --config "$out/configs/$base.yaml" --checkpoint "$step" ;;
      esac
      echo "chosen: $run" ;;
    eval-chosen) evaluate "$(chosen_run)" ;;
    eval-curve)  # the chosen run at every trained cost weight: its accuracy-cost curve
      weights=$(.venv/bin/python -c "import json; print(' '.join(map(str, json.load(open('$out/plan.json'))['cost_weights'])))")
      for weight in $weights; do evaluate "$(chosen_run)" "$weight"; done ;;
    eval-all)
      for seed in 0 1 2; do
        for name in "sft-s$seed" "grpo-global-s$seed" "grpo-credit-s$seed"; do evaluate "$name"; done
      done ;;
    eval-*) evaluate "${stage#eval-}" ;;
    report)
      list=$(benchmarks | cut -d' ' -f1 | paste -sd, -)
      policies=()
      for dir in "$out"/evals/*/; do
        [ -d "$dir" ] && policies+=(--policy "$(basename "$dir")=${dir%/}")
      done
      if [ -f "$out/chosen.json" ]; then
        run=$(chosen_run)
        policies+=(--policy "chosen=$out/evals/$run")
        mkdir -p "$out/reports/$run"
        while read -r bench teams; do
          lemon report "$tables/$bench-test" --train "$tables/$bench-train" --teams "$teams" \
            --policy-run "$out/evals/$run/$bench" --json > "$out/reports/$run/$bench.json"
        done < <(benchmarks)
      fi
      lemon report --mix "$tables" --benchmarks "$list" "${policies[@]}" --out "$out/report" > /dev/null ;;
    val-report)  # every version evaluated on validation, in the mixed report on those parts
      list=$(benchmarks | cut -d' ' -f1 | paste -sd, -)
      policies=()
      for dir in "$out"/validation/*/; do
        [ -d "$dir" ] && [ "$(basename "$dir")" != report ] && policies+=(--policy "$(basename "$dir")=${dir%/}")
      done
      lemon report --mix "$tables" --benchmarks "$list" --validation "${policies[@]}" \
        --out "$out/validation/report" > /dev/null ;;
    valc-*) validate "${stage#valc-}" constrained ;;
    val-*) validate "${stage#val-}" ;;
    summary) logged .venv/bin/python "$out/mixed_policy.py" summary ;;
    *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
done
