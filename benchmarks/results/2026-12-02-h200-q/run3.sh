#!/bin/bash
# Run 3: the so2 L2-C32 and L1-C32 keys (backward and forward) re-swept on the current kernels
# (the 1-D grid, the fused sigma-pass candidates), each exported as soon as it is swept (the
# call has little device time left).
#   OUT=... bash benchmarks/results/2026-12-02-h200-q/run3.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-q3
mkdir -p $OUT/run3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run3/gpu.txt
for s in 2x32 1x32; do
  for p in bwd fwd; do
    timeout 90 python3 -m tilefuse.cli tune --op so2_mixing_stack --shape $s --pass $p --force --no-progress \
      >> $OUT/run3/tune-so2.txt 2>&1; echo "tune $s $p exit $?" >> $OUT/run3/tune-so2.txt
    python3 -m tilefuse.cli tune --export-builtin $OUT/run3 > /dev/null 2>&1
  done
done
grep -E "^so2_mixing_stack  |exit" $OUT/run3/tune-so2.txt
