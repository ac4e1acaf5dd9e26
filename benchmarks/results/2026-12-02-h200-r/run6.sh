#!/bin/bash
# Run 6: run6_fp8_dglu_step.py (fp8_block's whole step with three dGLU tiles).
#   OUT=... bash benchmarks/results/2026-12-02-h200-r/run6.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-r5
mkdir -p $OUT/run6
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run6/gpu.txt
timeout 100 python3 benchmarks/results/2026-12-02-h200-r/run6_fp8_dglu_step.py > $OUT/run6/step.txt 2>&1
echo "exit $?" >> $OUT/run6/step.txt; grep -v Warn $OUT/run6/step.txt
