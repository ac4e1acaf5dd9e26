#!/bin/bash
# Run 1 (GPU, any card): run1_gauss_m1.py, the |m|=1 layer GEMM of issue 15's three shapes as
# Gauss's three-product complex multiplication against the dense four-product GEMM (same Triton
# form, IEEE dots) and cuBLAS fp32, with its error against float64.
#   OUT=... bash benchmarks/results/2026-12-07-h200-bf/run1.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $OUT/run1/gpu.txt
export PYTHONUNBUFFERED=1
timeout 240 python3 benchmarks/results/2026-12-07-h200-bf/run1_gauss_m1.py --rounds 3 > $OUT/run1/gauss.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run1/gauss.txt
cat $OUT/run1/gauss.txt
