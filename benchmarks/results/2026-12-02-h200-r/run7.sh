#!/bin/bash
# Run 7 (prepared, not run): run7_wgrad_variants.py, fp8_block's wgrad kernel with its shared
# 128-token blocks read through TMA and a 168-register cap (three programs an SM), bitwise
# against the shipped kernel and timed, balanced and skewed counts.
#   OUT=... bash benchmarks/results/2026-12-02-h200-r/run7.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-r7
mkdir -p $OUT/run7
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run7/gpu.txt
timeout 240 python3 benchmarks/results/2026-12-02-h200-r/run7_wgrad_variants.py > $OUT/run7/variants.txt 2>&1
echo "exit $?" >> $OUT/run7/variants.txt; grep -v Warn $OUT/run7/variants.txt
