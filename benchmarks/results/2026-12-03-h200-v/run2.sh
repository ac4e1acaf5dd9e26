#!/bin/bash
# Run 2 (GPU only): run2_tma_a.py, the level-3 backward GEMM pair with its activation tiles brought by TMA into a
# shared-memory ring 2-4 K tiles deep, against the shipped wgmma kernel: bitwise and timed.
#   OUT=... bash benchmarks/results/2026-12-03-h200-v/run2.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run2/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run2/gpu.txt
PYTHONUNBUFFERED=1 PYTHONPATH=src timeout 500 python3 benchmarks/results/2026-12-03-h200-v/run2_tma_a.py \
  > $OUT/run2/tma_a.txt 2>&1; echo "exit $?" >> $OUT/run2/tma_a.txt
cat $OUT/run2/tma_a.txt
