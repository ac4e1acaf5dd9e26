#!/bin/bash
# Run 7 (GPU only): where run 6's producer-warp kernel differs from the shipped one
# (run7_ws_debug.py).   OUT=... bash benchmarks/results/2026-12-03-h200-y/run7.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run7
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run7/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run7/gpu.txt
PYTHONUNBUFFERED=1 PYTHONPATH=src WS_MAXNREG=${WS_MAXNREG:-80} timeout 120 python3 benchmarks/results/2026-12-03-h200-y/run7_ws_debug.py 20000 100000 647000 \
  > $OUT/run7/debug.txt 2>&1; echo "exit $?" >> $OUT/run7/debug.txt
cat $OUT/run7/debug.txt
