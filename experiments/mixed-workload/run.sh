#!/usr/bin/env bash
# The mixed workload's headroom report, from the outcome tables alone (no model runs):
#
#   bash experiments/mixed-workload/run.sh [BENCHMARKS]
#
# BENCHMARKS: a comma-separated list of the benchmarks whose train and test tables are complete
# enough to compare (default: every <benchmark>-test table with a -train beside it). The tables
# are built by `bash tables/build.sh` (tables/plan.txt, sections 6-8). Writes report.json,
# report.md and report.png beside this script; tests/unit/test_mixed_report.py rebuilds
# report.json from the tables it names and checks it is fresh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."
args=(report --mix tables --out "$here")
[ -n "${1:-}" ] && args+=(--benchmarks "$1")
.venv/bin/lemon "${args[@]}" >/dev/null
echo "wrote $here/report.json"
