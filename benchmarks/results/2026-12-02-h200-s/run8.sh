#!/bin/bash
# Run 8: run8_fp8_roles_vs_bf16.py (each fp8_block role as the op runs it against the bf16
# torch._grouped_mm GEMM of the same work; the quantizers).
#   OUT=... bash benchmarks/results/2026-12-02-h200-s/run8.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-s8
mkdir -p $OUT/run8
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run8/gpu.txt
timeout 250 python3 benchmarks/results/2026-12-02-h200-s/run8_fp8_roles_vs_bf16.py > $OUT/run8/roles.txt 2>&1
echo "exit $?" >> $OUT/run8/roles.txt; grep -v Warn $OUT/run8/roles.txt
