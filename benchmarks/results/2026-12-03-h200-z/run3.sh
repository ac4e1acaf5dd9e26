#!/bin/bash
# Run 3 (GPU only): fp8_block's store-epilogue grouped GEMM warp-specialised (run3_fp8_ws.py):
# bitwise against the Triton launch, then fc2 and fc1 dgrad at the spec's shapes.
#   OUT=... bash benchmarks/results/2026-12-03-h200-z/run3.sh
set -u
cd "$(dirname "$0")/../../.."
R=benchmarks/results/2026-12-03-h200-z
mkdir -p $OUT/run3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run3/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run3/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=src
timeout 300 python3 $R/run3_fp8_ws.py > $OUT/run3/ws.txt 2>&1; echo "exit $?" >> $OUT/run3/ws.txt
cat $OUT/run3/ws.txt
