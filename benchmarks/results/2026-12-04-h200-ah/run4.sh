#!/bin/bash
# Run 4 (GPU): does the ptxas matter for grouped_glu_mlp's speed? Once torch.compile has
# compiled a kernel, inductor points TRITON_PTXAS_PATH at torch's ptxas (CUDA 13.0) and the
# kernels tilefuse compiles after that are assembled by it (run 1), so issue 16's as-called
# runs (the compiled composition warmed up first) timed tilefuse's kernels from CUDA 13.0's
# ptxas. Two processes, one per ptxas (a process cannot hold both builds: Triton's cache keys
# on the first ptxas version it reads), each timing tilefuse as called and the eager
# composition (torch._grouped_mm and torch ops: no Triton kernel, the normaliser across the
# two processes), bf16, interleave 32, 3 shapes, 7 rounds, graph replay.
#   OUT=... bash benchmarks/results/2026-12-04-h200-ah/run4.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
mkdir -p $OUT/run4
TP=$(python3 -c "import os, torch; print(os.path.join(os.path.dirname(torch.__file__), 'bin', 'ptxas'))")
for ptxas in triton torch; do
  if [ $ptxas = torch ]; then export TRITON_PTXAS_PATH=$TP; else unset TRITON_PTXAS_PATH; fi
  TILEFUSE_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) timeout 170 python3 benchmarks/grouped_compose_gpu_check.py \
    --providers "eager composition,tilefuse" --shapes 1,2,3 --interleaves 32 --rounds 7 --profile none \
    > $OUT/run4/as_called-$ptxas-ptxas.txt 2>&1
  echo "exit $?" >> $OUT/run4/as_called-$ptxas-ptxas.txt
  echo "== $ptxas's ptxas (TRITON_PTXAS_PATH=${TRITON_PTXAS_PATH:-unset})"
  grep -v "^  PASS" $OUT/run4/as_called-$ptxas-ptxas.txt | grep -E "^shape|composition|tilefuse|exit" | cut -c1-200
done
