#!/bin/bash
# Run 24 (an H200, the device time left after run 23): run 19's fp8_block halves sweeps for the
# H200 table (the spec's three shapes, SwiGLU, no bias), the table exported after them.
#   OUT=... [LIMIT=seconds] bash benchmarks/results/2026-12-07-h200-bf/run24.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run24
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run24/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run24/gpu.txt
cat $OUT/run24/gpu.txt
export PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-bf24
for s in 8x16384x4096x3584-s0 64x32768x2048x1408-s0 128x65536x2048x768-s0; do
  timeout $(( ${LIMIT:-585} - 15 - SECONDS )) python3 -m tilefuse.cli tune --op grouped_glu_mlp --shape $s \
    --dtype fp8_block --force --no-progress >> $OUT/run24/tune.txt 2>&1
  echo "tune $s exit $? at ${SECONDS}s" >> $OUT/run24/tune.txt
done
python3 -m tilefuse.cli tune --export-builtin $OUT/run24 > /dev/null 2>&1
grep -E "^grouped_glu_mlp  |exit" $OUT/run24/tune.txt | cut -c1-220
