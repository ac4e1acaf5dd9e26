#!/bin/bash
# Run 2: run2_fp8_step.py (fp8_block's whole step after the wgrad change, and the op as called).
#   OUT=... bash benchmarks/results/2026-12-02-h200-s/run2.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-s2
mkdir -p $OUT/run2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run2/gpu.txt
timeout 400 python3 benchmarks/results/2026-12-02-h200-s/run2_fp8_step.py > $OUT/run2/step.txt 2>&1
echo "exit $?" >> $OUT/run2/step.txt; grep -v Warn $OUT/run2/step.txt
