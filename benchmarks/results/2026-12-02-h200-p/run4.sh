#!/bin/bash
# Run 4: the so2 keys L3-C32 and L6-C32 (backward, forward, level 3) re-swept on the 1-D grid,
# against the built-in entries swept on the 2-D grid; exported.
#   OUT=... bash benchmarks/results/2026-12-02-h200-p/run4.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-p4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
for s in 3x32 6x32; do
  for p in bwd fwd level3; do
    timeout 150 python3 -m tilefuse.cli tune --op so2_mixing_stack --shape $s --pass $p --force --no-progress \
      >> $OUT/tune-so2.txt 2>&1; echo "tune $s $p exit $?" >> $OUT/tune-so2.txt
  done
done
python3 -m tilefuse.cli tune --export-builtin $OUT >> $OUT/tune-so2.txt 2>&1
grep -E "^so2_mixing_stack  |exit" $OUT/tune-so2.txt
