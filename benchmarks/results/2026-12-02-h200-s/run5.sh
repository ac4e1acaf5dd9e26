#!/bin/bash
# Run 5: run5_launch_pieces.py (a DyT forward call's host time piece by piece), first in a
# fresh process.
#   OUT=... bash benchmarks/results/2026-12-02-h200-s/run5.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-s5
mkdir -p $OUT/run5
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run5/gpu.txt
timeout 200 python3 benchmarks/results/2026-12-02-h200-s/run5_launch_pieces.py > $OUT/run5/pieces.txt 2>&1
echo "exit $?" >> $OUT/run5/pieces.txt; grep -v Warn $OUT/run5/pieces.txt
