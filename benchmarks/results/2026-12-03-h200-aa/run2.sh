#!/bin/bash
# Run 2 (GPU only): run2_ws_wgrad.py: the fp8_block wgrads through the warp-specialised Gluon
# kernel, bitwise against grouped_wgrad_kernel, then timed beside it and CUTLASS's bf16 wgrads.
#   OUT=... bash benchmarks/results/2026-12-03-h200-aa/run2.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-aa2
mkdir -p $OUT/run2
timeout 400 python3 benchmarks/results/2026-12-03-h200-aa/run2_ws_wgrad.py > $OUT/run2/wgrad.txt 2>&1
echo "exit $?" >> $OUT/run2/wgrad.txt
grep -v Warn $OUT/run2/wgrad.txt
