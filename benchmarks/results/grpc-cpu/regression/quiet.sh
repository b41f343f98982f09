#!/bin/bash
# Worktrees of the older commits at /work/wt/COMMIT (git worktree add --detach /work/wt/COMMIT COMMIT).
# the quiet-machine measurements, in one go: gRPC A/B over commits, lemon bench grpc x5, lemon bench tiers
cd /work/main
D=benchmarks/results/grpc-cpu/regression
mkdir -p $D
for round in 1 2 3; do
  for side in /work/wt/303c750 /work/wt/63b06ed /work/wt/0ae9ec5 HEAD-asyncio HEAD; do
    case $side in
      HEAD-asyncio) .venv/bin/python benchmarks/results/grpc-cpu/regression/ab_sides.py "" 100 --event-loop asyncio ;;
      HEAD) .venv/bin/python benchmarks/results/grpc-cpu/regression/ab_sides.py "" 100 ;;
      *) .venv/bin/python benchmarks/results/grpc-cpu/regression/ab_sides.py "$side" 100 ;;
    esac >> $D/runs.jsonl 2>> quiet.err
  done
done
for i in 20 21 22 23 24; do
  .venv/bin/python benchmarks/record.py benchmarks/results/grpc-cpu/run-$i.json grpc >> quiet.err 2>&1
done
.venv/bin/python benchmarks/record.py benchmarks/results/tiers-cpu/bench-tiers-quiet.json tiers >> quiet.err 2>&1
echo done > quiet.done
