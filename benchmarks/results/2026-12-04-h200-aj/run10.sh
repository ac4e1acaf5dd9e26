#!/bin/bash
# Run 10 (GPU; prepared): so2_mixing_stack sweeps the H200 table lacks.
#   1. the three shipped level-3 keys re-swept with the validation that now covers the training
#      backward's weight gradients (records "weight_grads": true; until then a training backward
#      at level 3 runs exact);
#   2. the spec grid's (6, 96) and (6, 128), new in tune.DEFAULT_SHAPES: their exact backward and
#      forward keys;
#   3. the level-3 keys of (1, 32), (2, 32), (3, 64) and (6, 96), (6, 128), as the command's
#      time lasts (a tune that could run past 575 s is skipped and says so). Each key's result is exported after it (merge the exported table into
#      src/tilefuse/tuning/builtin/ by hand, keeping the other families' entries).
#   OUT=... bash benchmarks/results/2026-12-04-h200-aj/run10.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-aj10
mkdir -p $OUT/run10
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run10/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run10/gpu.txt
tune() {  # shape, pass, timeout; skipped when it could run past the 600 s call limit
  if (( SECONDS + $3 > 575 )); then echo "tune $1 $2 skipped at ${SECONDS}s" | tee -a $OUT/run10/tune-so2.txt; return; fi
  timeout $3 python3 -m tilefuse.cli tune --op so2_mixing_stack --shape $1 --pass $2 --force --no-progress \
    >> $OUT/run10/tune-so2.txt 2>&1; echo "tune $1 $2 exit $?" >> $OUT/run10/tune-so2.txt
  python3 -m tilefuse.cli tune --export-builtin $OUT/run10 > /dev/null 2>&1
  grep -E "^so2_mixing_stack  |exit" $OUT/run10/tune-so2.txt | tail -2
}
for s in 3x32 6x32 2x64; do tune $s level3 100; done
for s in 6x96 6x128; do tune $s bwd 60; tune $s fwd 40; done
for s in 1x32 2x32 3x64 6x96 6x128; do tune $s level3 80; done
