#!/bin/bash
# Run 6 (GPU only): the level-3 wgmma GEMM with its TMA loads in a producer warp (run6_ws.py):
# the backward GEMM pair bitwise and timed, every mode bitwise, the whole level-3 step.
#   OUT=... bash benchmarks/results/2026-12-03-h200-y/run6.sh
set -u
cd "$(dirname "$0")/../../.."
R=benchmarks/results/2026-12-03-h200-y
mkdir -p $OUT/run6
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run6/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run6/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=src
timeout 150 python3 $R/run6_ws.py --pairs > $OUT/run6/pairs.txt 2>&1; echo "exit $?" >> $OUT/run6/pairs.txt
cat $OUT/run6/pairs.txt
timeout 120 python3 $R/run6_ws.py --modes > $OUT/run6/modes.txt 2>&1; echo "exit $?" >> $OUT/run6/modes.txt
tail -3 $OUT/run6/modes.txt
timeout 150 python3 $R/run6_ws.py --step > $OUT/run6/step.txt 2>&1; echo "exit $?" >> $OUT/run6/step.txt
cat $OUT/run6/step.txt
