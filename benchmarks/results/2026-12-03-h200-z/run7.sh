#!/bin/bash
# Run 7 (GPU only): the ws store GEMM with a coalescing epilogue (COALESCED,
# run7_coalesced.py).   OUT=... bash benchmarks/results/2026-12-03-h200-z/run7.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
mkdir -p $OUT/run7
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run7/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run7/gpu.txt
timeout 150 python3 benchmarks/results/2026-12-03-h200-z/run7_coalesced.py > $OUT/run7/coalesced.txt 2>&1
echo "exit $?" >> $OUT/run7/coalesced.txt
cat $OUT/run7/coalesced.txt
