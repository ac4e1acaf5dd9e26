#!/bin/bash
# Run 3 (GPU only): run3_bf16_wgrad.py: the 16-bit wgrads through the warp-specialised Gluon kernel
# (ws_wgrad.py), checked against float64 and timed beside CUTLASS (_grouped_mm) and grouped_wgrad_kernel.
#   OUT=... bash benchmarks/results/2026-12-03-h200-aa/run3.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-aa3
mkdir -p $OUT/run3
timeout 400 python3 benchmarks/results/2026-12-03-h200-aa/run3_bf16_wgrad.py > $OUT/run3/bf16-wgrad.txt 2>&1
echo "exit $?" >> $OUT/run3/bf16-wgrad.txt
grep -v Warn $OUT/run3/bf16-wgrad.txt
