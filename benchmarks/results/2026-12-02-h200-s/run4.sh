#!/bin/bash
# Run 4: the fp8_block sweep of the spec's three keys after the wgrad change and with the capped
# 64x128 candidate (tune._CANDIDATES_FP8), exported.
#   OUT=... bash benchmarks/results/2026-12-02-h200-s/run4.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-s4
mkdir -p $OUT/run4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run4/gpu.txt
timeout 400 python3 -m tilefuse.cli tune --op grouped_glu_mlp --dtype fp8_block --shape 8x16384x4096x3584 \
  --shape 64x32768x2048x1408 --shape 128x65536x2048x768 --force --rounds 6 --no-progress > $OUT/run4/tune-fp8.txt 2>&1
echo "tune exit $?" >> $OUT/run4/tune-fp8.txt
python3 -m tilefuse.cli tune --export-builtin $OUT/run4 >> $OUT/run4/tune-fp8.txt 2>&1
grep -v Warn $OUT/run4/tune-fp8.txt | tail -30
