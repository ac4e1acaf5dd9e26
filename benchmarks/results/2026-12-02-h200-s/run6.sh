#!/bin/bash
# Run 6: run6_wgrad_shared_blocks.py (fp8_block's wgrad: the shared blocks' loads paired, or
# zeroed in the A tile only), bitwise against the shipped kernel and timed.
#   OUT=... bash benchmarks/results/2026-12-02-h200-s/run6.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-s6
mkdir -p $OUT/run6
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run6/gpu.txt
timeout 300 python3 benchmarks/results/2026-12-02-h200-s/run6_wgrad_shared_blocks.py > $OUT/run6/variants.txt 2>&1
echo "exit $?" >> $OUT/run6/variants.txt; grep -v Warn $OUT/run6/variants.txt
