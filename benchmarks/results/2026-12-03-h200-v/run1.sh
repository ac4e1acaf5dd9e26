#!/bin/bash
# Run 1 (GPU only): run1_deferred.py, the level-3 backward GEMM pair with the 3xfp16 products accumulated
# across K (one row scale a K segment) against the shipped wgmma kernel; errors against float64 and times.
#   OUT=... bash benchmarks/results/2026-12-03-h200-v/run1.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run1/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run1/gpu.txt
PYTHONUNBUFFERED=1 PYTHONPATH=src timeout 500 python3 benchmarks/results/2026-12-03-h200-v/run1_deferred.py \
  > $OUT/run1/deferred.txt 2>&1; echo "exit $?" >> $OUT/run1/deferred.txt
cat $OUT/run1/deferred.txt
