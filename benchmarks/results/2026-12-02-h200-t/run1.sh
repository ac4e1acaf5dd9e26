#!/bin/bash
# Run 1 (GPU only): run1_gluon_fp8_probe.py, a dense block-scaled fp8 GEMM with the per-chunk
# rescale overlapped with the next chunk's wgmma (Gluon) against the Triton form, cuBLAS bf16
# and cuBLAS fp8.   OUT=... bash benchmarks/results/2026-12-02-h200-t/run1.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run1/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run1/gpu.txt
PYTHONUNBUFFERED=1 PYTHONPATH=src timeout 400 python3 benchmarks/results/2026-12-02-h200-t/run1_gluon_fp8_probe.py \
  > $OUT/run1/probe.txt 2>&1; echo "exit $?" >> $OUT/run1/probe.txt
cat $OUT/run1/probe.txt | grep -v "^  *$" | head -150
