#!/bin/bash
# Run 3 (GPU only): the shipped wgmma GEMM with registers capped for 5 / 6 programs an SM
# (run3_occupancy_caps.py): the backward GEMM pair bitwise and timed, then the level-3 step.
#   OUT=... bash benchmarks/results/2026-12-03-h200-y/run3.sh
set -u
cd "$(dirname "$0")/../../.."
R=benchmarks/results/2026-12-03-h200-y
mkdir -p $OUT/run3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run3/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run3/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=src
timeout 240 python3 $R/run3_occupancy_caps.py --step > $OUT/run3/caps.txt 2>&1; echo "exit $?" >> $OUT/run3/caps.txt
cat $OUT/run3/caps.txt
