#!/bin/bash
# Run 6 (prepared for the next session, not run here): run6_weight_stationary.py, the level-3 backward GEMM pair
# with each program's weights resident in shared memory against the wgmma relay kernel, bitwise and timed.
#   OUT=... bash benchmarks/results/2026-12-02-h200-u/run6.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run6
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run6/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run6/gpu.txt
PYTHONUNBUFFERED=1 PYTHONPATH=src timeout 400 python3 benchmarks/results/2026-12-02-h200-u/run6_weight_stationary.py \
  > $OUT/run6/ws.txt 2>&1; echo "exit $?" >> $OUT/run6/ws.txt
cat $OUT/run6/ws.txt
