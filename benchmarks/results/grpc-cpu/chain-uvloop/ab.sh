#!/bin/bash
# Alternate the parent commit (a git worktree at /work/stable, first on PYTHONPATH) and HEAD
# (/work/main), each `bench_grpc.py --json --no-ghz --per-client N`; writes parent-I.json and
# head-I.json here. Usage: bash ab.sh PAIRS [PER_CLIENT]
cd /work/main
S=/work/stable
D=benchmarks/results/grpc-cpu/chain-uvloop
for i in $(seq 1 $1); do
  for side in parent head; do
    if [ $side = parent ]; then export PYTHONPATH="$S/src:$S/operator:$S/services:$S/training_jobs:$S"; B=$S/benchmarks/bench_grpc.py; else unset PYTHONPATH; B=benchmarks/bench_grpc.py; fi
    .venv/bin/python $B --json --no-ghz --per-client ${2:-100} --out $D/$side-$i.json > /dev/null 2>&1
    python3 -c "
import json;d=json.load(open('$D/$side-$i.json'))
print('$side $i',{k:d.get(k) for k in ['rps','p50_ms','p99_ms','floor_p99_ms','server_cpu_ms_per_request','floor_cpu_ms_per_request','event_loop','loadavg_1m_before']})"
  done
done
