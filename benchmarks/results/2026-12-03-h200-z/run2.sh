#!/bin/bash
# Run 2 (GPU only): exact layer-GEMM tiles with 64 outputs a thread on 4 warps
# (run2_exact_tiles.py).   OUT=... bash benchmarks/results/2026-12-03-h200-z/run2.sh
set -u
cd "$(dirname "$0")/../../.."
R=benchmarks/results/2026-12-03-h200-z
mkdir -p $OUT/run2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run2/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run2/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=src
timeout 400 python3 $R/run2_exact_tiles.py > $OUT/run2/tiles.txt 2>&1; echo "exit $?" >> $OUT/run2/tiles.txt
cat $OUT/run2/tiles.txt
