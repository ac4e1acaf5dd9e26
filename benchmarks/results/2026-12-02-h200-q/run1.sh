#!/bin/bash
# Run 1: run1_blockk.py (the so2 layer GEMM pairs at BLOCK_K = 2 Cf against Cf).
#   OUT=... bash benchmarks/results/2026-12-02-h200-q/run1.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run1/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run1/gpu.txt
PYTHONUNBUFFERED=1 PYTHONPATH=src timeout 560 python3 benchmarks/results/2026-12-02-h200-q/run1_blockk.py > $OUT/run1/blockk.txt 2>&1
