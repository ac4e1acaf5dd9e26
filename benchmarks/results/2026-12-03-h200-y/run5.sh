#!/bin/bash
# Run 5 (GPU only): run 4's FMA GEMM with its K tiles staged by cp.async
# (run5_fma_staged.py), bitwise against so2_gemm_kernel and timed at the three shapes.
#   OUT=... bash benchmarks/results/2026-12-03-h200-y/run5.sh
set -u
cd "$(dirname "$0")/../../.."
R=benchmarks/results/2026-12-03-h200-y
mkdir -p $OUT/run5
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run5/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run5/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=src
timeout 300 python3 $R/run5_fma_staged.py > $OUT/run5/fma.txt 2>&1; echo "exit $?" >> $OUT/run5/fma.txt
cat $OUT/run5/fma.txt
