#!/bin/bash
# Run 5 (GPU only): run5_res_prefetch.py, the level-3 backward GEMM pair with the epilogue residual tile prefetched
# by TMA before the K loop, against the shipped kernel (run 3 tree): bitwise and timed.
#   OUT=... bash benchmarks/results/2026-12-03-h200-v/run5.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run5
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run5/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run5/gpu.txt
PYTHONUNBUFFERED=1 PYTHONPATH=src timeout 500 python3 benchmarks/results/2026-12-03-h200-v/run5_res_prefetch.py \
  > $OUT/run5/res.txt 2>&1; echo "exit $?" >> $OUT/run5/res.txt
cat $OUT/run5/res.txt
