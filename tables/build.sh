#!/usr/bin/env bash
# Fill the shipped outcome tables piece by piece, niced, committing each finished piece.
#
#   bash tables/build.sh [PLAN]     (default PLAN: plan.txt beside this file)
#
# Each line of the plan is `DIR BENCHMARK SPLIT LIMIT TEAM,TEAM,...` (DIR under this folder).
# A line is one `lemon table build`: it runs only the cells its table lacks, so the script can
# be stopped at any moment and started again; a finished line is committed (only its table's
# files) before the next starts. LEMON_TABLE_NO_COMMIT=1 builds without committing.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
plan="${1:-$here/plan.txt}"
cd "$root"
# LEMON_CODE: a checkout whose code builds the tables (e.g. a git worktree at a fixed commit),
# so edits in this one cannot change a build midway; the tables are written here.
if [ -n "${LEMON_CODE:-}" ]; then
  export PYTHONPATH="$LEMON_CODE/src:$LEMON_CODE/operator:$LEMON_CODE/services:$LEMON_CODE/training_jobs"
fi
while read -r dir benchmark split limit teams; do
  case "$dir" in ''|'#'*) continue ;; esac
  echo "== $(date -u +%FT%TZ) $dir $benchmark/$split n=$limit $teams"
  nice -n 19 .venv/bin/lemon table build "$here/$dir" --benchmark "$benchmark" --split "$split" \
    --limit "$limit" --teams "$teams" --concurrency "${LEMON_TABLE_CONCURRENCY:-24}" \
    --profile embedded-tables --profiles "$here/profiles.yaml" -q \
    || { echo "build failed: $dir $teams (exit $?)"; continue; }
  if [ -z "${LEMON_TABLE_NO_COMMIT:-}" ] && [ -n "$(git status --porcelain -- "$here/$dir")" ]; then
    for attempt in 1 2 3 4 5 6; do
      git add -- "$here/$dir" && \
        git commit -q -m "tables: $dir $benchmark/$split n=$limit $teams" -- "$here/$dir" && break
      sleep 10  # another commit holds the index lock
    done
    # the mixed workload's report follows its tables (with this checkout's code, not LEMON_CODE)
    report="$root/experiments/mixed-workload"
    if [ -f "$report/run.sh" ] && env -u PYTHONPATH bash "$report/run.sh" >/dev/null 2>&1 \
        && [ -n "$(git status --porcelain -- "$report")" ]; then
      git add -- "$report"/report.* && git commit -q -m "mixed-workload report after $dir" -- "$report"/report.* \
        || echo "could not commit the report after $dir"
    fi
    # the default team per task kind is generated from the train tables (python -m lemon.generate
    # writes it; a test checks it fresh): a new complete column may change it
    fixed=src/lemon/policy/fixed_teams.json
    if env -u PYTHONPATH .venv/bin/python -c "import sys; from lemon.generate import GENERATED; \
open(sys.argv[1], 'w', encoding='utf-8').write(GENERATED[sys.argv[1]]())" "$fixed" \
        && [ -n "$(git status --porcelain -- "$fixed")" ]; then
      git commit -q -m "default team per task kind regenerated after $dir (python -m lemon.generate)" -- "$fixed" \
        || echo "could not commit $fixed after $dir"
    fi
  fi
done < "$plan"
echo "== $(date -u +%FT%TZ) plan done"
