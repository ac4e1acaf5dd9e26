#!/bin/bash
# Run 4: run4_fp8_tiles.py (fp8_block's fc2, fc1 dgrad, dGLU and wgrads at more TMA tiles).
#   OUT=... bash benchmarks/results/2026-12-02-h200-r/run4.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-r4
mkdir -p $OUT/run4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run4/gpu.txt
timeout 250 python3 benchmarks/results/2026-12-02-h200-r/run4_fp8_tiles.py > $OUT/run4/tiles.txt 2>&1
echo "exit $?" >> $OUT/run4/tiles.txt; grep -v Warn $OUT/run4/tiles.txt
