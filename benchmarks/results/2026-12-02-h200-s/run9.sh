#!/bin/bash
# Run 9: run9_wgrad_one_loop.py (fp8_block's wgrad with every block, shared or not, in one
# pipelined loop through the descriptors), against the shipped kernel.
#   OUT=... bash benchmarks/results/2026-12-02-h200-s/run9.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-s9
mkdir -p $OUT/run9
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run9/gpu.txt
timeout 200 python3 benchmarks/results/2026-12-02-h200-s/run9_wgrad_one_loop.py > $OUT/run9/variants.txt 2>&1
echo "exit $?" >> $OUT/run9/variants.txt; grep -v Warn $OUT/run9/variants.txt | grep -v "^$"
