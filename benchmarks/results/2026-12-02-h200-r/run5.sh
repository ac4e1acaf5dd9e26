#!/bin/bash
# Run 5: run5_fp8_dglu.py (fp8_block's dGLU at 64x64, pointers or TMA, 3 or 4 stages; the whole step with each).
#   OUT=... bash benchmarks/results/2026-12-02-h200-r/run5.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-r5
mkdir -p $OUT/run5
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run5/gpu.txt
timeout 150 python3 benchmarks/results/2026-12-02-h200-r/run5_fp8_dglu.py > $OUT/run5/dglu.txt 2>&1
echo "exit $?" >> $OUT/run5/dglu.txt; grep -v Warn $OUT/run5/dglu.txt
