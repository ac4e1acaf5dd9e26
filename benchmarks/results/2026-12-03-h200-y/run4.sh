#!/bin/bash
# Run 4 (GPU only): a register-tiled Gluon FMA GEMM for the exact path's backward GEMM pair
# (run4_fma_gemm.py), bitwise against so2_gemm_kernel and timed at the three shapes.
#   OUT=... bash benchmarks/results/2026-12-03-h200-y/run4.sh
set -u
cd "$(dirname "$0")/../../.."
R=benchmarks/results/2026-12-03-h200-y
mkdir -p $OUT/run4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run4/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run4/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=src
timeout 300 python3 $R/run4_fma_gemm.py > $OUT/run4/fma.txt 2>&1; echo "exit $?" >> $OUT/run4/fma.txt
cat $OUT/run4/fma.txt
