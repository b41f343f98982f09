#!/bin/bash
# alternate parent (/work/stable) and HEAD (/work/main), lemon bench grpc --json
cd /work/main
S=/work/stable
for i in $(seq 1 $1); do
  for side in parent head; do
    if [ $side = parent ]; then export PYTHONPATH="$S/src:$S/operator:$S/services:$S/training_jobs:$S"; B=$S/benchmarks/bench_grpc.py; else unset PYTHONPATH; B=benchmarks/bench_grpc.py; fi
    .venv/bin/python $B --json --no-ghz --per-client ${2:-60} --out /tmp/ab/$side-$i.json > /dev/null 2>&1
    python3 -c "
import json;d=json.load(open('/tmp/ab/$side-$i.json'))
print('$side $i',{k:d[k] for k in ['rps','p50_ms','p99_ms','floor_p99_ms','server_cpu_ms_per_request','floor_cpu_ms_per_request','loadavg_1m_before']})"
  done
done
