#!/bin/bash
# Run 6 (GPU only): the ws store GEMM with its chunk scales two chunks ahead (SCALE_AHEAD 2,
# run6_scale_ahead.py).   OUT=... bash benchmarks/results/2026-12-03-h200-z/run6.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
mkdir -p $OUT/run6
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run6/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run6/gpu.txt
timeout 200 python3 benchmarks/results/2026-12-03-h200-z/run6_scale_ahead.py > $OUT/run6/ahead.txt 2>&1
echo "exit $?" >> $OUT/run6/ahead.txt
cat $OUT/run6/ahead.txt
