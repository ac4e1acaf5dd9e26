#!/bin/bash
# Run 3: run3_fp8_role_caps.py (fp8_block's fc1 + GLU, fc2, dGLU and fc1 dgrad under register caps).
#   OUT=... bash benchmarks/results/2026-12-02-h200-s/run3.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-s3
mkdir -p $OUT/run3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run3/gpu.txt
timeout 400 python3 benchmarks/results/2026-12-02-h200-s/run3_fp8_role_caps.py > $OUT/run3/caps.txt 2>&1
echo "exit $?" >> $OUT/run3/caps.txt; grep -v Warn $OUT/run3/caps.txt
